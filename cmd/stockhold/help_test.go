package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/buildinfo"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/stockcsv"
)

// cli runs stockhold with no environment at all (no DATABASE_URL), so a
// command that reached for the database would fail.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code = run(ctx, args, func(string) string { return "" }, &out, &errs)
	return code, out.String(), errs.String()
}

// TestHelp asks every command and subcommand for its help, three ways
// (CMD --help, CMD -h, help CMD): each prints its usage, its flags and an
// example on stdout, exits 0, and needs no database.
func TestHelp(t *testing.T) {
	t.Parallel()
	for name, h := range helps {
		args := strings.Fields(name)
		code, out, errs := cli(append(args, "--help")...)
		require.Equal(t, 0, code, "%s --help: stderr %s", name, errs)
		require.Empty(t, errs, name)
		require.True(t, strings.HasPrefix(out, "usage: stockhold "+h.synopsis+"\n"), "%s --help:\n%s", name, out)
		require.Contains(t, out, "\nexample:\n  ", name)
		for _, line := range strings.Split(h.example, "\n") {
			require.Contains(t, line, "stockhold "+args[0], "%s: every example line runs the command", name)
		}
		for _, sub := range h.group {
			require.Contains(t, helps, name+" "+sub, "%s's subcommand %s has help", name, sub)
			require.Contains(t, out, "\n  "+sub+" ", name)
		}
		for _, alt := range [][]string{append(args, "-h"), append([]string{"help"}, args...)} {
			code, again, _ := cli(alt...)
			require.Equal(t, 0, code, "%v", alt)
			require.Equal(t, out, again, "%v prints what --help does", alt)
		}
	}
	// A flag's text does not repeat its placeholder ("--to ledger   ledger
	// (set the ...)": the placeholder is the word in backquotes).
	flagLine := regexp.MustCompile(`(?m)^  --[a-z-]+ (\S+) +(\S+)`)
	for name := range helps {
		_, out, _ := cli(append(strings.Fields(name), "--help")...)
		for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
			require.NotEqual(t, m[1], m[2], "%s --help: a flag's text starts with its placeholder:\n%s", name, m[0])
		}
	}
	// The flags come from each command's own flag set.
	for name, flags := range map[string][]string{
		"rollback":        {"--operator string", "--reason string", "--reservation id", "--campaign campaign", "--sku SKU", "--pool pool", "--held-before time", "--dry-run"},
		"rollback resume": {"--operator"},
		"apikey create":   {"--name name", "--role role"},
		"apikey rotate":   {"--name name", "--role role", "--grace duration"},
		"apikey revoke":   {"--name name"},
		"reconcile":       {"--sku SKU", "--incremental", "--deep"},
		"repair":          {"--to side"},
		"config":          {"--env-file file"},
		"stock import":    {"--actor string", "--reason string"},
		"stock export":    {"--out file"},
		"webhook-listen":  {"--addr host:port", "--secret secret", "--count events"},
	} {
		_, out, _ := cli(append(strings.Fields(name), "--help")...)
		for _, f := range flags {
			require.Contains(t, out, "\n  "+f+" ", "%s --help lists %s:\n%s", name, f, out)
		}
	}

	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"help", "--help"}, {"help", "-h"}, {"--help", "help"}} {
		code, out, errs := cli(args...)
		require.Equal(t, 0, code, "%v", args)
		require.Empty(t, errs)
		require.Equal(t, usage, out)
	}
	for name := range helps {
		if !strings.Contains(name, " ") {
			require.Contains(t, usage, "\n  "+name, "the top-level usage lists %s", name)
		}
	}
	code, _, errs := cli()
	require.Equal(t, 2, code, "no command is a usage error")
	require.Equal(t, usage, errs)
}

// TestStockHelpNamesTheExportsHeader: stock export's help gives the header
// it writes, and stock import's the headers it reads, an export's among
// them (it said the header starts sku,pool, which an export's does not),
// and what it does with the rows of pools of units.
func TestStockHelpNamesTheExportsHeader(t *testing.T) {
	t.Parallel()
	_, export, _ := cli("stock", "export", "--help")
	require.Contains(t, strings.ReplaceAll(export, "\n", " "), strings.Join(stockcsv.ExportHeader, ","))
	_, imp, _ := cli("stock", "import", "--help")
	imp = strings.ReplaceAll(imp, "\n", " ")
	require.Contains(t, imp, "sku,location,pool,set_total")
	require.Contains(t, imp, "serialized true")
}

