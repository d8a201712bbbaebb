package inventory

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Code names a problem the way the API contract does.
type Code string

// The codes of the API contract, and a few of stockhold's own.
const (
	CodeInvalid               Code = "invalid_request"
	CodeNotFound              Code = "not_found"
	CodeUnknownSKU            Code = "unknown_sku"
	CodeUnknownCampaign       Code = "unknown_campaign"
	CodeOutOfStock            Code = "out_of_stock"
	CodeSKUPaused             Code = "sku_paused"
	CodeCampaignNotActive     Code = "campaign_not_active"
	CodeNotHeld               Code = "reservation_not_held"
	CodeInsufficientAvailable Code = "insufficient_available"
	CodeIdempotencyReused     Code = "idempotency_key_reused"
	CodeConflict              Code = "conflict"
	// CodeLimitExceeded refuses a hold that takes more units of one SKU
	// than its campaign allows in one order (max_per_order).
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeBusy refuses a request whose rows stayed locked past the lock
	// timeout (a long transaction holds them); the HTTP answer is 503 with
	// Retry-After, and a retry soon is likely to succeed.
	CodeBusy Code = "busy"
)

// Error is a failure the caller can act on: bad input, or a state that
// refuses the request. The HTTP layer maps Code to a status in one place;
// anything that is not an *Error is a bug or an outage (500).
type Error struct {
	Code   Code
	Detail string
	// SKU, Pool and Status add context where the contract asks for it:
	// which line of a hold failed, what state a reservation is in.
	SKU    string
	Pool   string
	Status string
	// Line is the index of the failing line of a bulk adjustment.
	Line *int
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Detail) }

// Invalid reports bad input.
func Invalid(format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Detail: fmt.Sprintf(format, args...)}
}

// ErrNotFound reports that no such thing (or none the caller may see) exists.
func ErrNotFound(what string) *Error {
	return &Error{Code: CodeNotFound, Detail: what + " not found"}
}

// notFound turns pgx.ErrNoRows into ErrNotFound, the one place that happens
// for reads by id; other errors pass through.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound(what)
	}
	return err
}

func errNotHeld(id fmt.Stringer, status string) *Error {
	return &Error{Code: CodeNotHeld, Detail: fmt.Sprintf("reservation %s is %s", id, status), Status: status}
}
