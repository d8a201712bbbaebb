package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/stock"
)

// thresholdCmd sets and clears the low-stock threshold of a SKU's pool at
// a location, or of a bundle (on what its components make there), as
// PUT /v1/skus/{sku}/threshold does.
func thresholdCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("threshold", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("threshold "+sub, flag.ContinueOnError)
	var (
		t     stock.Threshold
		level int64 = -1
	)
	fs.StringVar(&t.SKU, "sku", "", "the `SKU`, or a bundle (required)")
	fs.StringVar(&t.Location, "location", "", "the `location` (default: the default location)")
	fs.StringVar(&t.Pool, "pool", "", "its `pool`: main unless named, or a campaign's (a bundle has main only)")
	if sub == "set" {
		fs.Int64Var(&level, "threshold", -1, "stock.low is sent when available goes from above `N` to at or below it (required)")
	}
	fs.StringVar(&t.Actor, "operator", "", "who, for the record (required)")
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case t.SKU == "":
		return fmt.Errorf("%w: threshold %s needs --sku", errUsage, sub)
	case sub == "set" && level < 0:
		return fmt.Errorf("%w: threshold set needs --threshold N, a whole number from 0", errUsage)
	case t.Actor == "":
		return fmt.Errorf("%w: threshold %s needs --operator", errUsage, sub)
	}
	if sub == "set" {
		t.Threshold = &level
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		st, err := svc.Inventory.SetThreshold(ctx, t)
		if err != nil {
			return err
		}
		printThresholds(stdout, st, t)
		return nil
	})
}

// printThresholds prints what st has at t's location and pool: a
// bundle's availability there and its threshold, or the pool's.
func printThresholds(w io.Writer, st stock.Stock, t stock.Threshold) {
	location := t.Location
	if location == "" {
		location = stock.DefaultLocation
	}
	describe := func(available int64, threshold *int64) string {
		switch {
		case threshold == nil:
			return fmt.Sprintf("available %d, no low-stock threshold", available)
		case available <= *threshold:
			return fmt.Sprintf("available %d, low-stock threshold %d: low", available, *threshold)
		}
		return fmt.Sprintf("available %d, low-stock threshold %d", available, *threshold)
	}
	if st.Bundle != nil {
		for _, a := range st.Bundle.Locations {
			if a.Location == location {
				fmt.Fprintf(w, "bundle %s at %s: %s\n", st.SKU, location, describe(a.Available, a.LowThreshold))
			}
		}
		return
	}
	for _, p := range st.Pools {
		if p.Location == location && p.Pool == poolOr(t.Pool) {
			fmt.Fprintf(w, "%s at %s (pool %s): %s\n", st.SKU, location, p.Pool, describe(p.Available, p.LowThreshold))
		}
	}
}
