package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
)

// problem is an RFC 9457 problem detail. Extra members (sku, status, ...)
// sit beside the standard ones.
type problem struct {
	Status int
	Code   string
	Title  string
	Detail string
	Extra  map[string]any
	// from is the domain error the problem was made from (fromDomain): its
	// Extra and its context (SKU, pool, ...) are members too (see members),
	// read from it as the problem is written rather than copied into a map
	// on every refusal.
	from *domain.Error
	// RetryAfter, in seconds, is sent as the Retry-After header when above
	// zero: the answers to overload say when to come back.
	RetryAfter int
	// cause is the error the problem was made from, for the log.
	cause error
}

func (p *problem) Error() string { return p.Code + ": " + p.Detail }

// MarshalJSON flattens Extra into the object, as RFC 9457 extensions are.
func (p *problem) MarshalJSON() ([]byte, error) { return p.appendJSON(nil) }

// problemMembers are the members every problem has, which an Extra member
// of the same name does not replace.
var problemMembers = [...]string{"code", "detail", "status", "title", "type"}

// appendJSON appends p's JSON to b: what encoding/json made of the object
// as a map[string]any (members sorted by name, strings escaped as it
// escapes them, HTML characters included), byte for byte, without the
// map, the reflection and the sort of a general encoder. Extra values
// other than strings, integers and booleans are encoded by encoding/json
// itself. TestProblemJSON compares the two.
func (p *problem) appendJSON(b []byte) ([]byte, error) {
	var inline [16]string
	keys := append(inline[:0], problemMembers[:]...)
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for k := range p.Extra {
		add(k)
	}
	if e := p.from; e != nil {
		for k := range e.Extra {
			add(k)
		}
		for _, m := range domainMembers {
			if m.has(e) {
				add(m.name)
			}
		}
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		switch k {
		case "code":
			b = appendJSONString(b, p.Code)
		case "detail":
			b = appendJSONString(b, p.Detail)
		case "status":
			b = strconv.AppendInt(b, int64(p.Status), 10)
		case "title":
			b = appendJSONString(b, p.Title)
		case "type":
			// "/problems/" + Code, without building the string.
			b = append(appendJSONChars(append(b, `"/problems/`...), p.Code), '"')
		default:
			var err error
			if b, err = p.appendMember(b, k); err != nil {
				return nil, err
			}
		}
	}
	return append(b, '}'), nil
}

// domainMembers are the members a problem takes from its domain error's
// context, each when the error has it, and how each is written.
var domainMembers = [...]struct {
	name  string
	has   func(*domain.Error) bool
	write func([]byte, *domain.Error) ([]byte, error)
}{
	{"sku", func(e *domain.Error) bool { return e.SKU != "" },
		func(b []byte, e *domain.Error) ([]byte, error) { return appendJSONString(b, e.SKU), nil }},
	{"pool", func(e *domain.Error) bool { return e.Pool != "" },
		func(b []byte, e *domain.Error) ([]byte, error) { return appendJSONString(b, e.Pool), nil }},
	{"location", func(e *domain.Error) bool { return e.Location != "" },
		func(b []byte, e *domain.Error) ([]byte, error) { return appendJSONString(b, e.Location), nil }},
	{"line", func(e *domain.Error) bool { return e.Line != nil },
		func(b []byte, e *domain.Error) ([]byte, error) { return strconv.AppendInt(b, int64(*e.Line), 10), nil }},
	{"units", func(e *domain.Error) bool { return len(e.Units) > 0 },
		func(b []byte, e *domain.Error) ([]byte, error) { return appendJSONValue(b, e.Units) }},
	// RFC 9457 reserves "status" for the HTTP status.
	{"reservation_status", func(e *domain.Error) bool { return e.Status != "" },
		func(b []byte, e *domain.Error) ([]byte, error) { return appendJSONString(b, e.Status), nil }},
}

// appendMember appends the value of member k beyond the standard ones: the
// domain error's context, else its Extra's, else the problem's Extra's.
func (p *problem) appendMember(b []byte, k string) ([]byte, error) {
	if e := p.from; e != nil {
		for _, m := range domainMembers {
			if m.name == k && m.has(e) {
				return m.write(b, e)
			}
		}
		if v, ok := e.Extra[k]; ok {
			return appendJSONValue(b, v)
		}
	}
	return appendJSONValue(b, p.Extra[k])
}

