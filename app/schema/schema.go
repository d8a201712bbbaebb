// Package schema applies stockhold's goose migrations (River's schema
// included) from the files embedded in the binary.
package schema

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/stockhold/stockhold/migrations"
)

// Migrator runs goose over one database. A session-level advisory lock keeps
// two instances starting at once from migrating together.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
}

// New returns a Migrator for the database pool connects to. Close it when done.
func New(pool *pgxpool.Pool, logger *slog.Logger) (*Migrator, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("goose locker: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger), goose.WithVerbose(true))
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, opts...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("goose provider: %w", err)
	}
	return &Migrator{db: db, provider: provider}, nil
}

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	return m.provider.Up(ctx)
}

// Down rolls back the most recent migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	return m.provider.Down(ctx)
}

// Status lists every migration with whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	return m.provider.Status(ctx)
}

// Versions returns the database's current version and the newest version
// the binary carries; they are equal when the schema is current.
func (m *Migrator) Versions(ctx context.Context) (current, latest int64, err error) {
	return m.provider.GetVersions(ctx)
}
