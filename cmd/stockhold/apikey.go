package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/auth"
)

func apikey(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("%w: apikey takes the subcommand create", errUsage)
	}
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "the key's owner: holds and idempotency keys are scoped to it")
	role := fs.String("role", "", "shop (holds and reads) or ops (everything)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *name == "" {
		return fmt.Errorf("%w: --name is required", errUsage)
	}
	r, err := auth.ParseRole(*role)
	if err != nil {
		return fmt.Errorf("%w: --role: %v", errUsage, err)
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		token, err := auth.Create(ctx, pool, *name, r)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key %q; the token is shown only once:\n%s\n", r, *name, token)
		return nil
	})
}
