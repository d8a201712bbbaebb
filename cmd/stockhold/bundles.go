package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/stock"
)

// bundleCmd defines, shows and removes bundles: SKUs held as their
// components.
func bundleCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("bundle", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("bundle "+sub, flag.ContinueOnError)
	var (
		b        stock.Bundle
		operator string
	)
	if sub == "set" {
		fs.Func("component", "a component, `SKU=N` or `SKU=N:split` (N of it per bundle; split: from several locations); repeat the flag for more", func(v string) error {
			c, err := parseComponent(v)
			b.Components = append(b.Components, c)
			return err
		})
		fs.StringVar(&b.Reason, "reason", "", "why the bundle is defined so, for the record (required)")
		fs.StringVar(&operator, "operator", "", "who, for the record (required)")
	}
	rest := args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		b.SKU, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, rest, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case b.SKU == "":
		return fmt.Errorf("%w: bundle %s needs the bundle's SKU", errUsage, sub)
	case sub == "set" && operator == "":
		return fmt.Errorf("%w: bundle set needs --operator", errUsage)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var err error
		switch sub {
		case "set":
			b, err = svc.Inventory.SetBundle(ctx, b, operator)
		case "get":
			b, err = svc.Inventory.GetBundle(ctx, b.SKU)
		case "delete":
			if err := svc.Inventory.DeleteBundle(ctx, b.SKU); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "bundle %s removed\n", b.SKU)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "bundle %s version %d, set by %s: %s\n", b.SKU, b.Version, b.SetBy, b.Reason)
		for _, c := range b.Components {
			split := ""
			if c.Split {
				split = " (split)"
			}
			fmt.Fprintf(stdout, "  %d x %s%s\n", c.Quantity, c.SKU, split)
		}
		return nil
	})
}

// parseComponent reads SKU=N or SKU=N:split.
func parseComponent(v string) (stock.Component, error) {
	sku, qty, ok := strings.Cut(v, "=")
	if !ok {
		return stock.Component{}, fmt.Errorf("%q is not SKU=N or SKU=N:split", v)
	}
	qty, split, hasSplit := strings.Cut(qty, ":")
	if hasSplit && split != "split" {
		return stock.Component{}, fmt.Errorf("%q: after the quantity only :split may follow", v)
	}
	q, err := strconv.ParseInt(qty, 10, 64)
	if err != nil {
		return stock.Component{}, fmt.Errorf("%q: the quantity %q is not a whole number", v, qty)
	}
	return stock.Component{SKU: sku, Quantity: q, Split: hasSplit}, nil
}
