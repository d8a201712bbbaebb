package domain

import "time"

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

// UTC returns t in UTC (nil stays nil): the API answers in UTC whatever
// the server's time zone.
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
