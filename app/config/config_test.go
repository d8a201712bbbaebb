package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x"}))
	require.NoError(t, err)
	require.Equal(t, ":8080", c.Addr)
	require.True(t, c.Coalesce)
	require.Equal(t, 100*time.Millisecond, c.RollbackPause)
	require.Empty(t, c.AlertWebhook)
	require.Equal(t, "json", c.LogFormat)
	require.Equal(t, 250*time.Millisecond, c.LockTimeout)
	require.Equal(t, 128, c.BatchSize)
	require.GreaterOrEqual(t, c.BatchFlights, 2)
	require.Empty(t, c.PprofAddr, "the profiler is off unless asked for")
}

func TestErrorsNameTheVariable(t *testing.T) {
	for name, value := range map[string]string{
		"STOCKHOLD_ALERT_WEBHOOK":   "ftp://x",
		"STOCKHOLD_WORKERS":         "0",
		"STOCKHOLD_ROLLBACK_PAUSE":  "soon",
		"STOCKHOLD_COALESCE":        "maybe",
		"STOCKHOLD_LOG_LEVEL":       "loud",
		"STOCKHOLD_LOG_FORMAT":      "xml",
		"STOCKHOLD_DB_LOCK_TIMEOUT": "0s",
		"STOCKHOLD_EXPIRY_TICK":     "-1s",
		"STOCKHOLD_BATCH_SIZE":      "0",
		"STOCKHOLD_BATCH_FLIGHTS":   "1000",
		"STOCKHOLD_PPROF_ADDR":      "6060",
	} {
		_, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x", name: value}))
		require.ErrorContains(t, err, name)
	}
	_, err := Load(env(nil))
	require.ErrorContains(t, err, "DATABASE_URL")
}

func TestRetention(t *testing.T) {
	c, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x"}))
	require.NoError(t, err)
	require.Equal(t, 30*24*time.Hour, c.Retention, "30 days by default")
	for value, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "1h": time.Hour, "0": 0, "0d": 0} {
		c, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x", "STOCKHOLD_RETENTION": value}))
		require.NoError(t, err, value)
		require.Equal(t, want, c.Retention, value)
	}
	for _, value := range []string{"59m", "-1d", "1.5d", "d", "30 days", "200000d"} {
		_, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x", "STOCKHOLD_RETENTION": value}))
		require.ErrorContains(t, err, "STOCKHOLD_RETENTION", value)
	}
}

// TestSettingsAreWhatLoadReads holds the registry and Load to each other:
// every variable Load reads is in Settings and every setting but Go's own
// is read, and each default, set explicitly, gives what unset gives.
func TestSettingsAreWhatLoadReads(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://x"}
	var read []string
	_, err := Load(func(k string) string { read = append(read, k); return base[k] })
	require.NoError(t, err)
	var names []string
	for _, s := range Settings {
		names = append(names, s.Name)
	}
	require.ElementsMatch(t, append(read, "GOGC", "GOMEMLIMIT"), names, "Settings must list exactly what Load reads")

	want, err := Load(env(base))
	require.NoError(t, err)
	for _, s := range Settings {
		if s.Default == "" {
			continue
		}
		m := map[string]string{"DATABASE_URL": "postgres://x", s.Name: s.Default}
		got, err := Load(env(m))
		require.NoError(t, err, s.Name)
		require.Equal(t, want, got, "%s=%s must be what unset gives", s.Name, s.Default)
	}
}

func TestMask(t *testing.T) {
	db, hook := Lookup("DATABASE_URL"), Lookup("STOCKHOLD_ALERT_WEBHOOK")
	require.Equal(t, "postgres://app:*****@db:5432/stock?sslmode=verify-full", db.Mask("postgres://app:s3cret@db:5432/stock?sslmode=verify-full"))
	require.Equal(t, "postgres://app@db/stock?sslmode=disable&password=*****", db.Mask("postgres://app@db/stock?sslmode=disable&password=s3cret"))
	require.Equal(t, "host=db user=app password=***** dbname=stock", db.Mask("host=db user=app password=s3cret dbname=stock"))
	require.Equal(t, "postgres://postgres@/stockhold?host=/tmp", db.Mask("postgres://postgres@/stockhold?host=/tmp"))
	require.Equal(t, "https://hooks.example.com/*****", hook.Mask("https://hooks.example.com/T000/B000/XXXX"))
	require.Equal(t, ":8080", Lookup("STOCKHOLD_ADDR").Mask(":8080"))
}

func TestErrorsNameEveryVariable(t *testing.T) {
	_, err := Load(env(map[string]string{"DATABASE_URL": "postgres://x", "STOCKHOLD_WORKERS": "0", "STOCKHOLD_LOG_LEVEL": "loud"}))
	require.ErrorContains(t, err, "STOCKHOLD_WORKERS")
	require.ErrorContains(t, err, "STOCKHOLD_LOG_LEVEL")
}
