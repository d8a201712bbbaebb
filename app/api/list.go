package api

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
)

// Every list answers a page at a time, the same way on every route: it
// takes limit (how many, 1 to the route's maximum; 100 when left out) and
// cursor (the next_cursor of the page before; left out, the first page),
// and answers next_cursor, the cursor of the page after, null on the last
// page. A cursor is opaque: a client passes back what it was given. A few
// routes had a cursor of their own name before this convention (the
// ledger's before_id, the feed's and the units' after); those names keep
// working and are deprecated.
//
// The errors follow the rule every route keeps (problem.go): a limit or a
// cursor that does not parse, or a parameter given twice, is 400; a limit
// that parses but is out of range is 422.

// defaultLimit is a page's size when the request does not say.
const defaultLimit = 100

// page is what a list request asks for besides its filters.
type page struct {
	Limit int
	// Cursor is the next_cursor of the page before, as given ("" for the
	// first page); the route parses it (badCursor when it does not).
	Cursor string
}

// pageParams reads a list route's limit and cursor. maxLimit is the
// route's largest page; deprecated is the cursor's old name on the routes
// that had one ("" for none).
func pageParams(c echo.Context, maxLimit int, deprecated string) (page, error) {
	q := c.QueryParams()
	for _, name := range []string{"limit", "cursor", deprecated} {
		if name != "" && len(q[name]) > 1 {
			return page{}, badRequest(fmt.Sprintf("give %s once", name))
		}
	}
	p := page{Limit: min(defaultLimit, maxLimit), Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return page{}, badRequest("limit must be a whole number")
		}
		if n < 1 || n > maxLimit {
			return page{}, domain.Invalid("limit must be from 1 to %d", maxLimit)
		}
		p.Limit = n
	}
	if deprecated != "" {
		if v := q.Get(deprecated); v != "" {
			if p.Cursor != "" && p.Cursor != v {
				return page{}, badRequest(fmt.Sprintf("give cursor or %s (its deprecated name), not both", deprecated))
			}
			p.Cursor = v
		}
	}
	return p, nil
}

// badCursor is the answer to a cursor that is not one this route gave.
func badCursor() *problem {
	return badRequest("cursor must be the next_cursor of a previous page of this list")
}

// intCursor reads a cursor that is a positive whole number (an id).
func intCursor(p page) (int64, error) {
	if p.Cursor == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(p.Cursor, 10, 64)
	if err != nil || n < 1 {
		return 0, badCursor()
	}
	return n, nil
}

// uuidCursor reads a cursor that is a UUID (the last item of a page); nil
// when there is none.
func uuidCursor(p page) (*uuid.UUID, error) {
	if p.Cursor == "" {
		return nil, nil
	}
	id, err := uuid.Parse(p.Cursor)
	if err != nil || len(p.Cursor) != 36 {
		return nil, badCursor()
	}
	return &id, nil
}

// cursorOf is the next_cursor of an id (nil: the last page).
func cursorOf(id *int64) *string {
	if id == nil {
		return nil
	}
	s := strconv.FormatInt(*id, 10)
	return &s
}
