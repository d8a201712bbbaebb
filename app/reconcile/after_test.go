package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/stock"
)

// lockedBuffer is a log destination that goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// warnings returns the lines logged above INFO.
func (b *lockedBuffer) warnings(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m), "%s", l)
		if m["level"] != "INFO" { // runs log a line each when they finish
			out = append(out, m)
		}
	}
	return out
}

// TestAfterSkippedAtTheLockTimeoutLogsOnce: adjustments in a row while
// another reconciliation holds the lock (stock seeded by many clients at
// once) each give up their follow-up reconciliation at the lock timeout;
// that is one warning, not an error per adjustment, and the skipped SKUs
// are what the next periodic run checks.
func TestAfterSkippedAtTheLockTimeoutLogsOnce(t *testing.T) {
	t.Parallel()
	_, b := setup(t, nil)
	ctx := context.Background()
	cfg := b.pool.Config()
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "50ms" // as an HTTP request's session has
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var logs lockedBuffer
	svc := reconcile.New(pool, b.inserter, b.alerts, b.inv, reconcile.Config{RepairLimit: 100, StuckGrace: time.Minute,
		Log: slog.New(slog.NewJSONHandler(&logs, nil))})

	skus := []string{"A1", "B1", "C1", "D1", "E1"}
	for _, sku := range skus {
		dbtest.StockIn(t, b.pool, sku, 100)
	}
	settle(t, b)
	require.EqualValues(t, 5, runScope(t, svc, reconcile.ScopeIncremental).RowsChecked, "the first clean run: full")

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	require.NoError(t, db.New(holder).ReconcileLock(ctx))
	checks := make(chan *reconcile.Check, 3)
	var wg sync.WaitGroup
	for _, sku := range skus[:3] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.inv.Adjust(ctx, stock.Adjustment{SKU: sku, Delta: 1, Actor: "seed"}); err != nil {
				checks <- &reconcile.Check{Status: err.Error()}
				return
			}
			checks <- svc.After(ctx, reconcile.TriggerAdjustment, sku)
		}()
	}
	wg.Wait()
	close(checks)
	for c := range checks {
		require.Nil(t, c, "skipped: no check to show")
	}
	lines := logs.warnings(t)
	require.Len(t, lines, 1, "one line for three skipped: %v", lines)
	require.Equal(t, "WARN", lines[0]["level"])
	require.Contains(t, lines[0]["msg"], "skipped at the lock timeout")
	require.InDelta(t, 1, lines[0]["skipped"], 0)

	require.NoError(t, holder.Rollback(ctx))
	settle(t, b)
	// A periodic run between full runs is incremental (a full one checks
	// every SKU): it checks the three whose check was skipped.
	r := runScope(t, svc, reconcile.ScopeIncremental)
	require.Equal(t, reconcile.ScopeIncremental, scopeOf(r))
	require.EqualValues(t, 3, r.RowsChecked, "the SKUs whose check was skipped moved past the watermark")
	require.Len(t, logs.warnings(t), 1, "nothing more logged")
}
