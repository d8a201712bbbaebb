package reports

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestEveryLedgerKindHasAColumn: every kind the ledger's CHECK constraint
// allows lands in a named column of the report, and no column names a
// kind the ledger cannot hold. A carried balance is the exception: it
// stands at the end of an archived month, and a report of a day before an
// archive's end is refused (410 archived).
func TestEveryLedgerKindHasAColumn(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var def string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ledger_kind' AND conrelid = 'ledger'::regclass`).Scan(&def))
	kinds := map[string]bool{}
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(def, -1) {
		kinds[m[1]] = true
	}
	require.NotEmpty(t, kinds, def)
	require.True(t, kinds[string(stock.LedgerCarried)], def)
	delete(kinds, string(stock.LedgerCarried))
	for k := range kinds {
		_, ok := columns[stock.LedgerKind(k)]
		require.True(t, ok, "ledger kind %s has no column", k)
	}
	for k := range columns {
		require.Contains(t, kinds, string(k), "column of kind %s, which the ledger does not allow", k)
	}
}
