package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTuneGC sets serve's collector settings unless the environment sets
// its own.
func TestTuneGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	tuneGC(func(string) string { return "" })
	require.Equal(t, gcPercent, debug.SetGCPercent(100))
	require.Equal(t, int64(memoryLimit), debug.SetMemoryLimit(math.MaxInt64))

	env := map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}
	tuneGC(func(k string) string { return env[k] })
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC wins")
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "GOMEMLIMIT wins")
}
