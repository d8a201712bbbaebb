package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/inventory"
)

// apikey runs the apikey subcommands: create, list, revoke and rotate.
func apikey(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if err := groupHelp("apikey", args, stdout); err != nil {
		return err
	}
	fs := flag.NewFlagSet("apikey "+args[0], flag.ContinueOnError)
	var (
		name, role, locations string
		strategy              string
		grace                 time.Duration
	)
	switch args[0] {
	case "create", "revoke", "rotate":
		fs.StringVar(&name, "name", "", "the key's `name`, its owner: holds and idempotency keys are scoped to it")
	}
	if args[0] == "create" || args[0] == "rotate" {
		fs.StringVar(&role, "role", "", "the key's `role`: shop (holds and reads) or ops (everything)")
	}
	if args[0] == "create" {
		fs.StringVar(&locations, "locations", "", "a shop key's `locations`, comma-separated: its holds take stock only there (a sales channel)")
	}
	strategySet := false
	if args[0] == "create" || args[0] == "rotate" {
		fs.Func("strategy", "how its holds that name none are allocated, a `strategy`: priority (the default), most_stock or nearest (rotate: default the old key's)",
			func(v string) error { strategy, strategySet = v, true; return nil })
	}
	if args[0] == "rotate" {
		fs.Func("grace", "how long the old token keeps working, a `duration` such as 1h or 30m (default: it stops at once)", func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return errors.New("want a duration such as 1h or 30m")
			}
			grace = d
			return nil
		})
	}
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if args[0] != "list" && name == "" {
		return fmt.Errorf("%w: --name is required", errUsage)
	}
	var r auth.Role
	if role != "" || args[0] == "create" {
		var err error
		if r, err = auth.ParseRole(role); err != nil {
			return fmt.Errorf("%w: --role: %v", errUsage, err)
		}
	}
	if grace < 0 {
		return fmt.Errorf("%w: --grace must not be negative", errUsage)
	}
	if err := inventory.ValidStrategy("--strategy", inventory.Strategy(strategy)); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		switch args[0] {
		case "create":
			var bound []string
			if locations != "" {
				bound = strings.Split(locations, ",")
			}
			token, err := auth.CreateWith(ctx, pool, name, r, auth.Options{Locations: bound, Strategy: strategy})
			if errors.Is(err, auth.ErrNameTaken) {
				return fmt.Errorf("%w: rotate it (apikey rotate --name %s) or revoke it first", err, name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "created %s key %q; the token is shown only once:\n%s\n", r, name, token)
		case "list":
			return listKeys(ctx, pool, stdout)
		case "revoke":
			rev, err := auth.Revoke(ctx, pool, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "revoked %s named %q (%s) and ended their console sessions; "+
				"every instance refuses them within %s\n", plural(len(rev.IDs), "key"), name, ids(rev.IDs), auth.CacheTTL)
		case "rotate":
			var o auth.RotateOptions
			if strategySet {
				o.Strategy = &strategy
			}
			rot, err := auth.RotateWith(ctx, pool, name, r, grace, o)
			if err != nil {
				return err
			}
			switch {
			case rot.Old == nil:
				fmt.Fprintf(stdout, "no key was named %q: created a %s key;", name, rot.Role)
			case grace == 0:
				fmt.Fprintf(stdout, "rotated %s key %q: the old token (%s) stopped working;", rot.Role, name, ids(rot.Old.IDs))
			default:
				fmt.Fprintf(stdout, "rotated %s key %q: the old token (%s) works until %s;", rot.Role, name, ids(rot.Old.IDs),
					rot.Old.At.UTC().Format(time.RFC3339))
			}
			fmt.Fprintf(stdout, " the new token is shown only once:\n%s\n", rot.Token)
		}
		return nil
	})
}

// ids names keys by id: "id 3", "ids 1, 3".
func ids(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	if len(ids) == 1 {
		return "id " + s[0]
	}
	return "ids " + strings.Join(s, ", ")
}

// listKeys prints every key, revoked ones included, with the locations a
// bound key's holds are limited to, never a token.
func listKeys(ctx context.Context, pool *pgxpool.Pool, stdout io.Writer) error {
	keys, err := auth.List(ctx, pool)
	if err != nil {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tROLE\tLOCATIONS\tSTRATEGY\tCREATED\tSTATUS")
	for _, k := range keys {
		status := "in use"
		switch {
		case k.RevokedAt != nil && k.RevokedAt.After(now):
			status = "works until " + k.RevokedAt.UTC().Format(time.RFC3339) + " (rotated)"
		case k.RevokedAt != nil:
			status = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
		}
		// Where the key's new holds may take stock: any location, or the
		// ones it is bound to.
		where := "any"
		if k.Locations != nil {
			where = strings.Join(k.Locations, ",")
		}
		// How its holds that name no strategy are allocated.
		strategy := "priority"
		if k.Strategy != "" {
			strategy = k.Strategy
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Role, where, strategy, k.CreatedAt.UTC().Format(time.RFC3339), status)
	}
	return w.Flush()
}
