package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/stock"
)

// TestRepairDifferenceCarriesThePromise: the repair form's previewed
// difference keeps backordered, so an apply of a promise's repair sends
// the difference its preview showed (and is not refused as stale); a
// form served before backordered (or short) existed still reads.
func TestRepairDifferenceCarriesThePromise(t *testing.T) {
	d := stock.Counters{Total: -1, Available: -1, Short: 3, Backordered: 2}
	require.Equal(t, "-1,-1,0,0,0,0,0,0,3,2", formatDifference(d))
	require.Equal(t, &d, parseDifference(formatDifference(d)))
	require.Equal(t, &stock.Counters{Total: 1, Available: 1, Short: 4}, parseDifference("1,1,0,0,0,0,0,0,4"))
	require.Equal(t, &stock.Counters{Total: 1, Available: 1}, parseDifference("1,1,0,0,0,0,0,0"))
	require.Nil(t, parseDifference("1,1,0,0,0,0,0"))
	require.Nil(t, parseDifference("1,1,0,0,0,0,0,0,0,0,0"))
	require.Nil(t, parseDifference("1,1,0,0,0,0,0,0,0,x"))
}
