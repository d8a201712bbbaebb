package api_test

import (
	"context"

	"github.com/stockhold/stockhold/app/auth"
)

func createKey(e *env, name string) (string, error) {
	return auth.Create(context.Background(), e.pool, name, auth.RoleShop)
}
