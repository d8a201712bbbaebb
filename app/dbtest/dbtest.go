// Package dbtest gives each test its own freshly migrated PostgreSQL
// database, cloned from a template that is migrated once per schema version,
// so tests run in parallel against the real thing without seeing each
// other's rows.
//
// DATABASE_URL names the server (`make test` starts a private one); the
// template and the test databases are created next to its database.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtypes"
	"github.com/stockhold/stockhold/app/schema"
	"github.com/stockhold/stockhold/migrations"
)

// templates are the migrated template databases, one per collation.
var (
	templatesMu sync.Mutex
	templates   = map[string]*template{}
)

type template struct {
	once sync.Once
	name string
	err  error
}

// CollationEnv names the variable that makes every test database use an
// ICU collation by default (for example STOCKHOLD_TEST_ICU_LOCALE=en-US),
// to run the whole suite once the way a database created with a non-C
// collation behaves: text sorts by language rules there, so any path that
// locks rows in the database's ORDER BY rather than byte order shows up.
const CollationEnv = "STOCKHOLD_TEST_ICU_LOCALE"

// Options adjust a test database.
type Options struct {
	// ICULocale, when set, gives the database an ICU default collation
	// for that locale (en-US, say) instead of the server's C collation.
	ICULocale string
	// Configure adjusts the pool's configuration.
	Configure func(*pgxpool.Config)
}

// serverURL is the connection string of the server tests run against.
func serverURL(t testing.TB) string {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		t.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts a private PostgreSQL")
	}
	return url
}

// New returns a pool on a new database migrated to the current schema. The
// database is dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return NewWithConfig(t, nil)
}

// NewWithConfig is New with a hook to adjust the pool's configuration.
func NewWithConfig(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	return NewWithOptions(t, &Options{Configure: configure})
}

// NewWithOptions is New with options.
func NewWithOptions(t testing.TB, opts *Options) *pgxpool.Pool {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	locale := opts.ICULocale
	if locale == "" {
		locale = os.Getenv(CollationEnv)
	}
	url := serverURL(t)
	templatesMu.Lock()
	tpl, ok := templates[locale]
	if !ok {
		tpl = &template{}
		templates[locale] = tpl
	}
	templatesMu.Unlock()
	tpl.once.Do(func() { tpl.name, tpl.err = ensureTemplate(url, locale) })
	require.NoError(t, tpl.err, "prepare the migrated template database")
	templateName := tpl.name
	configure := opts.Configure

	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(ctx)

	name := "stockhold_test_" + randomHex(6)
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName))
	require.NoError(t, err)

	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 20
	cfg.AfterConnect = dbtypes.Register // as the app's pools
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)

	t.Cleanup(func() {
		pool.Close()
		ctx := context.WithoutCancel(context.Background())
		admin, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	return pool
}

// ensureTemplate creates (once per server and schema) a database migrated to
// the current schema, named after a hash of the migration files so a changed
// migration gets a fresh template. An advisory lock serialises test binaries
// that start together.
func ensureTemplate(url, icuLocale string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", path, b)
		return nil
	})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "icu:%s", icuLocale)
	name := "stockhold_template_" + hex.EncodeToString(h.Sum(nil))[:12]

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(7446388221)"); err != nil {
		return "", err
	}
	defer admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7446388221)")

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}

	// Drop templates of older schemas (of the same collation), then build
	// this one under a temporary name so a crash midway never leaves a
	// half-migrated template.
	rows, err := admin.Query(ctx, `SELECT datname FROM pg_database
		WHERE datname LIKE 'stockhold_template_%' AND (datlocprovider = 'i') = ($1 <> '')`, icuLocale)
	if err != nil {
		return "", err
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	for _, o := range old {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+o+" WITH (FORCE)"); err != nil {
			return "", err
		}
	}
	building := "stockhold_building_" + randomHex(4)
	create := "CREATE DATABASE " + building
	if icuLocale != "" {
		create += " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE " + quoteLiteral(icuLocale)
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		return "", err
	}
	if err := migrate(ctx, url, building); err != nil {
		admin.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)")
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", err
	}
	return name, nil
}

func migrate(ctx context.Context, url, name string) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.ConnConfig.Database = name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := schema.New(pool, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}

// quoteLiteral quotes s as an SQL string literal (CREATE DATABASE takes no
// parameters).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RequireInvariants fails the test if any of the invariants
// (docs/internals/ARCHITECTURE.md) is
// broken in the database: it runs the one invariant query every test that
// changes stock shares (queries/health.sql).
func RequireInvariants(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := db.New(pool).InvariantViolations(context.Background())
	require.NoError(t, err)
	if len(rows) > 0 {
		var b strings.Builder
		for _, r := range rows {
			fmt.Fprintf(&b, "\n  %s: %s", r.Subject, r.Problem)
		}
		t.Fatalf("invariants broken:%s", b.String())
	}
}

// URL returns a connection string for pool's database, for code under test
// that connects by itself (the command line).
func URL(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	server := serverURL(t)
	name := pool.Config().ConnConfig.Database
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return server + " dbname=" + name // keyword/value form: the last dbname wins
	}
	u.Path = "/" + name
	return u.String()
}

// Count runs a query that answers one integer (a count) on pool.
func Count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
