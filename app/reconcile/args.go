// Package reconcile proves the books balance: per (sku, pool), the counters
// against the lines of live holds and against the ledger (summed from
// per-row checkpoints), and holds stuck past their expiry. It classes what
// it finds as auto-fix, retry or high risk and acts on each class.
package reconcile

import (
	"github.com/stockhold/stockhold/app/domain"
)

// Triggers of a reconciliation run.
const (
	TriggerPeriodic    = "periodic"
	TriggerHTTP        = "http"
	TriggerCLI         = "cli"
	TriggerCampaignEnd = "campaign_end"
)

// ReconcileArgs runs one reconciliation. RunID names a run recorded when it
// was asked for (POST /v1/reconciliations); zero means the job records its
// own. SKUs limits the run to some SKUs (a campaign's, at its end).
type ReconcileArgs struct {
	RunID   int64    `json:"run_id,omitempty"`
	SKUs    []string `json:"skus,omitempty"`
	Trigger string   `json:"trigger"`
	// Scope asks for a full, an incremental or a deep run; empty leaves it
	// to the schedule (periodic runs) or makes it full (any other).
	Scope string `json:"scope,omitempty"`
}

// Kind names the job in river_job.
func (ReconcileArgs) Kind() string { return "reconcile" }

// Validate checks what no retry could mend: a requested run is named by a
// positive id (it keeps the trigger and SKUs recorded when it was asked
// for); any other run needs a known trigger and valid SKUs.
func (a ReconcileArgs) Validate() error {
	switch {
	case a.RunID < 0:
		return domain.Invalid("run_id must be positive")
	case a.RunID > 0:
		return nil
	}
	if err := validTrigger(a.Trigger); err != nil {
		return err
	}
	if err := validScope(a.Scope); err != nil {
		return err
	}
	_, err := normalizeSKUs(a.SKUs)
	return err
}
