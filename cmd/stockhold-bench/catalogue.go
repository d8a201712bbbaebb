package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/reconcile"
)

// seedChunk is how many SKUs one seeding transaction puts in stock.
const seedChunk = 1_000_000

// seedCatalogue puts SKUs sp-00000000 to sp-<n-1> on sale straight in SQL,
// writing what as many stock adjustments would (a stock row at version 1
// and its stock_in ledger row, with the event feed's columns), a million a
// transaction, then vacuums and analyzes the two tables as autovacuum
// would in time. Over HTTP, ten million adjustments would take hours.
func (b *bench) seedCatalogue(ctx context.Context, n int) error {
	began := time.Now()
	for from := 0; from < n; from += seedChunk {
		to := min(from+seedChunk, n)
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO stock (sku, pool, total, available, version, feed_xid)
			SELECT 'sp-' || lpad(i::text, 8, '0'), 'main', $3, $3, 1, pg_current_xact_id()
			FROM generate_series($1::int, $2::int - 1) i`, from, to, bigStock)
		if err == nil {
			_, err = tx.Exec(ctx, `
				INSERT INTO ledger (sku, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
				                    stock_version, actor, reason, feed_xid, total_after, available_after, reserved_after, sold_after)
				SELECT 'sp-' || lpad(i::text, 8, '0'), 'main', 'stock_in', $3, $3, 0, 0,
				       1, 'bench', 'benchmark stock', pg_current_xact_id(), $3, $3, 0, 0
				FROM generate_series($1::int, $2::int - 1) i`, from, to, bigStock)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return fmt.Errorf("seed SKUs %d-%d: %w", from, to-1, err)
		}
		fmt.Fprintf(b.log, "  seeded %d of %d SKUs (%.0f s)\n", to, n, time.Since(began).Seconds())
	}
	if _, err := b.pool.Exec(ctx, `VACUUM (ANALYZE) stock, ledger`); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	fmt.Fprintf(b.log, "  catalogue of %d SKUs seeded and vacuumed in %.0f s\n", n, time.Since(began).Seconds())
	return nil
}

// prewarm reads the pages a hold over the catalogue lands on into
// PostgreSQL's shared buffers (pg_prewarm): stock and its indexes, and the
// indexes of the ledger's partition of this month, as a server that has
// run for a while with shared_buffers sized for them has them. Without
// it, a run right after the server starts reads a page from disk for
// most holds, and measures the start instead of the catalogue. It says
// how much it read against shared_buffers: when they do not fit, the
// pages read last push out the first.
func (b *bench) prewarm(ctx context.Context) error {
	began := time.Now()
	if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_prewarm`); err != nil {
		fmt.Fprintf(b.log, "  not prewarmed (pg_prewarm: %v): the run reads pages from disk as it goes\n", err)
		return nil
	}
	var read, buffers int64
	err := b.pool.QueryRow(ctx, `
		WITH rels AS (
			SELECT 'stock'::regclass AS rel
			UNION ALL
			SELECT x.indexrelid FROM pg_index x WHERE x.indrelid = 'stock'::regclass
			UNION ALL
			SELECT x.indexrelid FROM pg_index x
			WHERE x.indrelid = to_regclass('ledger_' || to_char(now() AT TIME ZONE 'UTC', 'YYYY_MM'))
		)
		SELECT coalesce(sum(pg_prewarm(rel)), 0)::bigint * current_setting('block_size')::bigint,
		       (SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings WHERE name = 'shared_buffers')
		FROM rels`).Scan(&read, &buffers)
	if err != nil {
		return fmt.Errorf("prewarm: %w", err)
	}
	fmt.Fprintf(b.log, "  prewarmed %d MB (stock, its indexes, this month's ledger indexes) into shared_buffers of %d MB in %.0f s\n",
		read>>20, buffers>>20, time.Since(began).Seconds())
	if read > buffers*9/10 {
		fmt.Fprintf(b.log, "  they do not fit: holds will read pages from disk (DEVDB_SHARED_BUFFERS, see docs/SCALING.md)\n")
	}
	return nil
}

// changedRows is how many stock rows the reconcile scenario changes
// between its full and incremental runs.
const changedRows = 10_000

