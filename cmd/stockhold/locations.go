package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/idempotency"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// The commands of stock in several places: locations, transfers between them, and stock
// counts. Each goes through the inventory service, as the API does; a
// create is idempotent under a key of its own (the command is not
// retried, so a fresh one per run).

// cliKey is an idempotency key for one run of a command that creates
// something.
func cliKey(what string) idempotency.Key {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return idempotency.NewKey("cli", what+"-"+hex.EncodeToString(b))
}

// locationsCmd lists, creates and updates locations, and lists where a
// SKU can be collected.
func locationsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("locations", args, stdout); err != nil {
		return err
	}
	fs := flag.NewFlagSet("locations "+args[0], flag.ContinueOnError)
	var (
		id, name, operator, active, pickup, sku string
		priority                                int64
		lat, lon                                float64
	)
	if args[0] == "pickup" {
		fs.StringVar(&sku, "sku", "", "the `SKU` (required)")
	}
	if args[0] != "list" && args[0] != "pickup" {
		fs.StringVar(&id, "id", "", "the location's `id` (required)")
		fs.StringVar(&name, "name", "", "its `name`, for people")
		fs.Int64Var(&priority, "priority", 0, fmt.Sprintf("allocation order, from %d to %d: lower first, ties by id", -stock.MaxPriority, stock.MaxPriority))
		fs.StringVar(&operator, "operator", "", "who, for the record (required)")
		fs.Float64Var(&lat, "latitude", 0, "where it is, `degrees` north (with --longitude), for the nearest strategy")
		fs.Float64Var(&lon, "longitude", 0, "where it is, `degrees` east (with --latitude)")
		fs.StringVar(&pickup, "pickup", "", "whether shoppers may collect there, `true` or false")
	}
	if args[0] == "update" {
		fs.StringVar(&active, "active", "", "whether it takes new holds, `true` or false (an inactive location takes none; its holds finish)")
	}
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if args[0] == "pickup" && sku == "" {
		return fmt.Errorf("%w: locations pickup needs --sku", errUsage)
	}
	if args[0] != "list" && args[0] != "pickup" && (id == "" || operator == "") {
		return fmt.Errorf("%w: locations %s needs --id and --operator", errUsage, args[0])
	}
	// Checked here, before it is cut to the service's 32 bits (where
	// 4294967297 would become 1).
	if priority < -stock.MaxPriority || priority > stock.MaxPriority {
		return fmt.Errorf("%w: --priority %d: want a whole number from %d to %d", errUsage, priority, -stock.MaxPriority, stock.MaxPriority)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var where *stock.Coordinates
	switch {
	case set["latitude"] && set["longitude"]:
		where = &stock.Coordinates{Latitude: lat, Longitude: lon}
	case set["latitude"] || set["longitude"]:
		return fmt.Errorf("%w: give --latitude and --longitude together", errUsage)
	}
	if pickup != "" && pickup != "true" && pickup != "false" {
		return fmt.Errorf("%w: --pickup is true or false", errUsage)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		switch args[0] {
		case "create":
			if name == "" {
				name = id
			}
			l, _, err := svc.Inventory.CreateLocationOnce(ctx, cliKey("location"), stock.NewLocation{
				ID: id, Name: name, Priority: int32(priority), Coordinates: where, Pickup: pickup == "true", Actor: operator})
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "created location %s (%s), priority %d%s\n", l.ID, l.Name, l.Priority, placeOf(l))
		case "update":
			c := stock.LocationChange{ID: id, Coordinates: where, Actor: operator}
			if pickup != "" {
				p := pickup == "true"
				c.Pickup = &p
			}
			if set["name"] {
				c.Name = &name
			}
			if set["priority"] {
				p := int32(priority)
				c.Priority = &p
			}
			if set["active"] {
				a := active == "true"
				if active != "true" && active != "false" {
					return fmt.Errorf("%w: --active is true or false", errUsage)
				}
				c.Active = &a
			}
			l, err := svc.Inventory.UpdateLocation(ctx, c)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "location %s (%s): priority %d, active %t%s\n", l.ID, l.Name, l.Priority, l.Active, placeOf(l))
		case "list":
			return listLocations(ctx, svc.Inventory, stdout)
		case "pickup":
			return listPickup(ctx, svc.Inventory, sku, stdout)
		}
		return nil
	})
}

