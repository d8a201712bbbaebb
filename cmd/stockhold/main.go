// Command stockhold is the inventory reservation service: its HTTP API and
// job workers (serve), its migrations, and the operator commands.
//
//	stockhold serve                      HTTP API + job workers
//	stockhold migrate up|down|status     goose migrations, River's included
//	stockhold apikey create --name N --role shop|ops
//	stockhold apikey list | revoke --name N | rotate --name N [--role R] [--grace D]
//	stockhold rollback --operator O --reason R (--reservation ID ... | --campaign C | --sku S [--pool P]) [--dry-run]
//	stockhold rollback resume ID [--operator O]
//	stockhold reconcile [--sku S]...     check the books now; exit 1 on high risk
//	stockhold stock import FILE.csv      apply sku,pool,delta or sku,pool,set_total rows, resumable
//	stockhold stock export [--out FILE]  every stock row as CSV
//
// Configuration comes from the environment; see the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/logging"
)

// usage is printed for -h and for an unknown command.
const usage = `usage: stockhold <command> [flags]

commands:
  serve                                  run the HTTP API and the job workers
  migrate up|down|status                 apply, roll back one, or list migrations
  apikey create --name N --role shop|ops create an API key; prints the token on the last line
                                         (a name in use by another key is refused: rotate it)
  apikey list                            every key: id, name, role, created, in use or revoked
  apikey revoke --name N                 stop the key named N now and end its console sessions;
                                         every instance refuses it within 3 s
  apikey rotate --name N [--role R] [--grace D]
                                         a new token for N (created when there is none; the role
                                         defaults to the old key's); the old one stops after D (default 0)
  rollback --operator O --reason R (--reservation ID ... | --campaign C | --sku S [--pool P] [--held-before T]) [--dry-run]
                                         enqueue a manual rollback; prints its request id on the last line
  rollback resume ID [--operator O]      give a rollback whose jobs were cancelled, deleted or discarded
                                         a job again (idempotent)
  reconcile [--sku S]...                 check the books now and print the findings;
                                         exits 1 when a pool is out of balance (high risk)
  stock import FILE.csv [--actor A] [--reason R]
                                         apply a CSV of sku,pool,delta or sku,pool,set_total rows in
                                         transactions of 1,000; a rerun resumes after the rows applied;
                                         exits 2 when the file has a bad row (nothing applied), 1 when a
                                         chunk fails (the chunks before it stay applied)
  stock export [--out FILE]              write every stock row as CSV (sku,pool,set_total,...): a file
                                         that stock import reads back

environment: DATABASE_URL (required), STOCKHOLD_ADDR (default :8080), STOCKHOLD_ALERT_WEBHOOK, ...
(see README.md for every variable)
`

// errUsage marks an error whose fix is to read the usage.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command and returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, getenv, stderr)
	case "migrate":
		err = migrate(ctx, args[1:], getenv, stdout, stderr)
	case "apikey":
		err = apikey(ctx, args[1:], getenv, stdout)
	case "rollback":
		err = rollback(ctx, args[1:], getenv, stdout, stderr)
	case "reconcile":
		err = reconcileCmd(ctx, args[1:], getenv, stdout, stderr)
	case "stock":
		err = stock(ctx, args[1:], getenv, stdout, stderr)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return int(exit)
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "stockhold: %v\n\n%s", err, usage)
		return 2
	}
	fmt.Fprintf(stderr, "stockhold: %v\n", err)
	return 1
}

// exitError ends the process with a code after the command said its piece.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// newLogger is the process logger as cfg says (STOCKHOLD_LOG_FORMAT and
// STOCKHOLD_LOG_LEVEL, both already validated by config.Load).
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	log, err := logging.New(cfg.LogFormat, cfg.LogLevel, w)
	if err != nil {
		return slog.New(logging.Handler{Handler: slog.NewJSONHandler(w, nil)})
	}
	return log
}
