// Package dberr says what PostgreSQL's answers mean to the domain: a read
// that found no row is a not found (the one place pgx.ErrNoRows becomes
// domain.ErrNotFound), and a refusal under pressure is busy or
// unavailable. Domain packages and the HTTP layer use it; app/domain itself
// knows nothing of PostgreSQL.
package dberr

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/domain"
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
	// Unavailable: the database cannot be reached, does not take writes
	// (a standby, or a server changing role in a failover), or no
	// connection was free in time.
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
			code == "25006",               // read_only_sql_transaction: a standby, or a primary being demoted
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

// TimedOut reports whether err is PostgreSQL's statement_timeout (the
// request's statement ran too long), as opposed to a lock wait past
// lock_timeout: both are Busy, but they mean different things to read.
func TimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57014"
}

// NotFound turns pgx.ErrNoRows into domain.Missing(what); any other error,
// nil included, passes through. It is the one place a read by id that
// found no row becomes a not found.
func NotFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Missing(what)
	}
	return err
}

// NotFoundAs is NotFound for a thing that has a code of its own (an
// unknown campaign): no row is missing, err anything else.
func NotFoundAs(err error, missing *domain.Error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return missing
	}
	return err
}

// DatabaseLost reports whether err says the database went away under the
// caller (its connection dropped, the server shut down or restarted, a
// server that takes no writes, as in a failover), as opposed to the
// caller's own deadline or cancellation, which OverloadOf also counts as
// Unavailable.
func DatabaseLost(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return false
	}
	return OverloadOf(err) == Unavailable
}

// Unstorable reports whether PostgreSQL refused a value it cannot store: a
// NUL in text (22021, character_not_in_repertoire) or a \u0000 escape in
// jsonb (22P05, untranslatable_character). That is bad input, not a bug.
func Unstorable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "22P05" || pgErr.Code == "22021")
}

// BundleStock reports whether PostgreSQL refused a stock row for a SKU
// that is a bundle (trigger stock_not_a_bundle: a bundle has no stock of
// its own), and which SKU.
func BundleStock(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "stock_not_a_bundle" {
		return pgErr.Detail, true
	}
	return "", false
}
