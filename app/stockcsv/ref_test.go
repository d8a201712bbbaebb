package stockcsv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// TestRefName: the ledger ref of an imported row names its file, and must
// pass domain.ValidRef whatever the file is called (macOS names are NFD).
func TestRefName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "caf\u00e9.csv", refName("cafe\u0301.csv"))
	require.Equal(t, "a?b?.csv", refName("a\nb\u200b.csv"))
	long := refName(strings.Repeat("\u00e9", 150) + ".csv")
	require.LessOrEqual(t, len(long), 200)
	for _, name := range []string{"cafe\u0301.csv", "a\nb\u200b.csv", strings.Repeat("\u00e9", 150), "x\xff.csv"} {
		require.NoError(t, domain.ValidRef("ref", refName(name)+":17", domain.MaxTextLength), "%q", name)
	}
}
