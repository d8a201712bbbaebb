package api

import (
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// problemCode documents one problem code: the page its answers' type
// (/problems/<code>) links to says what it means and what to do.
type problemCode struct {
	// Title is the problem's short, fixed summary, its title member.
	Title string
	// Status is the HTTP status (or statuses, with when) it comes with.
	Status string
	// Means and Do are the page's two paragraphs: what happened, and what
	// the caller (or the operator) does about it.
	Means, Do string
}

// problemCodes is every code the server answers with. The status of a
// domain code is in statuses (problem.go); the rule that decides it, for
// every route, is there too.
var problemCodes = map[string]problemCode{
	"invalid_request": {
		Title:  "The request is invalid",
		Status: "400 when it cannot be read (malformed JSON, an unknown or repeated field, a query parameter that does not parse, a cursor this list did not give); 422 when it reads but breaks a rule (a quantity of 0, a limit out of range, a name too long)",
		Means:  "The request was refused as it stands; nothing changed. The detail names the field or parameter and the rule.",
		Do:     "Fix what the detail names and send it again. A 400 is the client's bug; a 422 is usually a value from a person or a file that needs checking.",
	},
	"not_found": {
		Title:  "Not found",
		Status: "404",
		Means:  "No such route, or the resource the path names (a hold, a rollback, a webhook, an alert) does not exist, or is not one the caller's key may see (a shop sees its own holds only).",
		Do:     "Check the path and the id. A hold made with another shop's key is not found with yours.",
	},
	"unknown_sku": {
		Title:  "Unknown SKU",
		Status: "404 when the path names the SKU (GET /v1/skus/{sku}); 422 when the body names it (a hold's line, a bulk adjustment's line)",
		Means:  "The SKU has no stock row at all: it was never stocked.",
		Do:     "Check the SKU's spelling (SKUs are case-sensitive), or stock it first with a positive adjustment.",
	},
	"unknown_pool": {
		Title:  "Unknown pool",
		Status: "422",
		Means:  "The SKU exists, but not in the pool the request names (main, or a campaign's id), or not at the location it names. Nothing changed.",
		Do:     "Name a pool the SKU has: GET /v1/skus/{sku} lists them. A campaign's pool exists from its start until its end hands the stock back to main.",
	},
	"unknown_campaign": {
		Title:  "Unknown campaign",
		Status: "404 when the path names it; 422 when a hold names it",
		Means:  "No campaign has that id.",
		Do:     "Check the id; campaigns are created with POST /v1/campaigns.",
	},
	"unknown_client": {
		Title:  "Unknown client",
		Status: "422 (a stop-sale's client is named in the body)",
		Means:  "No API key was ever named as the client a stop-sale names: the switch would stop nobody, so nothing changed.",
		Do:     "Name the owner of the keys whose holds to stop, as stockhold apikey list shows it.",
	},
	"out_of_stock": {
		Title:  "Out of stock",
		Status: "409",
		Means:  "One line of the hold asks for more than is available now; the whole hold was refused (all lines or none) and nothing is held. The sku member names the line.",
		Do:     "Tell the customer, or hold less. Stock held by others comes back when their holds are released or expire.",
	},
	"sku_paused": {
		Title:  "SKU paused",
		Status: "409",
		Means:  "The pool is paused (by an operator, a reconciliation that found its books disagree, or a protection rule): it takes no new holds. Confirms and releases still work.",
		Do:     "Shops: treat it as unavailable for now. Operators: see why in the console or GET /v1/skus/{sku}, then resume it with POST /v1/skus/{sku}/resume.",
	},
	"campaign_not_active": {
		Title:  "Campaign not active",
		Status: "409",
		Means:  "The campaign is not taking holds: it has not started, has ended, or is paused.",
		Do:     "Hold from regular stock (leave campaign out), or wait for the campaign's start.",
	},
	"campaign_ended": {
		Title:  "Campaign ended",
		Status: "409",
		Means:  "The pool named is a campaign's that has ended: it takes no new stock and gives none (no adjustment, move, count, transfer, or units added or retired). When its end finished, everything it held on hand went back to main at the same location; what was in transit to or from it lands in main when the transfer is received or cancelled. Nothing changed.",
		Do:     "Name main instead (GET /v1/skus/{sku} lists the pools); GET /v1/campaigns/{id} shows the campaign and its end.",
	},
	"archived": {
		Title:  "Archived",
		Status: "410",
		Means:  "The cursor or the day asked for is before what the ledger has archived (stockhold ledger archive): those movements are in an archive file, no longer in the database. Its detail says up to where.",
		Do:     "Read the event feed without a cursor (it starts after the archive), the ledger from its newest page, a report of a later day; for the archived months, an operator loads the archive back (stockhold ledger restore).",
	},
	"reservation_not_held": {
		Title:  "Reservation is not held",
		Status: "409",
		Means:  "The hold is no longer held: it expired, was released, or (for a release) was confirmed. Its reservation_status member says which. A late payment never brings stock back on its own.",
		Do:     "For a payment that came late: POST /v1/reservations/{id}/reinstate holds the same lines again if they are still available; otherwise refund.",
	},
	"reservation_not_ended": {
		Title:  "Reservation has not ended",
		Status: "409",
		Means:  "Only a released or expired hold can be reinstated; this one is held or confirmed.",
		Do:     "Nothing to do: a held hold can be confirmed as it is.",
	},
	"preview_stale": {
		Title:  "The books moved since the preview",
		Status: "409",
		Means:  "A repair was sent with the expected_difference its preview showed, but the pool's counters or ledger moved since: the repair would now write another difference (the difference member). Nothing changed.",
		Do:     "Preview again (dry_run), read the new difference, find out what moved the books meanwhile, then apply with the new expected_difference.",
	},
	"insufficient_available": {
		Title:  "Not enough stock available",
		Status: "409",
		Means:  "A negative adjustment (or a set_total) would take more than is available: units held or sold are never taken by an adjustment.",
		Do:     "Take less, or release the holds first.",
	},
	"idempotency_key_reused": {
		Title:  "Idempotency-Key reused with a different request",
		Status: "422",
		Means:  "This Idempotency-Key was used before, by the same key owner, with a different request. The first request's result stands.",
		Do:     "Use a new key for a new request; reuse a key only to retry exactly the same request.",
	},
	"idempotency_key_missing": {
		Title:  "Idempotency-Key header missing",
		Status: "400",
		Means:  "This request creates something, so it must carry an Idempotency-Key header to be safe to retry.",
		Do:     "Send Idempotency-Key: one to 255 printable ASCII characters, unique per request (an order id plus the step, a UUID).",
	},
	"idempotency_key_invalid": {
		Title:  "Idempotency-Key header invalid",
		Status: "400",
		Means:  "The Idempotency-Key is empty, longer than 255 characters, not printable ASCII, or sent twice.",
		Do:     "Send one Idempotency-Key of 1 to 255 printable ASCII characters.",
	},
	"unauthorized": {
		Title:  "Missing or unknown API key",
		Status: "401",
		Means:  "No API key was sent, or it is unknown or revoked.",
		Do:     "Send Authorization: Bearer <token>. Keys are made with stockhold apikey create; make run prints a dev shop and ops key.",
	},
	"forbidden": {
		Title:  "This API key's role may not do that",
		Status: "403",
		Means:  "The key's role may not use this route (a shop key on an ops route), or a browser's request came from another site.",
		Do:     "Use an ops key for operator routes.",
	},
	"method_not_allowed": {
		Title:  "Method not allowed",
		Status: "405",
		Means:  "The route exists but does not take this method.",
		Do:     "See the API reference at /docs for the route's methods.",
	},
	"body_too_large": {
		Title:  "Request body too large",
		Status: "413",
		Means:  "Request bodies are limited to 64 KiB (4 MiB for adding or retiring units).",
		Do:     "Split the request: bulk adjustments take up to 1,000 lines, holds 100.",
	},
	"unsupported_media_type": {
		Title:  "Request body is not JSON",
		Status: "415",
		Means:  "A request body must be sent with Content-Type: application/json.",
		Do:     "Set the header (curl --json does).",
	},
	"conflict": {
		Title:  "Conflict",
		Status: "409",
		Means:  "The thing to create already exists (a campaign with that id, a unit with that id or seat), or the request conflicts with its state.",
		Do:     "Read the detail; pick another id, or read the existing one.",
	},
	"limit_exceeded": {
		Title:  "Limit exceeded",
		Status: "422",
		Means:  "The hold breaks a limit on one SKU: its campaign's max_per_order, or a limit of the SKU's pool (limit names it, allowed gives its value): max_per_order, min_per_order, step (a pack size), or max_per_customer (held: what the customer's holds have already).",
		Do:     "Hold a quantity the limit allows: at most max_per_order, at least min_per_order, a multiple of step; or, past max_per_customer, nothing more for that customer until a hold of theirs is released, expires or leaves the window.",
	},
	"timeout": {
		Title:  "The request took too long",
		Status: "503, with Retry-After",
		Means:  "The request did not finish within the server's time limit; it may or may not have taken effect.",
		Do:     "Retry after Retry-After seconds with the same Idempotency-Key: a retry of a request that did take effect replays its answer.",
	},
	"busy": {
		Title:  "The data is locked by another transaction",
		Status: "503, with Retry-After",
		Means:  "The rows this request needs stayed locked by another transaction past the lock timeout, or the database did not finish the request within its statement timeout (the detail says which). Nothing changed.",
		Do:     "Retry after Retry-After seconds with the same Idempotency-Key. Operators: a long transaction holding stock rows shows in pg_stat_activity.",
	},
	"unavailable": {
		Title:  "Service unavailable",
		Status: "503, with Retry-After",
		Means:  "The database cannot be reached, takes no writes (a failover in progress), or the instance is shutting down or not ready.",
		Do:     "Retry after Retry-After seconds with the same Idempotency-Key; another instance may answer meanwhile.",
	},
	"too_many_requests": {
		Title:  "Too many failed authentications",
		Status: "429, with Retry-After",
		Means:  "Too many requests from this address failed to authenticate; the address is refused for a while.",
		Do:     "Fix the key, then retry after Retry-After seconds.",
	},
	"internal_error": {
		Title:  "Internal error",
		Status: "500",
		Means:  "A bug: the server failed in a way it should not. It was logged with the request's id.",
		Do:     "Report it with the X-Request-Id header of the answer. A retry with the same Idempotency-Key is safe.",
	},
	"books_unbalanced": {
		Title:  "The stock's books do not balance",
		Status: "409",
		Means:  "The pool's counters disagree with its ledger or its holds' lines, so the change was refused and the pool stays paused; a critical alert names the difference.",
		Do:     "Operators: follow the alert; POST /v1/skus/{sku}/repair previews and applies a repair, then resume. force resumes anyway, recorded with your key.",
	},
	"unit_unavailable": {
		Title:  "Units not available",
		Status: "409",
		Means:  "A unit the request names (a seat, a serial number) is held, sold, retired or in another pool; the units member names them. Nothing was held.",
		Do:     "Offer other units: GET /v1/skus/{sku}/units?status=available lists them.",
	},
	"serialized_pool": {
		Title:  "The pool's stock is units with an identity",
		Status: "409",
		Means:  "This pool's stock is units with an identity, which change only one by one.",
		Do:     "Add or retire units (POST /v1/skus/{sku}/units, .../units/retire) instead of adjusting a quantity.",
	},
	"stop_sale": {
		Title:  "Sales are stopped",
		Status: "503, with Retry-After",
		Means:  "An operator (or a protection rule) stopped all sales, or sales through this client: new holds are refused. Confirms, releases and reads go on.",
		Do:     "Shops: show the shop as closed and retry later. Operators: GET /v1/stop-sale says who and why; PUT it off when it is safe.",
	},
	"unknown_location": {
		Title:  "Unknown location",
		Status: "404 when the path names the location (GET /v1/locations/{id}); 422 when the body names it (a hold's line, an adjustment, a transfer)",
		Means:  "No location has that id. Nothing changed.",
		Do:     "Check the id (ids are case-sensitive): GET /v1/locations lists them. An operator adds one with POST /v1/locations.",
	},
	"location_inactive": {
		Title:  "Location inactive",
		Status: "409",
		Means:  "The hold names a location that is inactive: it takes no new holds, while the holds it has finish normally (confirm, release, expiry).",
		Do:     "Leave location out and let the service pick an active one, or name another. Operators reactivate a location with PATCH /v1/locations/{id}.",
	},
	"location_not_allowed": {
		Title:  "This API key may not use that location",
		Status: "403",
		Means:  "The API key is bound to some locations (a sales channel's), and the hold names another. Nothing is held.",
		Do:     "Leave location out (the service then picks among the key's locations), or name one of them. The operator who made the key can say which they are.",
	},
	"insufficient_quality_control": {
		Title:  "Not enough stock in quality control",
		Status: "409",
		Means:  "The move takes more units out of quality_control than the location has there. Nothing moved; the state and has members say what there is.",
		Do:     "Move at most what has says, or count the location first if the number looks wrong.",
	},
	"insufficient_damaged": {
		Title:  "Not enough damaged stock",
		Status: "409",
		Means:  "The move (or write-off) takes more units out of damaged than the location has there. Nothing moved; the has member says what there is.",
		Do:     "Move at most what has says, or count the location first if the number looks wrong.",
	},
	"insufficient_safety_stock": {
		Title:  "Not enough safety stock",
		Status: "409",
		Means:  "The move takes more units out of safety_stock than the location keeps there. Nothing moved; the has member says what there is.",
		Do:     "Move at most what has says.",
	},
	"insufficient_incoming": {
		Title:  "Not enough stock in transit",
		Status: "409",
		Means:  "A receipt records more units than the transfer still has in transit, or than an inbound notice's line still expects (more than was ordered). Nothing was received.",
		Do:     "Receive at most what the transfer has in transit (GET /v1/transfers/{id}) or what the line expects (its outstanding, GET /v1/inbound/{id}); units beyond it are a count's or an adjustment's business.",
	},
	"count_below_held": {
		Title:  "The count is below what holds hold",
		Status: "409",
		Means:  "The count found fewer sellable units on the shelf than holds hold at that location for that pool: applying it would take stock that is promised. Nothing changed.",
		Do:     "Count again. If the shelf really is short, apply the count with force: the pool at that location is paused and an alert names the holds to deal with.",
	},
	"transfer_not_in_transit": {
		Title:  "Transfer is not in transit",
		Status: "409",
		Means:  "The transfer is received, closed or cancelled already: it takes no receipt, close or cancel.",
		Do:     "GET /v1/transfers/{id} shows what happened to it. Stock found later is a count or an adjustment at the location.",
	},
	"inbound_not_open": {
		Title:  "Inbound is not open",
		Status: "409",
		Means:  "The inbound notice is received, closed or cancelled already: it takes no receipt, close or cancel.",
		Do:     "GET /v1/inbound/{id} shows what happened to it. Stock that arrives later is a new notice, an adjustment or a count at the location.",
	},
	"inbound_partly_received": {
		Title:  "Inbound partly received",
		Status: "409",
		Means:  "Some of the inbound notice was received already, so it can no longer be cancelled as if it were never expected.",
		Do:     "Close it instead: what its lines never received is written off incoming and recorded as each line's short.",
	},
	"backorders_promised": {
		Title:  "Holds are promised more than the policy allows",
		Status: "422",
		Means:  "The backorder policy asked for (or its removal) would allow a location of the SKU's pool less than its held and confirmed holds have already been promised beyond its stock. Nothing changed.",
		Do:     "GET /v1/skus/{sku}/backorders shows each location's backordered units. Release holds, or let receipts fill them, then set the policy again.",
	},
	"incoming_promised": {
		Title:  "Units on their way are promised",
		Status: "409",
		Means:  "Taking these units off incoming (an inbound closed short or cancelled, a transfer's units written off or cancelled), or taking away available units that promised holds wait on (an adjustment, a move, a count, a transfer out, a campaign's pool filled from main), would leave holds promised more than the location's backorder policy allows. Nothing changed.",
		Do:     "GET /v1/skus/{sku}/backorders shows what is promised. Release holds that were promised these units (or raise below_zero) first, then try again.",
	},
	"transfer_partly_received": {
		Title:  "Transfer partly received",
		Status: "409",
		Means:  "Some of the transfer was received already, so it can no longer be cancelled as if it never left.",
		Do:     "Close it instead: what was not received is written off as lost in transit.",
	},
}

// title is code's title ("" for a code without a page, which
// TestProblemCodes does not let through).
func title(code string) string { return problemCodes[code].Title }

var problemPage = template.Must(template.New("problem").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<title>{{if .Code}}{{.Code}}: {{.Doc.Title}}{{else}}Problems{{end}} · stockhold</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:1.5rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:0 .2em;border-radius:3px}dt{margin-top:.8em;font-weight:600}a{color:#0645ad}</style>
</head><body>
{{if .Code}}<p><a href="/problems">All problems</a> · <a href="/docs">API reference</a></p>
<h1><code>{{.Code}}</code>: {{.Doc.Title}}</h1>
<p><strong>HTTP status:</strong> {{.Doc.Status}}</p>
<h2>What it means</h2><p>{{.Doc.Means}}</p>
<h2>What to do</h2><p>{{.Doc.Do}}</p>
<p>An answer with this problem has <code>"type": "/problems/{{.Code}}"</code> and <code>"code": "{{.Code}}"</code>; its <code>detail</code> says what was wrong with this request.</p>
{{else}}<p><a href="/docs">API reference</a></p>
<h1>Problems</h1>
<p>Every error stockhold answers is an RFC 9457 <code>application/problem+json</code> whose <code>type</code> is one of these pages. The rule for every route: a request that cannot be read is 400, one that reads but breaks a rule 422, a resource the path names that does not exist 404, and a pool the SKU does not have <code>unknown_pool</code>.</p>
<dl>{{range .All}}<dt><a href="/problems/{{.Code}}"><code>{{.Code}}</code></a> ({{.Doc.Status}})</dt><dd>{{.Doc.Title}}</dd>{{end}}</dl>
{{end}}</body></html>
`))

type codeDoc struct {
	Code string
	Doc  problemCode
}

// problems serves /problems (every code) and /problems/<code>.
func (s *server) problems(c echo.Context) error {
	data := struct {
		codeDoc
		All []codeDoc
	}{}
	if code := c.Param("code"); code != "" || strings.HasPrefix(c.Path(), "/problems/") {
		doc, ok := problemCodes[code]
		if !ok {
			return newProblem(http.StatusNotFound, "not_found", "no problem has code "+code+": /problems lists them")
		}
		data.codeDoc = codeDoc{code, doc}
	} else {
		for code, doc := range problemCodes {
			data.All = append(data.All, codeDoc{code, doc})
		}
		slices.SortFunc(data.All, func(a, b codeDoc) int { return strings.Compare(a.Code, b.Code) })
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	return problemPage.Execute(c.Response(), data)
}
