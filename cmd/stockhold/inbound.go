package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/stock"
)

// inboundCmd records, receives, closes, cancels and lists supplier
// inbound notices.
func inboundCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("inbound", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("inbound "+sub, flag.ContinueOnError)
	var (
		n      stock.NewInbound
		step   stock.InboundStep
		status string
	)
	switch sub {
	case "create":
		fs.StringVar(&n.SupplierRef, "supplier-ref", "", "the supplier's `reference` (a purchase order, a shipment notice; required)")
		fs.StringVar(&n.Location, "location", "", "the `location` it arrives at (default: default)")
		fs.StringVar(&n.ExpectedOn, "expected", "", "the `day` it is expected, YYYY-MM-DD, today or later (required)")
		fs.Func("line", "a line, `SKU[:POOL]=N` (repeat the flag for more; the pool is main unless named)", func(v string) error {
			l, err := parseInboundLine(v)
			n.Lines = append(n.Lines, l)
			return err
		})
	case "receive":
		fs.StringVar(&step.SKU, "sku", "", "the `SKU` of the line that arrived (required)")
		fs.StringVar(&step.Pool, "pool", "", "the line's `pool` (default main)")
		fs.Int64Var(&step.Quantity, "quantity", 0, "how many units arrived (required)")
	case "list":
		fs.StringVar(&status, "status", "", "only notices in this `status`: open, received, closed or cancelled")
	}
	if sub != "list" {
		fs.StringVar(&step.Actor, "operator", "", "who, for the record (required)")
		fs.StringVar(&step.Reason, "reason", "", "why, for the record (required to close or cancel)")
	}
	rest, err := stepID(fs, "inbound", sub, args[1:], &step.ID, stdout)
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
		return fmt.Errorf("%w: inbound %s needs --operator", errUsage, sub)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var (
			i   stock.Inbound
			err error
		)
		switch sub {
		case "list":
			return listInbound(ctx, svc.Inventory, status, stdout)
		case "create":
			n.Reason, n.Actor = step.Reason, step.Actor
			i, _, err = svc.Inventory.CreateInboundOnce(ctx, cliKey("inbound"), n)
		case "receive":
			i, err = svc.Inventory.ReceiveInbound(ctx, step)
		case "close":
			i, err = svc.Inventory.CloseInbound(ctx, step)
		case "cancel":
			i, err = svc.Inventory.CancelInbound(ctx, step)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "inbound %s from %s at %s, expected %s, %s%s\n", i.ID, i.SupplierRef, i.Location, i.ExpectedOn, i.Status, lateMark(i))
		for _, l := range i.Lines {
			fmt.Fprintf(stdout, "  %s (pool %s): %d ordered, %d received, %d short, %d expected\n", l.SKU, l.Pool, l.Quantity, l.Received, l.Short, l.Outstanding)
		}
		fmt.Fprintln(stdout, i.ID)
		return nil
	})
}

// parseInboundLine reads SKU[:POOL]=N.
func parseInboundLine(v string) (stock.NewInboundLine, error) {
	what, qty, ok := strings.Cut(v, "=")
	if !ok {
		return stock.NewInboundLine{}, fmt.Errorf("%q is not SKU[:POOL]=N", v)
	}
	q, err := strconv.ParseInt(qty, 10, 64)
	if err != nil {
		return stock.NewInboundLine{}, fmt.Errorf("%q: the quantity %q is not a whole number", v, qty)
	}
	sku, pool, _ := strings.Cut(what, ":")
	return stock.NewInboundLine{SKU: sku, Pool: pool, Quantity: q}, nil
}

func lateMark(i stock.Inbound) string {
	if i.Late {
		return " (late)"
	}
	return ""
}

func listInbound(ctx context.Context, inv *inventory.Service, status string, stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSUPPLIER\tLOCATION\tEXPECTED\tSTATUS\tLINES\tORDERED\tRECEIVED\tEXPECTED UNITS")
	f := stock.InboundFilter{Status: status, Limit: stock.MaxInboundPage}
	for {
		page, err := inv.ListInbound(ctx, f)
		if err != nil {
			return err
		}
		for _, i := range page.Inbound {
			var ordered, received, outstanding int64
			for _, l := range i.Lines {
				ordered, received, outstanding = ordered+l.Quantity, received+l.Received, outstanding+l.Outstanding
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s%s\t%d\t%d\t%d\t%d\n", i.ID, i.SupplierRef, i.Location, i.ExpectedOn, i.Status, lateMark(i),
				len(i.Lines), ordered, received, outstanding)
		}
		if page.NextCursor == nil {
			return w.Flush()
		}
		id := uuid.MustParse(*page.NextCursor)
		f.Cursor = &id
	}
}
