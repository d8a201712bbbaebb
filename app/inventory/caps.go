package inventory

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app/domain"
)

// MaxPerOrder bounds a campaign's max_per_order.
const MaxPerOrder = MaxQuantity

// overCap refuses a campaign hold with more than maxPerOrder units of one
// SKU (lines are summed per SKU already); nil means no cap. It is checked
// before the hold joins a batch, from the campaign terms Hold reads anyway.
func overCap(lines []Line, campaign string, maxPerOrder *int64) error {
	if maxPerOrder == nil {
		return nil
	}
	for _, l := range lines {
		if l.Quantity > *maxPerOrder {
			return &domain.Error{Code: domain.CodeLimitExceeded, SKU: l.SKU, Pool: l.Pool,
				Detail: fmt.Sprintf("campaign %q allows at most %d of SKU %q in one hold, %d requested", campaign, *maxPerOrder, l.SKU, l.Quantity)}
		}
	}
	return nil
}

// newHoldID returns the id of a new hold: a UUIDv7, whose first bits are
// the time it was made, so holds sort by creation in id order (the
// listing's keyset) and new ids land at the right edge of the primary key
// rather than on random index pages.
func newHoldID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
