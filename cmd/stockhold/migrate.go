package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/schema"
)

// migrate runs migrate up, down or status.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := groupHelp("migrate", args, stdout); err != nil {
		return err
	}
	if err := noFlags("migrate "+args[0], args[1:], stdout); err != nil {
		return err
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		m, err := schema.New(pool, nil)
		if err != nil {
			return err
		}
		defer m.Close()
		switch args[0] {
		case "up":
			res, err := m.Up(ctx)
			for _, r := range res {
				fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
			}
			if err != nil {
				return err
			}
			if len(res) == 0 {
				fmt.Fprintln(stdout, "schema is current")
			}
			return nil
		case "down":
			r, err := m.Down(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "rolled back %s\n", r.Source.Path)
			return nil
		case "status":
			statuses, err := m.Status(ctx)
			if err != nil {
				return err
			}
			for _, s := range statuses {
				at := "pending"
				if !s.AppliedAt.IsZero() {
					at = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(stdout, "%-60s %s\n", s.Source.Path, at)
			}
			return nil
		}
		return fmt.Errorf("%w: migrate takes one of up, down, status, not %q", errUsage, args[0])
	})
}

// withServices runs fn with the domain services on a pool of its own (see
// app.Standalone), configured as serve would be; it logs warnings and
// errors only, unless STOCKHOLD_LOG_LEVEL says otherwise, since a person
// at a terminal reads what the command prints.
func withServices(ctx context.Context, getenv func(string) string, stderr io.Writer, fn func(*app.Services) error) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	if getenv("STOCKHOLD_LOG_LEVEL") == "" {
		cfg.LogLevel = "warn"
	}
	return withPool(ctx, getenv, func(pool *pgxpool.Pool) error {
		svc, err := app.Standalone(cfg, pool, newLogger(cfg, stderr))
		if err != nil {
			return err
		}
		return fn(svc)
	})
}

// withPool runs fn with a pool on DATABASE_URL; migrate, apikey and stock,
// which need no services, use it directly.
func withPool(ctx context.Context, getenv func(string) string, fn func(*pgxpool.Pool) error) error {
	url := getenv("DATABASE_URL")
	if url == "" {
		_, err := config.Load(getenv) // names the missing variable
		return err
	}
	pool, err := app.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(pool)
}

// asDatabaseUser returns ctx carrying the credential the command line
// acts with, "db:" and the PostgreSQL user DATABASE_URL connects as: the
// services record it beside the operator or actor an action claims, as
// they record an API key's name (see domain.WithKeyName).
func asDatabaseUser(ctx context.Context, getenv func(string) string) context.Context {
	cfg, err := pgconn.ParseConfig(getenv("DATABASE_URL"))
	if err != nil || cfg.User == "" {
		return ctx
	}
	return domain.WithKeyName(ctx, "db:"+cfg.User)
}
