//go:build !linux

package main

import (
	"context"
	"fmt"
	"time"
)

// rawLoop is closedLoop where epoll is not at hand (see rawloop_linux.go).
func (b *bench) rawLoop(ctx context.Context, name, server string, clients int, d time.Duration, t *tally,
	method, path, token, keyPrefix string, body []byte, check func(a answer) (bool, error)) (time.Duration, error) {
	cl := newClient(server)
	return b.closedLoop(ctx, name, clients, d, t, func(w, i int) (bool, error) {
		a, err := cl.do(method, path, token, fmt.Sprintf("%s-%d-%d", keyPrefix, w, i), body)
		if err != nil {
			return false, err
		}
		return check(a)
	}), nil
}
