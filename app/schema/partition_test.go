package schema_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// partitionedVersion is the migration that partitions the ledger.
const partitionedVersion = 149

// TestUpgradeToPartitionedLedgerKeepsServingHolds migrates a populated
// database (thousands of ledger rows, holds held and confirmed, a
// checkpoint) to the partitioned ledger while four clients keep placing
// holds. No hold fails; every ledger row is there, unchanged, in the
// first partition, which is the table as it was (the same relation and
// the same indexes: nothing was copied or rebuilt); new rows take ids
// after the old ones; partitions exist through three months ahead; the
// books balance.
func TestUpgradeToPartitionedLedgerKeepsServingHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, m := before(t, partitionedVersion)
	require.Equal(t, "r", relkind(t, pool), "the ledger is one table before the upgrade")
	holdsOfThisRevision(t, pool)

	_, err := pool.Exec(ctx, `
		INSERT INTO stock (sku, pool, total, available, version)
		SELECT 'BULK-' || lpad(n::text, 5, '0'), 'main', 1000, 1000, 1 FROM generate_series(1, 3000) n;
		INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold, stock_version, actor)
		SELECT 'BULK-' || lpad(n::text, 5, '0'), 'main', 'stock_in', 1000, 1000, 0, 0, 1, 'seed' FROM generate_series(1, 3000) n;
		INSERT INTO ledger_checkpoints (sku, pool, stock_version, total, available, reserved, sold)
		VALUES ('BULK-00001', 'main', 1, 1000, 1000, 0, 0);`)
	require.NoError(t, err)
	svc := inventory.New(pool, slog.New(slog.DiscardHandler), inventory.Config{})
	shop := inventory.Caller{Name: "shop"}
	for i := range 20 {
		h, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("before-%d", i),
			Items: []inventory.Item{{SKU: fmt.Sprintf("BULK-%05d", i+1), Quantity: 2}}})
		require.NoError(t, err)
		if i%2 == 0 {
			_, err = svc.Confirm(ctx, h.ID, shop)
			require.NoError(t, err)
		}
	}

	var rowsBefore int
	var maxBefore int64
	var digestBefore string
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), max(id), md5(string_agg(l::text, ',' ORDER BY id)) FROM ledger l`).
		Scan(&rowsBefore, &maxBefore, &digestBefore))
	var tableBefore uint32
	var indexesBefore []uint32
	var allBefore int
	// ledger_row_version goes later (migration 00157, one index leading
	// with the SKU); every other index stays as it was.
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT 'ledger'::regclass::oid, array_agg(indexrelid::oid ORDER BY indexrelid) FILTER (WHERE indexrelid <> 'ledger_row_version'::regclass),
		       count(*)
		FROM pg_index WHERE indrelid = 'ledger'::regclass AND NOT indisprimary`).Scan(&tableBefore, &indexesBefore, &allBefore))
	require.Equal(t, 5, allBefore)

	held := holdThrough(t, svc, func() {
		_, err := m.Up(ctx)
		require.NoError(t, err)
	})

	require.Equal(t, "p", relkind(t, pool), "the ledger is partitioned")
	var digestAfter string
	var rowsAfter int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id <= $1),
		md5(string_agg(l::text, ',' ORDER BY id) FILTER (WHERE id <= $1)) FROM ledger l`, maxBefore).Scan(&rowsAfter, &digestAfter))
	require.Equal(t, rowsBefore, rowsAfter, "every row is kept")
	require.Equal(t, digestBefore, digestAfter, "every row is as it was")
	require.Equal(t, int(held), dbtest.Count(t, pool, `SELECT count(*) FROM ledger WHERE id > $1`, maxBefore),
		"one ledger row for each hold placed during the upgrade, each with a new id")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM (SELECT id FROM ledger GROUP BY id HAVING count(*) > 1) d`), "ids stay unique")

	var first string
	var indexesAfter []uint32
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT c.relname, (SELECT array_agg(indexrelid::oid ORDER BY indexrelid) FROM pg_index WHERE indrelid = c.oid AND NOT indisprimary)
		FROM pg_class c WHERE c.oid = $1`, tableBefore).Scan(&first, &indexesAfter))
	require.Equal(t, indexesBefore, indexesAfter, "the table became the first partition with its indexes, none rebuilt")
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'ledger'::regclass AND inhrelid = $1`,
		tableBefore), "%s is a partition of the ledger", first)
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger'::regclass
		  AND pg_get_expr(c.relpartbound, c.oid) LIKE '%TO (''' || to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + interval '4 months', 'YYYY-MM-DD') || '%'`),
		"partitions through three months ahead")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
		JOIN pg_inherits i ON i.inhrelid = d.refobjid WHERE i.inhparent = 'ledger'::regclass`),
		"no view reads a partition alone (stock_health reads the ledger)")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE NOT i.indisvalid AND c.relnamespace = 'public'::regnamespace`), "no index left invalid")
	dbtest.RequireInvariants(t, pool)

	// The ledger stays append-only, in every partition.
	_, err = pool.Exec(ctx, `DELETE FROM ledger WHERE id = $1`, maxBefore)
	require.ErrorContains(t, err, "append-only")
	_, err = pool.Exec(ctx, `TRUNCATE `+first)
	require.ErrorContains(t, err, "append-only")
}

// holdThrough runs upgrade while four clients keep placing holds of one
// unit of BULK-00100 to BULK-02899 (a 503 busy is retried, as a client
// does): holds go through before it and after it, and none fails. It
// returns how many were placed.
func holdThrough(t *testing.T, svc *inventory.Service, upgrade func()) int64 {
	t.Helper()
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var held atomic.Int64
	var mu sync.Mutex
	var failures []error
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _, err := svc.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: fmt.Sprintf("during-%d-%d", c, i),
					Items: []inventory.Item{{SKU: fmt.Sprintf("BULK-%05d", 100+(c*1000+i)%2800), Quantity: 1}}})
				var e *domain.Error
				switch {
				case err == nil:
					held.Add(1)
				case errors.As(err, &e) && e.Code == domain.CodeBusy:
					// Changed nothing: a client retries it.
				default:
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	start := held.Load()
	require.Eventually(t, func() bool { return held.Load() > start+20 }, time.Minute, 5*time.Millisecond, "holds before the upgrade")
	upgrade()
	after := held.Load()
	require.Eventually(t, func() bool { return held.Load() > after+20 }, time.Minute, 5*time.Millisecond, "holds after the upgrade")
	close(stop)
	wg.Wait()
	require.Empty(t, failures, "no hold failed across the upgrade")
	return held.Load()
}

// relkind is the ledger's pg_class.relkind: r for a table, p for a
// partitioned one.
func relkind(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var k string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT relkind::text FROM pg_class WHERE oid = 'ledger'::regclass`).Scan(&k))
	return k
}

