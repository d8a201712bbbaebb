package stock

// SetCatalogueScan makes a filtered catalogue page read at most n rows.
func SetCatalogueScan(s *Service, n int) { s.catalogueScan = n }