// TestUsageErrorsNameFlags checks what a mistyped command line is told:
// the flag at fault by its name, the forms a value may take, and the
// command whose --help to read; exit 2, before any database is needed.
func TestUsageErrorsNameFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"rollback", "--operator", "a", "--reason", "b"}, []string{"exactly one scope: --reservation ID", "stockhold rollback --help"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--sku", "A1", "--campaign", "c"}, []string{"exactly one scope"}},
		{[]string{"rollback", "--sku", "A1"}, []string{"--operator and --reason are required"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--pool", "main", "--campaign", "c"}, []string{"--pool and --held-before go with --sku"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--sku", "A1", "--held-before", "tomorrow"},
			[]string{`--held-before "tomorrow": want an RFC 3339 time`, "a date", "a duration before now"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--sku", "A1", "--held-before", "2999-01-01"}, []string{"later than now"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--reservation", "x"}, []string{"--reservation: not a hold id"}},
		{[]string{"rollback", "--operator", "a", "--reason", "b", "--sku", "a/b"}, []string{"--sku", "slash"}},
		{[]string{"rollback", "--bogus"}, []string{"flag provided but not defined: --bogus"}},
		{[]string{"rollback", "--oprator", "alice"}, []string{"flag provided but not defined: --oprator (did you mean --operator?)"}},
		{[]string{"rollback", "--reaosn", "x"}, []string{"(did you mean --reason?)"}},
		{[]string{"stock", "import", "--acotr", "bob", "f.csv"}, []string{"(did you mean --actor?)"}},
		{[]string{"rollback", "resume"}, []string{"rollback resume needs the request's id", "stockhold rollback resume --help"}},
		{[]string{"apikey"}, []string{"apikey takes a subcommand: create, list, revoke, rotate"}},
		{[]string{"apikey", "frob"}, []string{`unknown apikey subcommand "frob"`, "stockhold apikey --help"}},
		{[]string{"apikey", "create", "--role", "shop"}, []string{"--name is required", "stockhold apikey create --help"}},
		{[]string{"apikey", "create", "--name", "x", "--role", "boss"}, []string{"--role"}},
		{[]string{"apikey", "rotate", "--name", "x", "--grace", "soon"}, []string{"--grace: want a duration such as 1h"}},
		{[]string{"reconcile", "--sku", "a/b"}, []string{"--sku", "slash"}},
		{[]string{"stock", "export", "--out", "/nonexistent/x.csv"}, []string{"--out /nonexistent/x.csv: no directory /nonexistent"}},
		{[]string{"stock", "import"}, []string{"stock import FILE.csv"}},
		{[]string{"migrate", "sideways"}, []string{`unknown migrate subcommand "sideways"`}},
		{[]string{"serve", "now"}, []string{"serve takes no arguments", "stockhold serve --help"}},
		{[]string{"webhook-listen"}, []string{"--secret is required"}},
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "stockhold help"}},
	} {
		code, out, errs := cli(tc.args...)
		require.Equal(t, 2, code, "%v: stdout %s stderr %s", tc.args, out, errs)
		for _, w := range tc.want {
			require.Contains(t, errs, w, "%v", tc.args)
		}
		require.NotContains(t, errs, "DATABASE_URL", "%v is refused before the database is needed", tc.args)
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Time{
		"2026-11-30T08:15:00Z":        time.Date(2026, 11, 30, 8, 15, 0, 0, time.UTC),
		"2026-11-30T08:15:00.5+01:00": time.Date(2026, 11, 30, 7, 15, 0, 5e8, time.UTC),
		"2026-11-30":                  time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"90m":                         now.Add(-90 * time.Minute),
		"0s":                          now,
	} {
		got, err := parseTime("held-before", v, now)
		require.NoError(t, err, v)
		require.True(t, want.Equal(got), "%s: got %s, want %s", v, got, want)
	}
	for _, v := range []string{"tomorrow", "-1h", "2026-13-01", "30/11/2026", ""} {
		_, err := parseTime("held-before", v, now)
		require.ErrorContains(t, err, `--held-before "`+v+`": want`, v)
	}
}

// TestVersion prints the release version first (buildinfo.Version, which
// TestChangelog holds to CHANGELOG.md), then what the build information
// says, and the Go version this test binary was built with.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := cli("version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "stockhold "+buildinfo.Version+"\n"), out)
	require.Regexp(t, `^\d+\.\d+\.\d+$`, buildinfo.Version)
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	require.Contains(t, out, "module "+info.Main.Path+" "+info.Main.Version+"\n")
	require.Contains(t, out, "built with "+info.GoVersion+" for ")
	require.Contains(t, out, "revision ")
}

