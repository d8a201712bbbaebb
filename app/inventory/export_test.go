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

// PendingChanges is how many confirms and releases wait for a batch.
func PendingChanges(s *Service) int {
	s.changes.mu.Lock()
	defer s.changes.mu.Unlock()
	return len(s.changes.pending)
}

// SetCatalogueScan makes a filtered catalogue page read at most n rows.
func SetCatalogueScan(s *Service, n int) { s.catalogueScan = n }

// NopRecorder records nothing; tests embed it to count one thing.
func NopRecorder() Recorder { return nopRecorder{} }