// listPickup lists the pickup locations where sku's main stock can be held
// now, as GET /v1/skus/{sku}/pickup answers them.
func listPickup(ctx context.Context, inv *inventory.Service, sku string, stdout io.Writer) error {
	p, err := inv.Pickup(ctx, sku)
	if err != nil {
		return err
	}
	if len(p.Locations) == 0 {
		fmt.Fprintf(stdout, "%s: no pickup location can sell it now\n", sku)
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LOCATION\tNAME\tAVAILABLE\tWHERE")
	for _, l := range p.Locations {
		where := "-"
		if l.Latitude != nil && l.Longitude != nil {
			where = fmt.Sprintf("%g,%g", *l.Latitude, *l.Longitude)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", l.Location, l.Name, l.Available, where)
	}
	return w.Flush()
}

// placeOf writes what a location's line says of it beyond its priority:
// whether shoppers may collect there and where it is, when known.
func placeOf(l stock.Location) string {
	s := ""
	if l.Pickup {
		s += ", pickup"
	}
	if l.Latitude != nil && l.Longitude != nil {
		s += fmt.Sprintf(", at %g,%g", *l.Latitude, *l.Longitude)
	}
	return s
}

func listLocations(ctx context.Context, inv *inventory.Service, stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tPRIORITY\tACTIVE\tTOTAL\tAVAILABLE\tRESERVED\tSOLD\tQC\tDAMAGED\tSAFETY\tINCOMING\tPICKUP\tWHERE")
	cursor := ""
	for {
		page, err := inv.Locations(ctx, cursor, stock.MaxLocationsPage)
		if err != nil {
			return err
		}
		for _, l := range page.Locations {
			t := l.Totals
			state := fmt.Sprint(l.Active)
			if l.StopSale != nil {
				state += " (sales stopped)"
			}
			where := "-"
			if l.Latitude != nil && l.Longitude != nil {
				where = fmt.Sprintf("%g,%g", *l.Latitude, *l.Longitude)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%t\t%s\n", l.ID, l.Name, l.Priority, state,
				t.Total, t.Available, t.Reserved, t.Sold, t.QualityControl, t.Damaged, t.SafetyStock, t.Incoming, l.Pickup, where)
		}
		if page.NextCursor == nil {
			return w.Flush()
		}
		cursor = *page.NextCursor
	}
}

// transferCmd sends, receives, closes, cancels and lists transfers.
func transferCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("transfer", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("transfer "+sub, flag.ContinueOnError)
	var (
		n        stock.NewTransfer
		step     stock.TransferStep
		quantity int64
		status   string
	)
	switch sub {
	case "create":
		fs.StringVar(&n.SKU, "sku", "", "the `SKU` to send (required)")
		fs.StringVar(&n.Pool, "pool", "", "its `pool` (default main)")
		fs.StringVar(&n.From, "from", "", "the `location` it leaves (required)")
		fs.StringVar(&n.To, "to", "", "the `location` it goes to (required)")
	case "list":
		fs.StringVar(&status, "status", "", "only transfers in this `status`: in_transit, received, closed or cancelled")
	}
	if sub == "create" || sub == "receive" {
		fs.Int64Var(&quantity, "quantity", 0, "how many units (required)")
	}
	if sub != "list" {
		fs.StringVar(&step.Actor, "operator", "", "who, for the record (required)")
		fs.StringVar(&step.Reason, "reason", "", "why, for the record (required, except for a receipt)")
	}
	rest, err := stepID(fs, "transfer", sub, args[1:], &step.ID, stdout)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if sub != "list" && step.Actor == "" {
		return fmt.Errorf("%w: transfer %s needs --operator", errUsage, sub)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var (
			t   stock.Transfer
			err error
		)
		switch sub {
		case "list":
			return listTransfers(ctx, svc.Inventory, status, stdout)
		case "create":
			n.Quantity, n.Reason, n.Actor = quantity, step.Reason, step.Actor
			t, _, err = svc.Inventory.CreateTransferOnce(ctx, cliKey("transfer"), n)
		case "receive":
			step.Quantity = quantity
			t, err = svc.Inventory.ReceiveTransfer(ctx, step)
		case "close":
			t, err = svc.Inventory.CloseTransfer(ctx, step)
		case "cancel":
			t, err = svc.Inventory.CancelTransfer(ctx, step)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "transfer %s: %d of %s (pool %s) from %s to %s, %s: %d received, %d lost, %d in transit\n%s\n",
			t.ID, t.Quantity, t.SKU, t.Pool, t.From, t.To, t.Status, t.Received, t.Lost, t.InTransit, t.ID)
		return nil
	})
}

// stepID reads the id a step (receive, close, cancel) of a transfer or an
// inbound notice (what) takes first, into id, and returns the arguments
// after it; any other subcommand takes none.
func stepID(fs *flag.FlagSet, what, sub string, rest []string, id *uuid.UUID, stdout io.Writer) ([]string, error) {
	if sub != "receive" && sub != "close" && sub != "cancel" {
		return rest, nil
	}
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		if err := parseFlags(fs, rest, stdout); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s %s takes the %s's id first", errUsage, what, sub, what)
	}
	v, err := uuid.Parse(rest[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not %s id (a UUID)", errUsage, rest[0], map[string]string{"transfer": "a transfer", "inbound": "an inbound"}[what])
	}
	*id = v
	return rest[1:], nil
}

func listTransfers(ctx context.Context, inv *inventory.Service, status string, stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSKU\tFROM\tTO\tQUANTITY\tRECEIVED\tLOST\tSTATUS\tAGE")
	f := stock.TransferFilter{Status: status, Limit: stock.MaxTransfersPage}
	for {
		page, err := inv.Transfers(ctx, f)
		if err != nil {
			return err
		}
		for _, t := range page.Transfers {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", t.ID, t.SKU, t.From, t.To, t.Quantity, t.Received, t.Lost, t.Status,
				(time.Duration(t.AgeSeconds) * time.Second).String())
		}
		if page.NextCursor == nil {
			return w.Flush()
		}
		id := uuid.MustParse(*page.NextCursor)
		f.Cursor = &id
	}
}

