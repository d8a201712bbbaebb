package inventory

// SetBeforeGrant makes every hold batch call f with each hold it is about
// to decide; tests make it panic.
func SetBeforeGrant(s *Service, f func(HoldRequest)) { s.beforeGrant = f }

// PendingHolds is how many holds wait for a batch.
func PendingHolds(s *Service) int {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()
	return len(s.holds.pending)
}