// appendJSONValue appends v as encoding/json encodes it inside an
// interface: strings, integers and booleans here, anything else through
// encoding/json.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case nil:
		return append(b, "null"...), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it by default.
func appendJSONString(b []byte, s string) []byte {
	return append(appendJSONChars(append(b, '"'), s), '"')
}

// appendJSONChars is encoding/json's appendString with escapeHTML, less
// the quotes: quotes, backslashes and control characters escaped, <, > and
// & as \u003c, \u003e and \u0026, invalid UTF-8 as \ufffd, U+2028 and
// U+2029 as \u2028 and \u2029.
func appendJSONChars(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// statuses maps domain codes to HTTP statuses: the one place that does.
// The rule, the same on every route:
//   - a request that cannot be read is 400 invalid_request: malformed JSON,
//     an unknown or repeated field, a query parameter that does not parse
//     (limit=abc, a time that is not RFC 3339), a cursor the list did not
//     give, a path id of the wrong form (not a UUID, not a number);
//   - a request that reads but breaks a rule is 422 (invalid_request, or
//     a more precise code): a quantity of 0, limit=0, a name too long;
//   - a resource the path names that does not exist is 404 (not_found,
//     unknown_sku, unknown_campaign), while one the body names is 422
//     (the request is unprocessable as it stands: domain.Error.Reference,
//     turned into 422 by fromDomain);
//   - a pool a SKU does not have is unknown_pool (422: a pool is always
//     named in the body), never unknown_sku, which means the SKU has no
//     stock at all;
//   - a state that refuses the request is 409, an overload 503 with
//     Retry-After.
//
// TestErrorConvention checks it route by route.
var statuses = map[domain.Code]int{
	domain.CodeInvalid:                    http.StatusUnprocessableEntity,
	domain.CodeNotFound:                   http.StatusNotFound,
	domain.CodeUnknownSKU:                 http.StatusNotFound,
	domain.CodeUnknownPool:                http.StatusUnprocessableEntity,
	domain.CodeUnknownCampaign:            http.StatusNotFound,
	domain.CodeUnknownClient:              http.StatusNotFound,
	domain.CodeOutOfStock:                 http.StatusConflict,
	domain.CodeSKUPaused:                  http.StatusConflict,
	domain.CodeCampaignNotActive:          http.StatusConflict,
	domain.CodeCampaignEnded:              http.StatusConflict,
	domain.CodeNotHeld:                    http.StatusConflict,
	domain.CodeInsufficientAvailable:      http.StatusConflict,
	domain.CodeKeyReused:                  http.StatusUnprocessableEntity,
	domain.CodeConflict:                   http.StatusConflict,
	domain.CodeLimitExceeded:              http.StatusUnprocessableEntity,
	domain.CodeBusy:                       http.StatusServiceUnavailable,
	domain.CodeBooksUnbalanced:            http.StatusConflict,
	domain.CodeUnitUnavailable:            http.StatusConflict,
	domain.CodeSerializedPool:             http.StatusConflict,
	domain.CodeStopSale:                   http.StatusServiceUnavailable,
	domain.CodeNotEnded:                   http.StatusConflict,
	domain.CodeUnknownLocation:            http.StatusNotFound,
	domain.CodeLocationInactive:           http.StatusConflict,
	domain.CodeLocationNotAllowed:         http.StatusForbidden,
	domain.CodeInsufficientQualityControl: http.StatusConflict,
	domain.CodeInsufficientDamaged:        http.StatusConflict,
	domain.CodeInsufficientSafetyStock:    http.StatusConflict,
	domain.CodeInsufficientIncoming:       http.StatusConflict,
	domain.CodeCountBelowHeld:             http.StatusConflict,
	domain.CodeTransferNotInTransit:       http.StatusConflict,
	domain.CodeTransferPartlyReceived:     http.StatusConflict,
	domain.CodeInboundNotOpen:             http.StatusConflict,
	domain.CodeInboundPartlyReceived:      http.StatusConflict,
	domain.CodePreviewStale:               http.StatusConflict,
	domain.CodeArchived:                   http.StatusGone,
	domain.CodeBackordersPromised:         http.StatusUnprocessableEntity,
	domain.CodeIncomingPromised:           http.StatusConflict,
}

// Retry-After values, in seconds: a lock or a full pool clears in moments,
// a database that went away takes longer.
const (
	retryBusy        = 1
	retryUnavailable = 2
	// retryStopSale: a stop-sale is lifted by a person, after checks.
	retryStopSale = 60
)

// statusClientClosed is what a request whose client went away is logged
// and counted as (nginx's 499); no one reads the answer.
const statusClientClosed = 499

func newProblem(status int, code, detail string) *problem {
	return &problem{Status: status, Code: code, Title: title(code), Detail: detail}
}

func badRequest(detail string) *problem {
	return newProblem(http.StatusBadRequest, "invalid_request", detail)
}

// fromDomain turns a domain error into its problem.
func fromDomain(e *domain.Error) *problem {
	status := statuses[e.Code]
	switch {
	case status == 0:
		status = http.StatusConflict
	case status == http.StatusNotFound && e.Reference:
		// Named in the body, not the path: the request is unprocessable.
		status = http.StatusUnprocessableEntity
	}
	p := newProblem(status, string(e.Code), e.Detail)
	switch e.Code {
	case domain.CodeBusy:
		p.RetryAfter = retryBusy
	case domain.CodeStopSale:
		p.RetryAfter = retryStopSale
	}
	p.from = e
	return p
}

// problemOf classifies any error a handler returned. ctx is the request's:
// it tells a client that went away, or a request out of time, from the
// database's own refusals.
func problemOf(ctx context.Context, err error) *problem {
	if p, ok := err.(*problem); ok {
		// The usual case (the error handler is given what the timeout
		// middleware classified), without errors.As's reflection.
		return p
	}
	if p, ok := errorAs[*problem](err); ok {
		return p
	}
	p := classify(ctx, err)
	p.cause = err
	return p
}

// errorAs is errors.As for a type, trying err itself first, and calling
// errors.As (reflection, and its target on the heap) only for an error
// that wraps another or has an As method: for any other (a refusal's
// *domain.Error), errors.As would find nothing.
func errorAs[T error](err error) (T, bool) {
	if t, ok := err.(T); ok {
		return t, true
	}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }, interface{ As(any) bool }:
		var t T
		ok := errors.As(err, &t)
		return t, ok
	}
	var none T
	return none, false
}