// TestConfigCommand prints every setting of the registry with its value,
// marks defaults, masks secrets, and exits 1 naming an invalid value.
func TestConfigCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"DATABASE_URL":            "postgres://app:s3cret@db.internal/stock",
		"STOCKHOLD_WORKERS":       "40",
		"STOCKHOLD_ALERT_WEBHOOK": "https://hooks.example.com/services/T0/B0/token",
	}
	var out, errs bytes.Buffer
	code := run(context.Background(), []string{"config"}, func(k string) string { return env[k] }, &out, &errs)
	require.Equal(t, 0, code, errs.String())
	text := out.String()
	for _, s := range config.Settings {
		require.Contains(t, "\n"+text, "\n"+s.Name+"=", s.Name)
	}
	require.Contains(t, text, "STOCKHOLD_WORKERS=40\n")
	require.Contains(t, text, "STOCKHOLD_ADDR=:8080 (default)\n    HTTP listen address (default: :8080)\n")
	require.Contains(t, text, "DATABASE_URL=postgres://app:*****@db.internal/stock\n")
	require.Contains(t, text, "STOCKHOLD_ALERT_WEBHOOK=https://hooks.example.com/*****\n")
	require.NotContains(t, text, "s3cret")
	require.NotContains(t, text, "token")

	env["STOCKHOLD_RETENTION"] = "soon"
	out.Reset()
	code = run(context.Background(), []string{"config"}, func(k string) string { return env[k] }, &out, &errs)
	require.Equal(t, 1, code)
	require.Contains(t, out.String(), "STOCKHOLD_RETENTION=soon\n")
	require.Contains(t, out.String(), "\ninvalid:\nSTOCKHOLD_RETENTION=\"soon\"")
}

// TestConsoleSignInCommand runs the command the console's sign-in page
// tells an operator to run: its flags must be valid (it gets as far as
// needing the database).
func TestConsoleSignInCommand(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../app/console/templates/signin.html")
	require.NoError(t, err)
	m := regexp.MustCompile(`<code>stockhold ([^<]+)</code>`).FindSubmatch(page)
	require.NotNil(t, m, "the sign-in page names a stockhold command")
	args := strings.Fields(strings.ReplaceAll(string(m[1]), "YOUR-NAME", "alice"))
	code, _, errs := cli(args...)
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "DATABASE_URL is not set", "the command's flags are valid: %s", errs)
}

// TestConfigCommandFindsWhatItIgnores: a misspelt setting is listed with
// the one it likely means; --env-file reads a file as systemd does (an &
// in a quoted URL kept) and lists what it read, masked.
func TestConfigCommandFindsWhatItIgnores(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://db/stock", "STOCKHOLD_ADRR": ":9090", "STOCKHOLD_WORKERS": "40", "STOCKHOLD_EMPTY_ONE": ""}
	var out bytes.Buffer
	err := configCmd(nil, func(k string) string { return env[k] }, []string{"HOME", "STOCKHOLD_ADRR", "STOCKHOLD_WORKERS", "STOCKHOLD_EMPTY_ONE"}, &out)
	require.NoError(t, err, "unknown settings are ignored, not invalid")
	require.Contains(t, out.String(), "\nunknown, ignored:\nSTOCKHOLD_ADRR is not a setting: did you mean STOCKHOLD_ADDR?\n")
	require.Contains(t, out.String(), "STOCKHOLD_ADDR=:8080 (default)\n", "the misspelt one changed nothing")
	require.NotContains(t, out.String(), "STOCKHOLD_EMPTY_ONE", "set empty is unset")

	file := filepath.Join(t.TempDir(), "stockhold.env")
	require.NoError(t, os.WriteFile(file, []byte("# settings\nDATABASE_URL='postgres://app:s3cret@db/stock?sslmode=require&application_name=x'\n"+
		"STOCKHOLD_WORKERS=7\nSTOCKHOLD_WORKRES=8\nexport STOCKHOLD_ADDR=:1\n"), 0o600))
	out.Reset()
	// The process's own environment is not what systemd gives the service:
	// with --env-file only the file counts.
	err = configCmd([]string{"--env-file", file}, func(k string) string { return env[k] }, []string{"STOCKHOLD_ADRR"}, &out)
	require.NoError(t, err)
	text := out.String()
	require.Contains(t, text, file+": 3 variables, as systemd's EnvironmentFile= reads them:\n"+
		"  line 2: DATABASE_URL=postgres://app:*****@db/stock?sslmode=require&application_name=x\n"+
		"  line 3: STOCKHOLD_WORKERS=7\n  line 4: STOCKHOLD_WORKRES=8\n"+
		`  line 5: "export STOCKHOLD_ADDR" is not a variable name, ignored`+"\n")
	require.Contains(t, text, "\nSTOCKHOLD_WORKERS=7\n")
	require.Contains(t, text, "STOCKHOLD_WORKRES is not a setting: did you mean STOCKHOLD_WORKERS?")
	require.NotContains(t, text, "STOCKHOLD_ADRR")
	require.NotContains(t, text, "s3cret")

	var errs bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"config", "--env-file", filepath.Join(t.TempDir(), "none")},
		func(string) string { return "" }, &out, &errs))
	require.Contains(t, errs.String(), "no such file")
}
