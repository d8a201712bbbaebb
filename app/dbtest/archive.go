package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/partitions"
)

// CloseMonthNow makes the ledger's current month end now, for a test: the
// rows written so far lie in a partition whose range has ended (as last
// month's would, ready to archive), and a new partition takes the rest of
// the month (partitions.CutNow). It returns when the closed range ends.
func CloseMonthNow(t testing.TB, pool *pgxpool.Pool) time.Time {
	t.Helper()
	end, err := partitions.New(pool, nil).CutNow(context.Background(), 5*time.Second)
	require.NoError(t, err)
	return end
}
