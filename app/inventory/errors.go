package inventory

import (
	"fmt"

	"github.com/stockhold/stockhold/app/domain"
)

func errNotHeld(id fmt.Stringer, status HoldStatus) *domain.Error {
	return &domain.Error{Code: domain.CodeNotHeld, Detail: fmt.Sprintf("reservation %s is %s", id, status), Status: string(status)}
}

// errKeyReused refuses a hold whose Idempotency-Key made reservation id
// for another request.
func errKeyReused(key string, id fmt.Stringer) *domain.Error {
	return &domain.Error{Code: domain.CodeKeyReused,
		Detail: fmt.Sprintf("Idempotency-Key %q was used for a different request (reservation %s)", key, id)}
}
