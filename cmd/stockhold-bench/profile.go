package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// With -profile DIR, each timed phase writes into DIR, under the phase's
// number and name:
//   - NN-phase.cpu.pprof: the server's CPU profile over the phase (`go tool
//     pprof bin/stockhold FILE`), for phases up to maxProfiled long; the
//     floor's for soldout's floor phase (`go tool pprof
//     bin/stockhold-bench FILE`, see floor.go);
//   - NN-phase.heap.pprof: the server's heap at the phase's end (`go tool
//     pprof -sample_index=inuse_space bin/stockhold FILE`): what its
//     resident memory holds; NN-phase.heap.txt the same as text, ending
//     with the runtime's memory statistics (HeapInuse, NextGC, Sys...);
//   - NN-phase.bench.cpu.pprof: the bench's own (`go tool pprof
//     bin/stockhold-bench FILE`): the load generator shares the machine;
//   - NN-phase.waits.txt: what the bench database's backends were doing,
//     sampled every 10 ms from pg_stat_activity: running (CPU) or waiting
//     (Lock:transactionid is a row lock, IO:WALSync a commit's flush, ...)
//     while active, or idle in a transaction waiting for the server's next
//     round trip;
//   - NN-phase.statements.txt: pg_stat_statements' slowest statements
//     over the phase, when the PostgreSQL server preloads the module
//     (shared_preload_libraries = 'pg_stat_statements').
const maxProfiled = 30 * time.Second

var phases atomic.Int64

// profiled starts profiling a timed phase of length d when -profile is
// set; the function it returns stops and writes the files.
func (b *bench) profiled(ctx context.Context, name string, d time.Duration) (stop func()) {
	if b.o.profile == "" {
		return func() {}
	}
	if err := os.MkdirAll(b.o.profile, 0o755); err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
		return func() {}
	}
	base := filepath.Join(b.o.profile, fmt.Sprintf("%02d-%s", phases.Add(1), fileName(name)))
	statements := b.pool != nil && b.statementsReset(ctx) == nil

	var wg sync.WaitGroup
	done := make(chan struct{})
	if b.pprof != "" && d <= maxProfiled {
		wg.Go(func() { b.cpuProfile(base+".cpu.pprof", d) })
	}
	self, err := os.Create(base + ".bench.cpu.pprof")
	if err == nil {
		if err = pprof.StartCPUProfile(self); err != nil {
			self.Close()
			self = nil
		}
	}
	if err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
	}
	waits := map[string]int{}
	samples := 0
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rows, err := b.pool.Query(ctx, `SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU')
			                                            ELSE state || coalesce(' (' || wait_event || ')', '') END
			                                 FROM pg_stat_activity
			                                 WHERE datname = current_database() AND pid <> pg_backend_pid()
			                                   AND state IN ('active', 'idle in transaction')`)
			if err != nil {
				continue
			}
			samples++
			for rows.Next() {
				var w string
				if rows.Scan(&w) == nil {
					waits[w]++
				}
			}
			rows.Close()
		}
	})
	return func() {
		if self != nil {
			pprof.StopCPUProfile()
			self.Close()
		}
		close(done)
		wg.Wait()
		if b.pprof != "" {
			b.fetchProfile(base+".heap.pprof", "heap")
			b.fetchProfile(base+".heap.txt", "heap?debug=1")
		}
		b.writeWaits(base+".waits.txt", name, waits, samples)
		if statements {
			b.writeStatements(ctx, base+".statements.txt", name)
		}
	}
}

func fileName(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s)), "-")
}

// cpuProfile fetches the server's CPU profile over d into file.
func (b *bench) cpuProfile(file string, d time.Duration) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	b.fetchProfile(file, fmt.Sprintf("profile?seconds=%d", secs))
}

// fetchProfile fetches the server's profile of that name (and query) into
// file.
func (b *bench) fetchProfile(file, name string) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s", b.pprof, name))
	if err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

func (b *bench) writeWaits(file, name string, waits map[string]int, samples int) {
	type w struct {
		what string
		n    int
	}
	var list []w
	total := 0
	for k, n := range waits {
		list = append(list, w{k, n})
		total += n
	}
	slices.SortFunc(list, func(a, b w) int { return b.n - a.n })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %d samples of pg_stat_activity every 10 ms; backends of the bench database on average, by what they were doing\n", name, samples)
	for _, x := range list {
		fmt.Fprintf(&sb, "%8.2f  %5.1f%%  %s\n", float64(x.n)/float64(max(samples, 1)), 100*float64(x.n)/float64(max(total, 1)), x.what)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
	}
}

// statementsReset empties pg_stat_statements; an error means the server
// does not preload it.
func (b *bench) statementsReset(ctx context.Context) error {
	_, _ = b.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	_, err := b.pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err
}

func (b *bench) writeStatements(ctx context.Context, file, name string) {
	rows, err := b.pool.Query(ctx, `SELECT calls, total_exec_time, mean_exec_time, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
	                                FROM pg_stat_statements
	                                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	                                ORDER BY total_exec_time DESC LIMIT 20`)
	if err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
		return
	}
	defer rows.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: pg_stat_statements, slowest in total\n%10s %12s %10s %10s  %s\n", name, "calls", "total ms", "mean ms", "rows", "query")
	for rows.Next() {
		var calls, n int64
		var total, mean float64
		var q string
		if err := rows.Scan(&calls, &total, &mean, &n, &q); err != nil {
			return
		}
		fmt.Fprintf(&sb, "%10d %12.1f %10.3f %10d  %s\n", calls, total, mean, n, q)
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		fmt.Fprintln(b.log, "  profile:", err)
	}
}
