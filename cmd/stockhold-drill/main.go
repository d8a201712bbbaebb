// Command stockhold-drill is `make drill-failover`: it brings up a
// pg_auto_failover formation on this machine (a monitor and two data nodes
// with synchronous replication, installing Debian's
// postgresql-15-auto-failover when missing), runs two `stockhold serve`
// instances on its multi-host URL under mixed load, kills the primary's
// postmaster with SIGKILL, keeps the load going through the promotion,
// then switches back with a planned switchover, and checks the final
// primary (see internal/drill). Progress goes to stderr; the last line on
// stdout says what was acknowledged, what was lost and how long writes
// were unavailable. It exits 1 when a check failed, 2 when the drill could
// not run.
//
//	stockhold-drill [-server bin/stockhold] [-clients 16] [-warmup 20s]
//	                [-after-failover 20s] [-after-switchover 15s]
//	                [-rollback-holds 3000] [-keep]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/stockhold/stockhold/internal/drill"
	"github.com/stockhold/stockhold/internal/formation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stockhold-drill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "bin/stockhold", "the stockhold binary to run")
	o := drill.Options{Rejoin: true, Switchover: true, Log: stderr}
	fs.IntVar(&o.Clients, "clients", 16, "concurrent clients")
	fs.DurationVar(&o.Warmup, "warmup", 20*time.Second, "load before the kill")
	fs.DurationVar(&o.AfterFailover, "after-failover", 20*time.Second, "load after the old primary is back as a standby")
	fs.DurationVar(&o.AfterSwitchover, "after-switchover", 15*time.Second, "load after the switchover")
	fs.IntVar(&o.RollbackHolds, "rollback-holds", 3000, "holds of the rollback in progress at the kill")
	fs.BoolVar(&o.Keep, "keep", false, "leave the formation running afterwards")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bin, err := filepath.Abs(*server)
	if err != nil {
		fmt.Fprintln(stderr, "stockhold-drill:", err)
		return 2
	}
	checkout, err := drill.Checkout()
	if err != nil {
		fmt.Fprintln(stderr, "stockhold-drill:", err)
		return 2
	}
	logs, err := os.MkdirTemp("", "stockhold-drill-")
	if err != nil {
		fmt.Fprintln(stderr, "stockhold-drill:", err)
		return 2
	}
	o.LogDir = logs
	o.Command = func() *exec.Cmd { return exec.Command(bin, "serve") }
	o.Formation = formation.Options{Name: "drill", Checkout: checkout}

	res, err := drill.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "stockhold-drill: %v (instance logs in %s)\n", err, logs)
		return 2
	}
	fmt.Fprintf(stderr, "answers: %v\n", res.Answers)
	fmt.Fprintf(stderr, "promotion: %.1f s after the kill (monitor)\n", res.Promotion.Seconds())
	for _, p := range res.Problems {
		fmt.Fprintln(stderr, "problem:", p)
	}
	fmt.Fprintln(stdout, res.Line())
	if len(res.Problems) > 0 {
		fmt.Fprintf(stderr, "instance logs in %s\n", logs)
		return 1
	}
	if o.Keep {
		fmt.Fprintf(stderr, "instance logs in %s; the formation runs on in %s\n", logs, filepath.Dir(logs))
	} else {
		_ = os.RemoveAll(logs)
	}
	return 0
}
