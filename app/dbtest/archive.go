package dbtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// CloseMonthNow makes the ledger's current month end now, for a test: the
// rows written so far lie in a partition whose range has ended (as last
// month's would, ready to archive), and a new partition takes the rest of
// the month. It returns when the closed range ends.
func CloseMonthNow(t testing.TB, pool *pgxpool.Pool) time.Time {
	t.Helper()
	ctx := context.Background()
	var name string
	var from, end time.Time
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT c.relname, (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz, clock_timestamp()
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger'::regclass
		  AND pg_get_expr(c.relpartbound, c.oid) LIKE '%' || to_char(date_trunc('month', now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD') || '%) TO%'`).
		Scan(&name, &from, &end))
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	_, err := pool.Exec(ctx, fmt.Sprintf(`
		ALTER TABLE ledger DETACH PARTITION %[1]s;
		ALTER TABLE %[1]s RENAME TO %[2]s;
		ALTER TABLE ledger ATTACH PARTITION %[2]s FOR VALUES FROM ('%[4]s') TO ('%[5]s');
		CREATE TABLE %[3]s (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
		ALTER TABLE ledger ATTACH PARTITION %[3]s FOR VALUES FROM ('%[5]s') TO ('%[6]s');`,
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{name + "_a"}.Sanitize(), pgx.Identifier{name + "_b"}.Sanitize(),
		ts(from), ts(end), ts(from.AddDate(0, 1, 0))))
	require.NoError(t, err)
	return end
}
