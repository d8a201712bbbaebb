package inventory

import (
	"github.com/google/uuid"
)

// MaxPerOrder bounds a campaign's max_per_order.
const MaxPerOrder = MaxQuantity

// newHoldID returns the id of a new hold: a UUIDv7, whose first bits are
// the time it was made, so holds sort by creation in id order (the
// listing's keyset) and new ids land at the right edge of the primary key
// rather than on random index pages.
func newHoldID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
