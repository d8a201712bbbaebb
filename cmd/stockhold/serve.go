package main

import (
	"context"
	"io"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/config"
)

func serve(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	pool, err := app.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	a, err := app.New(cfg, pool, log)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx)
}