// reconcile times reconciliation over the catalogue: the first full run
// (no watermark yet: each row's ledger probed from its checkpoint, and
// every checkpoint written), a full run from the watermark, an incremental
// run after holds on changedRows SKUs, and a full run again. It runs in
// this process, as `stockhold reconcile` does.
func (b *bench) reconcile(ctx context.Context) ([]*result, error) {
	if err := b.spreadStock(ctx); err != nil {
		return nil, err
	}
	pool, err := app.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	deps, err := app.Standalone(config.Config{ReconcileRepairLimit: 100}, pool, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	// A catalogue a run before reconciled (-reuse) has a watermark: its
	// "first" run is one more full run from it.
	var reconciled bool
	if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM reconcile_runs
		WHERE status = 'succeeded' AND skus IS NULL AND snapshot_xmin IS NOT NULL)`).Scan(&reconciled); err != nil {
		return nil, err
	}
	took := map[string]time.Duration{}
	timed := func(step, scope string) (string, error) {
		began, cpu := time.Now(), b.clusterCPU(ctx)
		r, err := deps.Reconcile.Run(ctx, reconcile.ReconcileArgs{Trigger: reconcile.TriggerCLI, Scope: scope})
		d, cpu := time.Since(began), b.clusterCPU(ctx)-cpu
		took[step] = d
		if err != nil {
			return "", err
		}
		if r.HighRisk > 0 || r.Status != reconcile.StatusSucceeded {
			return "", fmt.Errorf("reconciliation run %d: %s, %d high-risk findings", r.ID, r.Status, r.HighRisk)
		}
		line := fmt.Sprintf("%s %.2f s (%d rows checked", *r.Scope, d.Seconds(), r.RowsChecked)
		if cpu > 0 {
			line += fmt.Sprintf(", PostgreSQL CPU %.2f s", cpu.Seconds())
		}
		line += ")"
		fmt.Fprintf(b.log, "  %s\n", line)
		return line, nil
	}
	var notes []string
	for _, step := range []string{"first", "again", "changes", "incremental", "last"} {
		var note string
		switch step {
		case "first", "again", "last":
			note, err = timed(step, reconcile.ScopeFull)
		case "incremental":
			note, err = timed(step, reconcile.ScopeIncremental)
		case "changes":
			note, err = b.changeRows(ctx, min(changedRows, b.o.catalogue))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", step, err)
		}
		notes = append(notes, note)
	}
	r := &result{Scenario: "reconcile", Note: fmt.Sprintf("%d stock rows: first %s; %s; %s; then %s; %s",
		b.o.catalogue, notes[0], notes[1], notes[2], notes[3], notes[4])}
	r.figure("catalogue", float64(b.o.catalogue))
	if reconciled {
		r.figure("full_s", max(took["first"], took["again"], took["last"]).Seconds())
	} else {
		r.figure("first_s", took["first"].Seconds())
		r.figure("full_s", max(took["again"], took["last"]).Seconds())
	}
	r.figure("incremental_s", took["incremental"].Seconds())
	return []*result{r}, nil
}

// changeRows holds one unit of each of n distinct catalogue SKUs over HTTP.
func (b *bench) changeRows(ctx context.Context, n int) (string, error) {
	skus := distinct(n, b.o.catalogue)
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	began := time.Now()
	for range b.o.clients {
		wg.Go(func() {
			for i := range work {
				var err error
				for try := 0; try < 100; try++ { // a 503 is retried with the same key
					var a answer
					a, err = b.do("POST", "/v1/reservations", b.shop, fmt.Sprintf("change-%s-%d", b.run, i),
						holdBody(0, "", spreadSKU(skus[i])))
					if err == nil && a.status != http.StatusCreated {
						err = fmt.Errorf("HTTP %d: %s", a.status, a.body)
					}
					// A 503, or a keep-alive connection the server closed
					// while the runs before took minutes, is sent again.
					if err == nil || (a.status != http.StatusServiceUnavailable && a.status != 0) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range skus {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if err := cmpErr(firstErr, ctx.Err()); err != nil {
		return "", err
	}
	return fmt.Sprintf("holds on %d SKUs in %.1f s", n, time.Since(began).Seconds()), nil
}

// clusterCPU is the CPU time the whole PostgreSQL server has used so far
// (the postmaster, its live processes, and the ones that exited, parallel
// workers among them), when it runs on this machine; 0 otherwise. Around
// a reconciliation it tells the server's work apart from the time it
// waited for a core on a busy machine.
func (b *bench) clusterCPU(ctx context.Context) time.Duration {
	var backend int
	if err := b.pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0
	}
	postmaster := parentOf(backend)
	if postmaster <= 1 {
		return 0
	}
	total := readCPU(postmaster) + readChildrenCPU(postmaster)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && parentOf(pid) == postmaster {
			total += readCPU(pid)
		}
	}
	return total
}

// statFields are the fields of /proc/PID/stat after the command name.
func statFields(pid int) []string {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(st[i+1:]))
}

func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// readChildrenCPU is the CPU time of pid's children that exited and were
// waited for (cutime and cstime).
func readChildrenCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	cutime, _ := strconv.ParseInt(f[13], 10, 64)
	cstime, _ := strconv.ParseInt(f[14], 10, 64)
	return time.Duration(cutime+cstime) * time.Second / clockTicks
}
