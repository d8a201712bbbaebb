package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedHeaderValues: the header values every answer shares are named
// canonically (a lookup by any spelling finds them), and what one answer
// does to its headers changes no other's.
func TestSharedHeaderValues(t *testing.T) {
	t.Parallel()
	shared := append([]struct {
		name  string
		value []string
	}{{"Content-Type", problemJSON}}, pageHeaders...)
	one, other := http.Header{}, http.Header{}
	for _, h := range shared {
		require.Equal(t, http.CanonicalHeaderKey(h.name), h.name)
		require.Len(t, h.value, 1)
		one[h.name], other[h.name] = h.value, h.value
	}
	for _, h := range shared {
		one.Add(h.name, "added")
	}
	one.Set("X-Frame-Options", "SAMEORIGIN")
	for _, h := range shared {
		require.Equal(t, h.value, other.Values(h.name), h.name)
		require.Equal(t, 1, cap(other[h.name]), h.name)
	}
	require.Equal(t, []string{pageCSP, "added"}, one.Values("content-security-policy"))
	require.Equal(t, "DENY", other.Get("x-frame-options"))
	require.Equal(t, "application/problem+json", other.Get("content-type"))
}
