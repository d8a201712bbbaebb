package alerts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// WatchDiscarded turns every River job discarded since the last watch into a
// critical alert, one per job kind (repeats count as occurrences), and
// returns how many jobs it found. Every job kind has three attempts, so a
// discarded job is one that failed three times, panicked three times, timed
// out, or was given up by River's rescuer: all of them need a person.
func (s *Service) WatchDiscarded(ctx context.Context) (int, error) {
	var found int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		jobs, err := q.DiscardedJobsClaim(ctx)
		if err != nil {
			return fmt.Errorf("read discarded jobs: %w", err)
		}
		found = len(jobs)
		for start := 0; start < len(jobs); {
			end := start
			for end < len(jobs) && jobs[end].Kind == jobs[start].Kind {
				end++
			}
			batch := jobs[start:end]
			last := batch[len(batch)-1]
			ids := make([]int64, len(batch))
			for i, j := range batch {
				ids[i] = j.ID
			}
			a, err := s.RaiseTx(ctx, tx, Raise{
				Level:   Critical,
				Kind:    "job_discarded",
				Subject: "job:" + last.Kind,
				Details: map[string]any{
					"job_kind":     last.Kind,
					"job_ids":      ids,
					"last_job_id":  last.ID,
					"attempts":     last.Attempt,
					"max_attempts": last.MaxAttempts,
					"last_error":   json.RawMessage(orNull(last.LastError)),
					"args":         json.RawMessage(last.Args),
				},
				Action: fmt.Sprintf("A %s job failed %d times and was discarded. Read its errors in the job dashboard (/ops/jobs/) or river_job, fix the cause, then retry it from the dashboard; sql/job_health.sql lists failures by kind.", last.Kind, last.Attempt),
			})
			if err != nil {
				return err
			}
			if err := q.DiscardedJobsLink(ctx, &a.ID, ids); err != nil {
				return err
			}
			start = end
		}
		return nil
	})
	return found, err
}

func orNull(s string) []byte {
	if s == "" || !json.Valid([]byte(s)) {
		return []byte("null")
	}
	return []byte(s)
}
