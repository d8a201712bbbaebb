package main

import (
	"fmt"
	"time"
)

// timeForms says which forms a time flag takes; parseTime reads them.
const timeForms = "an RFC 3339 time (2026-12-01T10:00:00Z), a date (2026-12-01, midnight UTC), or a duration before now (90m, 2h)"

// parseTime reads a time flag's value: an RFC 3339 time (with or without
// fractional seconds), a date (midnight UTC), or a Go duration counted back
// from now. The error names the flag and the forms it takes.
func parseTime(flag, v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want %s", flag, v, timeForms)
}
