package domain

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Overload is how PostgreSQL refused a request under pressure.
type Overload int

// The kinds of Overload.
const (
	// NotOverload is any other error.
	NotOverload Overload = iota
	// Busy: a lock or statement timeout stopped the request; the rows
	// will be free in a moment.
	Busy
	// Unavailable: the database cannot be reached, or no connection was
	// free in time.
	Unavailable
)

// OverloadOf classifies err. A deadline it sees is taken for an inner one
// (the pool's acquire timeout, connect_timeout): the caller checks its own
// context first.
func OverloadOf(err error) Overload {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "55P03", // lock_not_available: lock_timeout
			code == "57014": // query_canceled: statement_timeout
			return Busy
		case code == "57P01", code == "57P02", code == "57P03", // admin or crash shutdown, cannot connect now
			code == "53300",               // too_many_connections
			strings.HasPrefix(code, "08"): // connection exceptions
			return Unavailable
		}
		return NotOverload
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	if errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.Timeout(err) {
		return Unavailable
	}
	return NotOverload
}
