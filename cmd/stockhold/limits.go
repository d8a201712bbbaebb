package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/stock"
)

// limitsCmd shows, sets and clears the limits on a SKU's pool: per hold
// (max, min, pack size) and per customer.
func limitsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("limits", args, stdout); err != nil {
		return err
	}
	sub := args[0]
	fs := flag.NewFlagSet("limits "+sub, flag.ContinueOnError)
	var (
		l        stock.Limits
		operator string
	)
	fs.StringVar(&l.SKU, "sku", "", "the `SKU` (required)")
	fs.StringVar(&l.Pool, "pool", "", "its `pool`: main unless named, or a campaign's")
	if sub == "set" {
		count := func(name, usage string, to **int64) {
			fs.Func(name, usage, func(v string) error {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("%q is not a whole number", v)
				}
				*to = &n
				return nil
			})
		}
		count("max-per-order", "at most `N` units of the SKU in one hold", &l.MaxPerOrder)
		count("min-per-order", "at least `N` units of the SKU in a hold that has any", &l.MinPerOrder)
		count("step", "sold in multiples of `N` (a pack size)", &l.Step)
		count("max-per-customer", "at most `N` units held or bought by one customer (holds carrying a customer_ref)", &l.MaxPerCustomer)
		fs.Func("customer-window", "count a customer's holds of the last `DURATION` only (e.g. 24h; default: every hold)", func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second || d%time.Second != 0 {
				return fmt.Errorf("%q is not a duration in whole seconds, such as 24h or 90m", v)
			}
			s := int64(d / time.Second)
			l.CustomerWindowSeconds = &s
			return nil
		})
	}
	if sub == "set" {
		fs.StringVar(&operator, "operator", "", "who, for the record (required)")
	}
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case l.SKU == "":
		return fmt.Errorf("%w: limits %s needs --sku", errUsage, sub)
	case sub == "set" && operator == "":
		return fmt.Errorf("%w: limits %s needs --operator", errUsage, sub)
	}
	ctx = asDatabaseUser(ctx, getenv)
	return withServices(ctx, getenv, stderr, func(svc *app.Services) error {
		var err error
		switch sub {
		case "show":
			l, err = svc.Inventory.GetLimits(ctx, l.SKU, l.Pool)
		case "set":
			l, err = svc.Inventory.SetLimits(ctx, l, operator)
		case "clear":
			if err = svc.Inventory.DeleteLimits(ctx, l.SKU, l.Pool); err == nil {
				fmt.Fprintf(stdout, "%s (pool %s): no limits\n", l.SKU, poolOr(l.Pool))
			}
			return err
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s (pool %s): %s; set by %s at %s\n", l.SKU, l.Pool, l.Describe(), l.SetBy, l.SetAt.UTC().Format(time.RFC3339))
		return nil
	})
}

func poolOr(pool string) string {
	if pool == "" {
		return stock.MainPool
	}
	return pool
}
