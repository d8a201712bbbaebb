package inventory

import (
	"context"
	"fmt"
	"time"

	"github.com/stockhold/stockhold/app/batch"
	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// stopSale is the stop-sale switches as a hold batch read them: the one
// for everything and those of the batch's clients that are on.
type stopSale struct {
	on     bool
	reason string
	// clients are the batch's clients whose sales are stopped, with why.
	clients map[string]string
	// waitedOut: the batch waited for a flip longer than it may
	// (stopSaleWait), and read nothing.
	waitedOut bool
}

// stopSaleRead is the stop-sale step of a hold batch's first round trip.
type stopSaleRead struct {
	sharing *db.StopSaleShareBatchResults
	reading *db.StopSaleReadBatchResults
}

// stopSaleWait is the lock_timeout a hold batch waits for its share of
// the stop-sale lock under, the longer of 2 s and four lock timeouts: a
// flip waits for the batches running (each gives up at its first wait
// for a row longer than the lock timeout), then commits, and the batches
// that ask for their share meanwhile wait for it. Counting that wait
// against the batch's lock timeout turned a slow flip into busy answers
// for holds it does not stop.
func stopSaleWait(lockTimeout time.Duration) string {
	return fmt.Sprintf("%dms", max(4*lockTimeout.Milliseconds(), 2000))
}

// errFlipSlow answers the holds of a batch that waited longer than
// stopSaleWait for a flip of a stop-sale switch to commit.
var errFlipSlow = &domain.Error{Code: domain.CodeBusy,
	Detail: "a stop-sale switch is being flipped and the flip is taking long (it waits for a transaction that holds a lock); retry in a moment"}

// queueStopSale queues, on a hold batch's first round trip, its share of
// the stop-sale lock and then, in a later statement, the read of the
// switch for everything and of the switches of the batch's clients. A flip
// of any of them takes the lock exclusively (StopSaleLock) before it
// writes and commits: it waits for the batches that hold a share, and the
// batches that ask for one after it wait for its commit and then read
// what it wrote. So once a flip has committed, no hold batch that read the
// switch before it is still running: every hold committed after a
// stop-sale was decided with the switch on, for everything or for its
// client. Two tiny statements in a round trip the batch makes anyway, and
// a lock that lives in memory; a flip, which is rare, waits for the
// batches running at that moment whatever their clients. The transaction
// waits for its share under stopSaleWait (set with its settings), and the
// share sets lockTimeout for the rest.
func queueStopSale(ctx context.Context, q *db.Queries, clients []string, lockTimeout string) stopSaleRead {
	return stopSaleRead{
		sharing: q.StopSaleShare(ctx, []db.StopSaleShareParams{{Timeout: lockTimeout, Lock: stock.StopSaleLockName}}),
		reading: q.StopSaleRead(ctx, [][]string{clients}),
	}
}

func readStopSale(r stopSaleRead) stopSale {
	var st stopSale
	r.sharing.Exec(func(_ int, err error) { st.waitedOut = classify(context.Background(), err) == failLock })
	rows, _ := batch.Collect(r.reading.Query)
	for _, row := range rows {
		switch {
		case !row.Active:
		case row.Client == "":
			st.on, st.reason = true, domain.Value(row.Reason)
		default:
			if st.clients == nil {
				st.clients = map[string]string{}
			}
			st.clients[row.Client] = domain.Value(row.Reason)
		}
	}
	return st
}

// refuses returns why a hold by client is refused while the switches are
// as st read them, or nil.
func (st stopSale) refuses(client string) error {
	if st.on {
		return errStopSale(st.reason)
	}
	if reason, ok := st.clients[client]; ok {
		return &domain.Error{Code: domain.CodeStopSale, Extra: map[string]any{"client": client},
			Detail: fmt.Sprintf("sales to %s are stopped (%s): no new holds by its keys until an operator lifts its stop-sale; "+
				"other clients, confirms, releases and reads go on", client, reason)}
	}
	return nil
}

func errStopSale(reason string) error {
	return &domain.Error{Code: domain.CodeStopSale,
		Detail: fmt.Sprintf("sales are stopped (%s): no new holds until an operator lifts the stop-sale; confirms, releases and reads go on", reason)}
}

// errStopSaleAt is the refusal of a hold at a location whose sales are
// stopped.
func errStopSaleAt(location, reason string) error {
	return &domain.Error{Code: domain.CodeStopSale, Location: location,
		Detail: fmt.Sprintf("sales are stopped at %s (%s): no new holds there until an operator lifts it; confirms, releases and reads go on", location, reason)}
}