func classify(ctx context.Context, err error) *problem {
	if errors.Is(ctx.Err(), context.Canceled) {
		// Whatever the answer would have been, no one is there to read it.
		return newProblem(statusClientClosed, "client_closed_request", "the client closed the request before its answer")
	}
	if de, ok := errorAs[*domain.Error](err); ok {
		return fromDomain(de)
	}
	if he, ok := errorAs[*echo.HTTPError](err); ok {
		return fromHTTPError(he)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return timeout()
	}
	if p := databaseProblem(err); p != nil {
		return p
	}
	return newProblem(http.StatusInternalServerError, "internal_error", "something went wrong on our side; it has been logged")
}

func timeout() *problem {
	p := newProblem(http.StatusServiceUnavailable, "timeout", "the request did not finish in time; it is safe to retry with the same Idempotency-Key")
	p.RetryAfter = retryBusy
	return p
}

// databaseProblem turns PostgreSQL's refusals under pressure into 503s: a
// lock or statement timeout is `busy`, a database that cannot be reached
// (or no pool connection free in time) is `unavailable`; a stock row for
// a bundle SKU is the client's 422. Anything else is nil. It runs after the request's own context was checked, so a deadline
// seen here is an inner one: the pool's acquire timeout or connect_timeout.
func databaseProblem(err error) *problem {
	if dberr.Unstorable(err) {
		// Input every route should have refused first (the JSON decoder
		// refuses \u0000 by name): still the client's, not a 500.
		return newProblem(http.StatusUnprocessableEntity, "invalid_request",
			"a value holds a character PostgreSQL cannot store (a NUL, \\u0000); nothing changed")
	}
	if sku, ok := dberr.BundleStock(err); ok {
		// Every write that would give a bundle stock of its own, whichever
		// route made it.
		return fromDomain(&domain.Error{Code: domain.CodeInvalid, SKU: sku, Detail: fmt.Sprintf(
			"SKU %q is a bundle: it has no stock of its own (a hold on it holds its components); change its components' stock instead, "+
				"or delete the bundle first (DELETE /v1/bundles/%s); nothing changed", sku, sku)})
	}
	switch dberr.OverloadOf(err) {
	case dberr.Busy:
		if dberr.TimedOut(err) {
			return &problem{Status: http.StatusServiceUnavailable, Code: "busy", Title: title("busy"), RetryAfter: retryBusy,
				Detail: "the database did not finish this request within its statement timeout (STOCKHOLD_DB_STATEMENT_TIMEOUT); nothing changed; retry in a moment (with the same Idempotency-Key)"}
		}
		return &problem{Status: http.StatusServiceUnavailable, Code: "busy", Title: title("busy"), RetryAfter: retryBusy,
			Detail: "the rows this request needs are locked by another transaction; retry in a moment (with the same Idempotency-Key)"}
	case dberr.Unavailable:
		return &problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Title: title("unavailable"), RetryAfter: retryUnavailable,
			Detail: "the database cannot be reached right now; retry in a moment (with the same Idempotency-Key)"}
	}
	return nil
}

