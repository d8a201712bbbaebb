package torture_test

import (
	"context"
)

// Rare paths. The run fails when a path it is there to race never ran
// (report, reportLocations, reportSeams), and a minute of random choices
// on a loaded machine can miss one: a shopper's partial release, a
// seat's expiry, a transfer closed with a loss. So an actor that can take
// such a path takes it at its next chance while it is owed, and goes back
// to its random choices once an acknowledged answer (or, for what the
// service does by itself, a ledger row) shows that the path ran.

// inLedger are the paths that only the ledger shows ran, and the
// condition on the ledger's columns a row of theirs meets.
var inLedger = map[string]string{
	"expire":      `kind = 'expire' AND actor = 'system:expire_holds'`,
	"rollback":    `kind = 'rollback' AND actor LIKE 'op-%'`,
	"seat expire": `kind = 'expire' AND sku = '` + seatSKU + `' AND units IS NOT NULL`,
	"shortfall":   `kind = 'shortfall'`,
	"sold_short":  `kind = 'sold_short'`,
	// backorders_test.go
	"backorder promise":        `kind = 'reserve' AND delta_backordered > 0`,
	"backorder fill":           `kind = 'backorder_fill'`,
	"backorder fill confirmed": `kind = 'backorder_fill' AND delta_sold > 0`,
	"backorder given back":     `kind IN ('release', 'expire', 'release_partial') AND delta_backordered < 0`,
}

// owed reports whether path has not run yet.
func (tr *torture) owed(path string) bool {
	tr.mu.Lock()
	ran := tr.ran[path]
	tr.mu.Unlock()
	cond, ok := inLedger[path]
	if ran || !ok {
		return !ran
	}
	if err := tr.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM ledger WHERE `+cond+`)`).Scan(&ran); err != nil {
		return true
	}
	if ran {
		tr.done(path)
	}
	return !ran
}

// done records that path ran.
func (tr *torture) done(path string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.ran[path] = true
}

// firstOwed is the first of paths still owed that can says the actor can
// take now, or choice when there is none.
func (tr *torture) firstOwed(choice string, can func(path string) bool, paths ...string) string {
	for _, p := range paths {
		if (can == nil || can(p)) && tr.owed(p) {
			return p
		}
	}
	return choice
}
