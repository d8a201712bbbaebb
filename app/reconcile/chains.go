package reconcile

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/db"
)

// CampaignResumer gives a campaign's stranded next step a job again
// (campaigns.Service; this package cannot import it, since campaigns
// enqueues reconciliations). ResumeTx returns what it did in words, empty
// when nothing was needed, and the job that carries the campaign on.
type CampaignResumer interface {
	ResumeTx(ctx context.Context, tx pgx.Tx, id, by string) (string, *int64, error)
}

// stranded is one chain with no job left to run.
type stranded struct {
	subject string // rollback:ID or campaign:ID
	// found says what was found, when it is not a chain with no job
	// left to run.
	found   string
	details map[string]any
	resume  func(ctx context.Context, tx pgx.Tx) (string, *int64, error)
}

// strandedChains turns what the snapshot found into chains to resume.
func (s *Service) strandedChains(snap snapshot) []stranded {
	var out []stranded
	for _, r := range snap.strandedRollbacks {
		out = append(out, stranded{
			subject: fmt.Sprintf("rollback:%d", r.ID),
			details: map[string]any{
				"rollback_id": r.ID, "rollback_status": r.Status, "source": r.Source,
				"last_job_id": nonZero(r.LastJobID), "last_job_kind": r.LastJobKind, "last_job_state": r.LastJobState,
			},
			resume: func(ctx context.Context, tx pgx.Tx) (string, *int64, error) {
				res, err := s.cfg.Rollbacks.ResumeTx(ctx, tx, r.ID, Actor)
				if err != nil || !res.Resumed {
					return "", res.JobID, err
				}
				return fmt.Sprintf("rollback %d resumed (%s)", r.ID, res.Status), res.JobID, nil
			},
		})
	}
	for _, c := range snap.strandedCampaigns {
		found := ""
		if c.NextKind == "give_back" {
			found = "finished but still holding stock on hand in its pools (written there around the service)"
		}
		out = append(out, stranded{
			subject: "campaign:" + c.ID,
			found:   found,
			details: map[string]any{"campaign": c.ID, "campaign_status": c.Status, "next_step": c.NextKind},
			resume: func(ctx context.Context, tx pgx.Tx) (string, *int64, error) {
				return s.cfg.Campaigns.ResumeTx(ctx, tx, c.ID, Actor)
			},
		})
	}
	return out
}

// resumeChains gives every stranded chain a job again, each in its own
// transaction that checks again, under the request's or campaign's row
// lock, that nothing carries it on (a chain may have moved since the
// snapshot), then records a finding and raises a warning alert. The
// transaction runs through inventory's InTx: a campaign resumed may give
// stock back to main.
func (s *Service) resumeChains(ctx context.Context, runID int64, snap snapshot) error {
	for _, c := range s.strandedChains(snap) {
		err := s.inv.InTx(ctx, func(tx pgx.Tx) error {
			action, jobID, err := c.resume(ctx, tx)
			if err != nil || action == "" {
				return err
			}
			details := c.details
			details["action"] = action
			f := finding{details: details}
			if jobID != nil {
				f.jobID = *jobID
				details["job_id"] = *jobID
			}
			if err := addFinding(ctx, db.New(tx), runID, ClassRetry, KindChainResumed, f, action); err != nil {
				return err
			}
			what := "Check in the job dashboard (/ops/jobs/) that it completes, and find out who or what stopped its jobs."
			found := c.found
			if found == "" {
				found = "with no job left to run (its jobs were cancelled, deleted or never enqueued)"
			} else {
				what = "Find out who or what wrote into the pool of a finished campaign (its ledger rows say who)."
			}
			_, err = s.alerts.RaiseTx(ctx, tx, alerts.Raise{
				Level: alerts.Warning, Kind: "chain_resumed", Subject: c.subject, Details: details,
				Action: fmt.Sprintf("Reconciliation run %d found %s %s and resumed it: %s. %s",
					runID, c.subject, found, action, what),
			})
			return err
		})
		if err != nil {
			return fmt.Errorf("resume %s: %w", c.subject, err)
		}
	}
	return nil
}

func nonZero(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}
