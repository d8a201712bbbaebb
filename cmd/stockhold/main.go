// Command stockhold is the inventory reservation service: its HTTP API and
// job workers (serve), its migrations, and the operator commands.
//
//	stockhold serve                      HTTP API + job workers
//	stockhold migrate up|down|status     goose migrations, River's included
//	stockhold apikey create --name N --role shop|ops [--locations L1,L2]
//	stockhold apikey list | revoke --name N | rotate --name N [--role R] [--grace D]
//	stockhold rollback --operator O --reason R (--reservation ID ... | --campaign C | --sku S [--pool P]) [--dry-run]
//	stockhold rollback resume ID [--operator O]
//	stockhold reconcile [--sku S]... [--incremental | --deep]  check the books now; exit 1 on high risk
//	stockhold stock import FILE.csv      apply sku,pool,delta or sku,pool,set_total rows, resumable
//	stockhold stock export [--out FILE]  every stock row as CSV
//	stockhold locations list|create|update|pickup     where stock is, and where a SKU can be collected
//	stockhold transfer create|receive|close|cancel|list  stock between locations
//	stockhold inbound create|receive|close|cancel|list   stock expected from suppliers
//	stockhold limits show|set|clear                      limits per hold and per customer on a SKU's pool
//	stockhold bundle set|get|delete SKU                  a SKU held as its components
//	stockhold count --sku S --counted N ... [--apply]  a stock count
//	stockhold ledger partitions|archive|restore      the ledger's months, archived to files
//	stockhold webhook-listen --secret S  a webhook receiver that verifies signatures
//	stockhold config                     every setting: value, default, meaning
//	stockhold version                    release version, VCS revision, Go version
//
// Every command takes --help. Configuration comes from the environment
// (stockhold config lists it).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	// The time zone database, for the daily report's business days on a
	// host without one (a minimal container); about 450 kB.
	_ "time/tzdata"

	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/logging"
)

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
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if wantsHelp(args) {
		if len(args) == 1 || wantsHelp(args[1:]) {
			// help, help --help, --help -h: the commands.
			fmt.Fprint(stdout, usage)
			return 0
		}
		// help CMD [SUB] is CMD [SUB] --help.
		args = append(append([]string(nil), args[1:]...), "--help")
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		err = migrate(ctx, args[1:], getenv, stdout, stderr)
	case "apikey":
		err = apikey(ctx, args[1:], getenv, stdout)
	case "rollback":
		err = rollback(ctx, args[1:], getenv, stdout, stderr)
	case "reconcile":
		err = reconcileCmd(ctx, args[1:], getenv, stdout, stderr)
	case "stop-sale":
		err = stopSale(ctx, args[1:], getenv, stdout, stderr)
	case "repair":
		err = repair(ctx, args[1:], getenv, stdout, stderr)
	case "report":
		err = report(ctx, args[1:], getenv, stdout, stderr)
	case "stock":
		err = stockCommand(ctx, args[1:], getenv, stdout, stderr)
	case "locations":
		err = locationsCmd(ctx, args[1:], getenv, stdout, stderr)
	case "transfer":
		err = transferCmd(ctx, args[1:], getenv, stdout, stderr)
	case "inbound":
		err = inboundCmd(ctx, args[1:], getenv, stdout, stderr)
	case "limits":
		err = limitsCmd(ctx, args[1:], getenv, stdout, stderr)
	case "bundle":
		err = bundleCmd(ctx, args[1:], getenv, stdout, stderr)
	case "threshold":
		err = thresholdCmd(ctx, args[1:], getenv, stdout, stderr)
	case "backorders":
		err = backordersCmd(ctx, args[1:], getenv, stdout, stderr)
	case "count":
		err = countCmd(ctx, args[1:], getenv, stdout, stderr)
	case "ledger":
		err = ledgerCmd(ctx, args[1:], getenv, stdout, stderr)
	case "webhook-listen":
		err = webhookListen(ctx, args[1:], stdout, stderr)
	case "config":
		err = configCmd(args[1:], getenv, envNames(), stdout)
	case "version":
		err = version(args[1:], stdout)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	var exit exitError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &exit):
		return int(exit)
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "stockhold: %s\n", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		if name := commandName(args); name != "" {
			fmt.Fprintf(stderr, "Run 'stockhold %s --help' for its usage.\n", name)
		} else {
			fmt.Fprintf(stderr, "Run 'stockhold help' for the commands.\n")
		}
		return 2
	}
	fmt.Fprintf(stderr, "stockhold: %v\n", err)
	return 1
}

// commandName is the command (and subcommand) args name, as helps knows
// it, or "" for none.
func commandName(args []string) string {
	if len(args) > 1 {
		if _, ok := helps[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1]
		}
	}
	if _, ok := helps[args[0]]; ok {
		return args[0]
	}
	return ""
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
