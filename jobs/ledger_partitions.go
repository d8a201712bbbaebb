package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/partitions"
)

// LedgerPartitionsArgs is the periodic job that makes the ledger's
// monthly partitions ahead (partitions.Ahead months) and, when
// STOCKHOLD_LEDGER_ARCHIVE_AFTER is set, archives the months old enough.
type LedgerPartitionsArgs struct{}

// Kind names the job in river_job.
func (LedgerPartitionsArgs) Kind() string { return "ledger_partitions" }

// InsertOpts keeps one run queued at a time.
func (LedgerPartitionsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByState: notFinished}}
}

type ledgerPartitionsWorker struct {
	river.WorkerDefaults[LedgerPartitionsArgs]
	svc *partitions.Service
}

func (w *ledgerPartitionsWorker) Work(ctx context.Context, job *river.Job[LedgerPartitionsArgs]) error {
	return w.svc.Periodic(ctx)
}