// countCmd previews, or with --apply records, a stock count.
func countCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("count", flag.ContinueOnError)
	var c stock.StockCount
	fs.StringVar(&c.SKU, "sku", "", "the `SKU` counted (required)")
	fs.StringVar(&c.Location, "location", "", "where (default: default)")
	fs.StringVar(&c.Pool, "pool", "", "the `pool` (default main)")
	fs.Int64Var(&c.Counted, "counted", -1, "what is on the shelf and not sold: available + reserved + quality control + damaged + safety stock (required)")
	fs.StringVar(&c.Actor, "operator", "", "who counted, for the record (required)")
	fs.StringVar(&c.Reason, "reason", "", "why, for the record (required)")
	fs.BoolVar(&c.Force, "force", false, "record a count below what holds hold (pauses the pool, alerts)")
	apply := fs.Bool("apply", false, "record the count; without it the command only shows the difference")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if c.SKU == "" || c.Counted < 0 || c.Actor == "" || c.Reason == "" {
		return fmt.Errorf("%w: count needs --sku, --counted, --operator and --reason", errUsage)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var (
			out stock.Counted
			err error
		)
		if *apply {
			out, _, err = svc.Inventory.CountOnce(ctx, cliKey("count"), c)
		} else {
			out, err = svc.Inventory.CountPreview(ctx, c)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s (pool %s) at %s: counted %d, the counters said %d: difference %+d\n",
			out.SKU, out.Pool, out.Location, out.Counted, out.OnShelf, out.Difference)
		if out.ShortOfHeld > 0 {
			fmt.Fprintf(stdout, "  %d held units are not on the shelf: %d holds at risk\n", out.ShortOfHeld, len(out.HoldsAtRisk))
		}
		if !*apply {
			fmt.Fprintln(stdout, "dry run: nothing changed (add --apply to record it)")
		} else {
			fmt.Fprintf(stdout, "recorded as count %d\n", *out.ID)
		}
		return nil
	})
}
