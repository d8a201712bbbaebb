// Package domain holds what every domain package shares and none owns: the
// errors a caller can act on (each with the code the API contract names)
// and the validation of names and free text. It imports nothing but the
// standard library (what PostgreSQL's answers mean is app/dberr's, how jobs
// are enqueued app/enqueue's), so every domain package, the workers and the
// HTTP layer can use it; the HTTP layer maps each code to its status in one
// place (app/api/problem.go).
package domain

import (
	"fmt"
)

// Code names a problem the way the API contract does.
type Code string

// The codes of the API contract, and a few of stockhold's own.
const (
	CodeInvalid         Code = "invalid_request"
	CodeNotFound        Code = "not_found"
	CodeUnknownSKU      Code = "unknown_sku"
	CodeUnknownCampaign Code = "unknown_campaign"
	// CodeUnknownClient refuses a stop-sale for a client no API key was
	// ever named.
	CodeUnknownClient         Code = "unknown_client"
	CodeOutOfStock            Code = "out_of_stock"
	CodeSKUPaused             Code = "sku_paused"
	CodeCampaignNotActive     Code = "campaign_not_active"
	CodeNotHeld               Code = "reservation_not_held"
	CodeInsufficientAvailable Code = "insufficient_available"
	CodeKeyReused             Code = "idempotency_key_reused"
	CodeConflict              Code = "conflict"
	// CodeLimitExceeded refuses a hold that breaks a limit on one SKU: its
	// campaign's max_per_order, or one of the SKU's pool (max_per_order,
	// min_per_order, step, max_per_customer).
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeBusy refuses a request whose rows stayed locked past the lock
	// timeout (a long transaction holds them); the HTTP answer is 503 with
	// Retry-After, and a retry soon is likely to succeed.
	CodeBusy Code = "busy"
	// CodeBooksUnbalanced refuses a change the database would not write
	// because a stock row's counters, a hold or its lines are not what the
	// service decided on: the books of that pool need a person.
	CodeBooksUnbalanced Code = "books_unbalanced"
	// CodeUnitUnavailable refuses a request naming units that are held,
	// sold, retired or in another pool; Units names them.
	CodeUnitUnavailable Code = "unit_unavailable"
	// CodeSerializedPool refuses a quantity adjustment of a pool whose
	// stock is units with an identity: it changes only through its units.
	CodeSerializedPool Code = "serialized_pool"
	// CodeStopSale refuses a new hold while the switch for everything
	// (stop-sale), or the one of the hold's client, is on; the HTTP answer is 503 with Retry-After. Reads,
	// confirms and releases go on.
	CodeStopSale Code = "stop_sale"
	// CodeNotEnded refuses to reinstate a hold that is still held or was
	// confirmed: only a released or expired hold can be held again.
	CodeNotEnded Code = "reservation_not_ended"
	// CodeUnknownPool refuses a request naming a pool its SKU does not
	// have (the SKU exists: unknown_sku means it has no stock at all).
	CodeUnknownPool Code = "unknown_pool"
	// CodeUnknownLocation: no location has that id.
	CodeUnknownLocation Code = "unknown_location"
	// CodeLocationInactive refuses a new hold at a location that is
	// inactive (its holds finish normally).
	CodeLocationInactive Code = "location_inactive"
	// CodeLocationNotAllowed refuses a hold naming a location the API
	// key's holds may not take stock from (a key bound to a sales
	// channel's locations).
	CodeLocationNotAllowed Code = "location_not_allowed"
	// CodeInsufficientQualityControl, CodeInsufficientDamaged,
	// CodeInsufficientSafetyStock and CodeInsufficientIncoming refuse a
	// move (or a receipt) that would take a state below zero; like
	// insufficient_available, the code names the state short.
	CodeInsufficientQualityControl Code = "insufficient_quality_control"
	CodeInsufficientDamaged        Code = "insufficient_damaged"
	CodeInsufficientSafetyStock    Code = "insufficient_safety_stock"
	CodeInsufficientIncoming       Code = "insufficient_incoming"
	// CodeCountBelowHeld refuses a stock count that finds fewer units on
	// the shelf than holds hold there, unless forced.
	CodeCountBelowHeld Code = "count_below_held"
	// CodeTransferNotInTransit refuses a receipt, close or cancel of a
	// transfer that is received, closed or cancelled already.
	CodeTransferNotInTransit Code = "transfer_not_in_transit"
	// CodeTransferPartlyReceived refuses to cancel a transfer once some of
	// it was received: close it instead.
	CodeTransferPartlyReceived Code = "transfer_partly_received"
	// CodeInboundNotOpen refuses a receipt, close or cancel of an inbound
	// notice that is received, closed or cancelled already.
	CodeInboundNotOpen Code = "inbound_not_open"
	// CodeInboundPartlyReceived refuses to cancel an inbound notice once
	// some of it was received: close it instead.
	CodeInboundPartlyReceived Code = "inbound_partly_received"
	// CodePreviewStale refuses to apply a repair whose books moved since
	// its preview: the difference it would write is not the one the
	// caller saw (expected_difference).
	CodePreviewStale Code = "preview_stale"
	// CodeCampaignEnded refuses an operator's write into or out of the
	// pool of a campaign that has ended (an adjustment, a move, a count, a
	// transfer, units added or retired): its stock on hand went back to
	// main when its end finished, and nothing goes there again.
	CodeCampaignEnded Code = "campaign_ended"
	// CodeArchived refuses a cursor or a date before what the ledger has
	// archived (stockhold ledger archive): those rows are in an archive
	// file, not in the database.
	CodeArchived Code = "archived"
	// CodeBackordersPromised refuses a backorder policy (set or removed)
	// that would allow a location less than its holds have already been
	// promised beyond its stock.
	CodeBackordersPromised Code = "backorders_promised"
	// CodeIncomingPromised refuses to take back units on their way (an
	// inbound closed short or cancelled, a transfer's units lost or
	// cancelled) that holds have been promised: release those holds
	// first.
	CodeIncomingPromised Code = "incoming_promised"
)

