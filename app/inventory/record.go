package inventory

import (
	"time"
)

// holdAnswered records a hold request's outcome, in the service's own
// counts and with its Recorder.
func (s *Service) holdAnswered(outcome string) {
	s.counts.Add(outcome)
	s.rec.HoldAnswered(outcome)
}

// CountUnreadableHold records a hold request refused before it reached
// the service (a body that is not a hold request at all), so that the
// counts cover every request.
func (s *Service) CountUnreadableHold() { s.holdAnswered("invalid_request") }

// timeBatch tells the Recorder how long a group-commit transaction begun
// at start took; a batch defers it once its connection is acquired.
func (s *Service) timeBatch(kind string, start time.Time) { s.rec.BatchTook(kind, time.Since(start)) }
