package rollbacks

import (
	"github.com/stockhold/stockhold/app/domain"
)

// ManualRollbackArgs is the job an operator enqueues: through the API or
// the CLI (which also create the request row and set RollbackID), or with a
// plain SQL insert into river_job carrying the same fields as the body of
// POST /v1/rollbacks (the worker creates the row). The worker decodes it
// strictly: a misspelt field or a value of the wrong type cancels the job
// with an alert rather than falling back to a default.
type ManualRollbackArgs struct {
	RollbackID int64  `json:"rollback_id,omitempty"`
	Operator   string `json:"operator"`
	Reason     string `json:"reason"`
	DryRun     bool   `json:"dry_run"`
	// Scope's fields sit beside the others in the JSON.
	Scope
}

// Kind names the job in river_job.
func (ManualRollbackArgs) Kind() string { return "manual_rollback" }

// Validate checks what no retry could mend: who, why and exactly one scope.
// Whether held_before or cutoff lies after the job was enqueued is checked
// when the job is accepted (AcceptTx), which knows when that was.
func (a ManualRollbackArgs) Validate() error {
	if a.RollbackID < 0 {
		return domain.Invalid("rollback_id must be positive")
	}
	return a.request().Validate()
}

// request is the rollback the args ask for, as a plain SQL job does.
func (a ManualRollbackArgs) request() Request {
	return Request{
		Operator: a.Operator, Reason: a.Reason, DryRun: a.DryRun, Source: SourceSQL,
		Scope: a.Scope,
	}
}

// RollbackBatchArgs is one link of a rollback's chain of batches.
type RollbackBatchArgs struct {
	RollbackID int64 `json:"rollback_id"`
}

// Kind names the job in river_job.
func (RollbackBatchArgs) Kind() string { return "rollback_batch" }

// Validate checks that the batch names a request.
func (a RollbackBatchArgs) Validate() error {
	if a.RollbackID < 1 {
		return domain.Invalid("rollback_id must be positive")
	}
	return nil
}
