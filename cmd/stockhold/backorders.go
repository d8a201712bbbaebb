package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/stock"
)

// backordersCmd shows, sets and clears a SKU's pool's backorder policy.
func backordersCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("backorders", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("backorders "+sub, flag.ContinueOnError)
	var (
		b        stock.Backorders
		horizon  int
		operator string
	)
	fs.StringVar(&b.SKU, "sku", "", "the `SKU` (required)")
	fs.StringVar(&b.Pool, "pool", "", "the `pool` (default main)")
	if sub == "set" {
		fs.Int64Var(&b.BelowZero, "below-zero", 0, "how many units each location may promise whatever is on its way")
		fs.IntVar(&horizon, "horizon-days", -1, "also promise what is on its way within this many `days` (transfers in transit, inbound lines expected by then; default: none of it)")
		fs.StringVar(&operator, "operator", "", "who, for the record (required)")
	}
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case sub != "set" && sub != "show" && sub != "clear":
		return fmt.Errorf("%w: unknown backorders command %q", errUsage, sub)
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case b.SKU == "":
		return fmt.Errorf("%w: backorders %s needs --sku", errUsage, sub)
	case sub == "set" && operator == "":
		return fmt.Errorf("%w: backorders set needs --operator", errUsage)
	}
	if horizon >= 0 {
		h := int32(min(horizon, stock.MaxBackorderHorizonDays+1))
		b.HorizonDays = &h
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var err error
		switch sub {
		case "set":
			b, err = svc.Inventory.SetBackorders(ctx, b, operator)
		case "show":
			b, err = svc.Inventory.GetBackorders(ctx, b.SKU, b.Pool)
		case "clear":
			if err = svc.Inventory.DeleteBackorders(ctx, b.SKU, b.Pool); err == nil {
				fmt.Fprintf(stdout, "%s (pool %s): no backorder policy; holds take what is on hand\n", b.SKU, orMain(b.Pool))
			}
			return err
		}
		if err != nil {
			return err
		}
		horizonText := "nothing on its way"
		if b.HorizonDays != nil {
			horizonText = fmt.Sprintf("what is on its way within %d days", *b.HorizonDays)
		}
		fmt.Fprintf(stdout, "%s (pool %s): promise %d below zero and %s (set by %s)\n", b.SKU, b.Pool, b.BelowZero, horizonText, b.SetBy)
		for _, r := range b.Rows {
			fmt.Fprintf(stdout, "  %s: %d promised of %d allowed\n", r.Location, r.Backordered, r.Allowed)
		}
		return nil
	})
}

func orMain(pool string) string {
	if pool == "" {
		return stock.MainPool
	}
	return pool
}
