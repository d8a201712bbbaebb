package domain

// sqlc scans a nullable column into a pointer; these convert at that edge.

// Optional returns s, or nil when it is empty: optional text as a nullable
// column holds it.
func Optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Value returns *p, or T's zero value when p is nil.
func Value[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