// InsufficientCode is the code of a refusal that would take state below
// zero (insufficient_available, insufficient_damaged, ...).
func InsufficientCode(state string) Code { return Code("insufficient_" + state) }

// Error is a failure the caller can act on: bad input, or a state that
// refuses the request. Anything that is not an *Error is a bug or an
// outage (500, or 503 when the database is overloaded).
type Error struct {
	Code   Code
	Detail string
	// SKU, Pool and Status add context where the contract asks for it:
	// which line of a hold failed, what state a reservation is in.
	SKU    string
	Pool   string
	Status string
	// Location names the location a refusal is about.
	Location string
	// Line is the index of the failing line of a bulk adjustment.
	Line *int
	// Units names the units a unit_unavailable refusal is about.
	Units []string
	// Reference marks an unknown thing that the request names as part of
	// what it asks for (a hold's SKU or campaign, a bulk line's SKU),
	// rather than the thing it addresses (the SKU of GET /v1/skus/{sku}):
	// the request is unprocessable as it stands (HTTP 422), where a missing
	// addressed thing is not found (404).
	Reference bool
	// Extra adds members of the problem beyond these (the difference per
	// counter of a pool whose books disagree, say).
	Extra map[string]any
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Detail) }

// Is makes every code a sentinel: an *Error matches any other *Error of
// the same code, whatever its detail, so errors.Is(err, ErrNotFound) holds
// for "rollback not found" as for "webhook not found".
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels, for errors.Is (see Error.Is); each is also a complete error
// to return as it is.
var (
	// ErrNotFound: no such thing, or none the caller may see.
	ErrNotFound = &Error{Code: CodeNotFound, Detail: "not found"}
	// ErrKeyReused: an Idempotency-Key used before with a different
	// request.
	ErrKeyReused = &Error{Code: CodeKeyReused, Detail: "this Idempotency-Key was used before with a different request"}
)

// Invalid reports bad input.
func Invalid(format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Detail: fmt.Sprintf(format, args...)}
}

// Archived reports a cursor or a date before the ledger's archive.
func Archived(format string, args ...any) *Error {
	return &Error{Code: CodeArchived, Detail: fmt.Sprintf(format, args...)}
}

// Missing reports that what does not exist, or not for the caller: an
// ErrNotFound that says what.
func Missing(what string) *Error {
	return &Error{Code: CodeNotFound, Detail: what + " not found"}
}