// holdsOfThisRevision adds to a database migrated before a later
// migration the columns (and the function) that this revision's hold path
// reads and writes, as migrations 00151, 00153 and 00154 add them (IF NOT
// EXISTS, so they migrate such a database too): the holds placed before and during an
// older upgrade are this revision's.
func holdsOfThisRevision(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		ALTER TABLE stock ADD COLUMN backordered bigint NOT NULL DEFAULT 0,
		    ADD COLUMN backorder_limit bigint NOT NULL DEFAULT 0, ADD COLUMN backorder_horizon_days integer;
		ALTER TABLE reservation_lines ADD COLUMN backordered bigint NOT NULL DEFAULT 0;
		ALTER TABLE ledger ADD COLUMN delta_backordered bigint NOT NULL DEFAULT 0, ADD COLUMN expected_on date;
		ALTER TABLE ledger_checkpoints ADD COLUMN backordered bigint NOT NULL DEFAULT 0;
		ALTER TABLE reservation_lines ADD COLUMN IF NOT EXISTS bundle_sku text,
		    ADD COLUMN IF NOT EXISTS bundle_quantity bigint, ADD COLUMN IF NOT EXISTS bundle_version bigint;
		CREATE TABLE IF NOT EXISTS bundles (
		    sku      text        PRIMARY KEY,
		    version  bigint      NOT NULL,
		    reason   text        NOT NULL,
		    set_by   text        NOT NULL,
		    set_at   timestamptz NOT NULL DEFAULT now(),
		    CONSTRAINT bundles_version CHECK (version >= 1),
		    CONSTRAINT bundles_reason CHECK (char_length(reason) BETWEEN 1 AND 500)
		);
		CREATE TABLE IF NOT EXISTS bundle_components (
		    bundle_sku  text    NOT NULL,
		    version     bigint  NOT NULL,
		    sku         text    NOT NULL,
		    quantity    bigint  NOT NULL,
		    split       boolean NOT NULL DEFAULT false,
		    position    int     NOT NULL,
		    PRIMARY KEY (bundle_sku, version, sku),
		    CONSTRAINT bundle_components_quantity CHECK (quantity BETWEEN 1 AND 1000000),
		    CONSTRAINT bundle_components_not_itself CHECK (sku <> bundle_sku),
		    CONSTRAINT bundle_components_version CHECK (version >= 1),
		    CONSTRAINT bundle_components_position CHECK (position BETWEEN 0 AND 19)
		);
		CREATE FUNCTION stock_incoming_soon(p_sku text, p_location text, p_pool text, p_days integer)
		RETURNS TABLE (expected_on date, quantity bigint) LANGUAGE sql STABLE AS 'SELECT NULL::date, 0::bigint WHERE false';`)
	require.NoError(t, err)
}