func fromHTTPError(he *echo.HTTPError) *problem {
	detail := http.StatusText(he.Code)
	if m, ok := he.Message.(string); ok {
		detail = m
	}
	switch he.Code {
	case http.StatusNotFound:
		return newProblem(he.Code, "not_found", "no such route")
	case http.StatusMethodNotAllowed:
		return newProblem(he.Code, "method_not_allowed", "this route does not take that method")
	case http.StatusRequestEntityTooLarge:
		return newProblem(he.Code, "body_too_large", "request bodies are limited to 64 KiB")
	case http.StatusUnauthorized:
		return newProblem(he.Code, "unauthorized", detail)
	case http.StatusForbidden:
		return newProblem(he.Code, "forbidden", detail)
	case http.StatusServiceUnavailable:
		return timeout()
	case http.StatusTooManyRequests:
		return newProblem(he.Code, "too_many_requests", detail)
	}
	if he.Code >= 500 {
		return newProblem(he.Code, "internal_error", detail)
	}
	return newProblem(he.Code, "invalid_request", detail)
}

// handleError is echo's one HTTPErrorHandler: every error becomes
// application/problem+json. A 500 is logged, since it is a bug; overload
// answers (503) are logged once per interval, not once per request; a client
// that went away is neither answered nor logged as an error.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	req := c.Request()
	p := problemOf(req.Context(), err)
	if p.cause != nil {
		err = p.cause
	}
	switch {
	case p.Status == http.StatusInternalServerError:
		s.log.ErrorContext(req.Context(), "request failed", "method", req.Method,
			"path", req.URL.Path, "status", p.Status, "err", err)
	case p.Status == http.StatusServiceUnavailable && p.Code != string(domain.CodeStopSale):
		s.overload.note(req.Context(), p.Code, req.Method+" "+req.URL.Path, err)
	case p.Status == statusClientClosed:
		c.Response().WriteHeader(p.Status) // for the request log and metrics only
		return
	}
	if p.Status == http.StatusUnauthorized && c.Response().Header().Get("WWW-Authenticate") == "" {
		// Browser pages under /ops/ set their own Basic challenge.
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="stockhold"`)
	}
	if p.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	writeProblem(c.Response(), req.Method, p)
}

// problemJSON is the Content-Type of a problem, shared (see pageHeaders).
var problemJSON = sharedValue("application/problem+json")

// writeProblem writes p as the answer.
func writeProblem(w http.ResponseWriter, method string, p *problem) {
	body := problemBody(p)
	w.Header()[echo.HeaderContentType] = problemJSON
	w.WriteHeader(p.Status)
	if method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// problemBody is p's JSON, ending in a newline as every answer does.
func problemBody(p *problem) []byte {
	body, err := p.appendJSON(make([]byte, 0, 256))
	if err != nil {
		body = []byte(`{"type":"/problems/internal_error","status":500,"code":"internal_error"}`)
	}
	return append(body, '\n')
}
