package config

import (
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Setting is one environment variable stockhold reads: the one place its
// default and meaning are written. Load reads its default from here,
// `stockhold config` prints it, and the settings table of docs/configuration.md and
// deploy/stockhold.env are generated from it (tests keep them current).
type Setting struct {
	// Name is the variable.
	Name string
	// Default is the value used when the variable is unset or empty,
	// written as it would be set; empty for none.
	Default string
	// DefaultText, when set, describes the default for people instead of
	// Default (a computed default, or what "none" means).
	DefaultText string
	// Meaning is one line saying what it does.
	Meaning string
	// Secret settings are printed masked (see Mask).
	Secret bool
	// Computed, when set, gives the default at run time (Default is then
	// empty and DefaultText says how it is chosen).
	Computed func() string
}

// Settings is every variable stockhold reads, in the order the docs list
// them. GOGC and GOMEMLIMIT are Go's own, read by `serve` alone.
var Settings = []Setting{
	{Name: "DATABASE_URL", DefaultText: "none (`make run`, `make test`: the private dev cluster)", Secret: true,
		Meaning: "PostgreSQL connection string (required by every command that touches the database); `serve` opens two pools on it, and its `pool_max_conns` sizes River's"},
	{Name: "STOCKHOLD_ADDR", Default: ":8080", Meaning: "HTTP listen address"},
	{Name: "STOCKHOLD_ALERT_WEBHOOK", DefaultText: "none", Secret: true,
		Meaning: `http(s) URL that receives every new alert as a JSON POST {"service": "stockhold", "alert": {...}}; unset, alerts are only stored`},
	{Name: "STOCKHOLD_COALESCE", Default: "true",
		Meaning: "group-commit holds, confirms and releases (`false`: each still goes through the batch path, one per transaction)"},
	{Name: "STOCKHOLD_BATCH_SIZE", Default: "128", Meaning: "most requests one batch transaction carries"},
	{Name: "STOCKHOLD_BATCH_FLIGHTS", DefaultText: "number of CPUs, at least 2",
		Computed: func() string { return strconv.Itoa(max(2, runtime.NumCPU())) },
		Meaning:  "most hold batches, and most confirm/release batches, running at once, each on its own connection"},
	{Name: "STOCKHOLD_EXPIRY_TICK", Default: "200ms", Meaning: "longest pause of the expiry loop between passes: holds expire at most about this late"},
	{Name: "STOCKHOLD_SOLDOUT_RECHECK", Default: "250ms",
		Meaning: "a hold refused because nothing is left is refused again from memory, without a hold batch (its Idempotency-Key looked up first, so a retry of a hold granted anywhere gets its first answer), on the strength of a read at most this old: stock added on another instance is holdable here at most this long after its commit (`0s`: off)"},
	{Name: "STOCKHOLD_ALLOCATION_MEMORY", Default: "1s",
		Meaning: "a line that names no location, on a pool stocked at several locations, locks only the location its strategy picks on the figures the last hold batch read of them all, when that read is at most this old and this instance wrote nothing since that may have put stock back: the location picked is checked under its lock, and a line it does not fit goes again locking every location; stock moved elsewhere by another instance may go unseen by the choice this long (`0s`: every such line locks every location)"},
	{Name: "STOCKHOLD_STRATEGY", Default: "priority",
		Meaning: "how a hold allocates its lines that name no location when neither the hold nor its key names a strategy: `priority`, `most_stock` or `nearest` (to the hold's `ship_to`; by priority without one)"},
	{Name: "STOCKHOLD_WORKERS", Default: "20",
		Meaning: "River jobs of the `default` queue (manual rollbacks, alerts) this process works at once; the other queues have their own workers"},
	{Name: "STOCKHOLD_SWEEP_INTERVAL", Default: "30s", Meaning: "how often the expiry sweeper runs"},
	{Name: "STOCKHOLD_SWEEP_GRACE", Default: "1m",
		Meaning: "how far past expiry a hold must be before the sweeper, rather than the expiry loop, releases it"},
	{Name: "STOCKHOLD_RECONCILE_INTERVAL", Default: "5m",
		Meaning: "how often reconciliation runs: incremental runs (the stock rows whose ledger moved since the last clean run), and a full one when STOCKHOLD_RECONCILE_FULL_INTERVAL has passed"},
	{Name: "STOCKHOLD_RECONCILE_FULL_INTERVAL", Default: "1h",
		Meaning: "how often a periodic reconciliation checks every stock row (read from reconcile_runs, so restarts do not reset it); 0 makes every run full"},
	{Name: "STOCKHOLD_RECONCILE_DEEP_INTERVAL", Default: "24h",
		Meaning: "how often a periodic reconciliation is deep: every stock row against its whole ledger, trusting no checkpoint (finds a ledger row changed or deleted behind its trigger, a checkpoint changed by hand); 0: only when asked for (stockhold reconcile --deep)"},
	{Name: "STOCKHOLD_RECONCILE_REPAIR_LIMIT", Default: "100",
		Meaning: "most stuck holds one reconciliation releases per SKU; past that the finding waits for a person, with an alert"},
	{Name: "STOCKHOLD_ROLLBACK_PAUSE", Default: "100ms", Meaning: "pause between rollback batches of 100 holds"},
	{Name: "STOCKHOLD_WATCH_INTERVAL", Default: "15s", Meaning: "how often discarded jobs are turned into alerts"},
	{Name: "STOCKHOLD_TRIP_INTERVAL", Default: "1m",
		Meaning: "one period of the protection switch's rules (periods start at its multiples): at each period's end every process records what it saw in the database, and one of them decides the period for all; 0 turns every rule off"},
	{Name: "STOCKHOLD_TRIP_LOCK_WAITS", Default: "200",
		Meaning: "requests every process together answered busy within a period because one stock row stayed locked by another transaction past STOCKHOLD_DB_LOCK_TIMEOUT (each counted once) that pause that pool, with a critical alert; 0: off"},
	{Name: "STOCKHOLD_TRIP_EXPIRY_BACKLOG", Default: "5000",
		Meaning: "held holds past their expiry that count as an expiry backlog; over it for STOCKHOLD_TRIP_PERIODS periods in a row raises a critical alert; 0: off"},
	{Name: "STOCKHOLD_TRIP_CONFIRM_P99", Default: "2s",
		Meaning: "confirm latency target: more than 1% of every process's confirms slower than it (the p99 over it) for STOCKHOLD_TRIP_PERIODS periods in a row raises a critical alert; 0: off"},
	{Name: "STOCKHOLD_TRIP_PERIODS", Default: "3", Meaning: "periods in a row (whichever process decided each) the expiry backlog or the confirm p99 must be over target before its rule fires"},
	{Name: "STOCKHOLD_TRIP_STOP_SALE", Default: "false",
		Meaning: "`true`: the expiry backlog and confirm latency rules also act, until a person lifts it: they pause the pools involved (each behind a tenth of the overdue holds or slow confirms, together half), or stop sales (stop-sale) when the trouble is spread wider"},
	{Name: "STOCKHOLD_RETRY_BASE", Default: "5s",
		Meaning: "wait before a failed job's second attempt (the third waits 4x as long); webhook deliveries retry after it, then 4x, then every 16x"},
	{Name: "STOCKHOLD_LOG_LEVEL", Default: "info", Meaning: "`debug` (logs every request), `info`, `warn` or `error`"},
	{Name: "STOCKHOLD_LOG_FORMAT", Default: "json",
		Meaning: "`json` (one object per line, for log collectors) or `text` (`make run` uses it)"},
	{Name: "STOCKHOLD_ALERT_REPAGE_AFTER", Default: "1h",
		Meaning: "an open alert that repeats at least this long after it last paged is sent to the webhook again; `0s` never re-pages"},
	{Name: "STOCKHOLD_REQUEST_TIMEOUT", Default: "10s", Meaning: "bounds one HTTP request's work (503 `timeout` past it)"},
	{Name: "STOCKHOLD_HTTP_READ_TIMEOUT", Default: "10s",
		Meaning: "bounds reading a request, headers and body: a client dribbling its body is cut off"},
	{Name: "STOCKHOLD_HTTP_WRITE_TIMEOUT", Default: "15s",
		Meaning: "bounds a request from its headers to the end of its answer; must exceed `STOCKHOLD_REQUEST_TIMEOUT`"},
	{Name: "STOCKHOLD_HTTP_IDLE_TIMEOUT", Default: "60s", Meaning: "closes a keep-alive connection idle this long"},
	{Name: "STOCKHOLD_HTTP_MAX_CONNS", Default: "4096",
		Meaning: "most HTTP connections open at once; at the cap the longest-idle one is closed to make room"},
	{Name: "STOCKHOLD_TRUSTED_PROXIES", DefaultText: "none",
		Meaning: "comma-separated CIDRs of load balancers whose `X-Forwarded-For` names the client (for the failed-auth limit); otherwise the peer address is the client"},
	{Name: "STOCKHOLD_AUTH_FAILURES_PER_MINUTE", Default: "20",
		Meaning: "failed authentications per client IP per minute (and at once) before 429, counted together over the API and the console's sign-in, bearer and Basic auth; `0` disables"},
	{Name: "STOCKHOLD_DRAIN_DELAY", Default: "5s",
		Meaning: "on SIGTERM, how long `/readyz` answers 503 while requests are still served, before the listener closes"},
	{Name: "STOCKHOLD_READY_TIMEOUT", Default: "2s",
		Meaning: "longest `/readyz`'s database check may take; a database slower than that makes the instance not ready (503 `database unreachable`)"},
	{Name: "STOCKHOLD_SHUTDOWN_TIMEOUT", Default: "20s",
		Meaning: "on SIGTERM, how long in-flight requests get after the listener closes; connections still open then are closed"},
	{Name: "STOCKHOLD_JOB_STOP_TIMEOUT", Default: "20s",
		Meaning: "on SIGTERM, how long running jobs get to finish before their contexts are cancelled (River runs them again later)"},
	{Name: "STOCKHOLD_HTTP_DB_CONNS", Default: "20",
		Meaning: "connections of the HTTP requests' pool (River's pool is `STOCKHOLD_WORKERS` + 8, or `pool_max_conns` from `DATABASE_URL`)"},
	{Name: "STOCKHOLD_DB_LOCK_TIMEOUT", Default: "250ms",
		Meaning: "PostgreSQL `lock_timeout` of HTTP requests and of hold, confirm and release batches: a longer wait for a row lock answers 503 `busy`"},
	{Name: "STOCKHOLD_DB_STATEMENT_TIMEOUT", Default: "5s", Meaning: "PostgreSQL `statement_timeout` of HTTP requests (503 `busy` past it)"},
	{Name: "STOCKHOLD_DB_ACQUIRE_TIMEOUT", Default: "1s", Meaning: "longest an HTTP request waits for a free connection (503 `unavailable` past it)"},
	{Name: "STOCKHOLD_DB_CONNECT_TIMEOUT", Default: "5s",
		Meaning: "longest opening one database connection takes, unless `DATABASE_URL` sets `connect_timeout`"},
	{Name: "STOCKHOLD_RETENTION", Default: "30d",
		Meaning: "how long ended holds and the stored answers of creating POSTs are kept: a Go duration (`720h`) or days (`30d`), at least `1h`; `0` keeps them for ever"},
	{Name: "STOCKHOLD_LEDGER_ARCHIVE_AFTER", Default: "0",
		Meaning: "months: the `ledger_partitions` job archives every month of the ledger that ended at least this many months ago, as `stockhold ledger archive` does (0: none)"},
	{Name: "STOCKHOLD_LEDGER_ARCHIVE_DIR", DefaultText: "none",
		Meaning: "the directory the periodic archive writes its files and manifests to (required when `STOCKHOLD_LEDGER_ARCHIVE_AFTER` is above 0)"},
	{Name: "STOCKHOLD_WEBHOOK_ALLOW_PRIVATE", Default: "false",
		Meaning: "`true` lets webhooks reach loopback and private addresses (`make run` sets it); otherwise they are refused at registration and at each connection"},
	{Name: "STOCKHOLD_PPROF_ADDR", DefaultText: "none (off)",
		Meaning: "`host:port` serving Go's profiler (`/debug/pprof/`) without authentication: bind it to loopback (`127.0.0.1:6060`)"},
	{Name: "GOGC", DefaultText: "`serve`: 400",
		Meaning: "Go's garbage collector target: `serve` lets the heap grow to five times what is live unless this is set"},
	{Name: "GOMEMLIMIT", DefaultText: "`serve`: 100MiB",
		Meaning: "Go's soft memory limit: `serve` sets 100 MiB unless this is set"},
}

// Lookup returns the setting named name; it panics for a name that is not
// in Settings, which is a bug in the caller.
func Lookup(name string) Setting {
	for _, s := range Settings {
		if s.Name == name {
			return s
		}
	}
	panic("config: no setting " + name)
}

// def is the value used when the variable is unset.
func (s Setting) def() string {
	if s.Computed != nil {
		return s.Computed()
	}
	return s.Default
}

// DefaultDoc is the default as the docs show it.
func (s Setting) DefaultDoc() string {
	switch {
	case s.DefaultText != "":
		return s.DefaultText
	case s.Default == "":
		return "none"
	}
	return "`" + s.Default + "`"
}

// Value is what a process would use with getenv: the variable's value, or
// its default; set says whether the variable is set.
func (s Setting) Value(getenv func(string) string) (v string, set bool) {
	if v := getenv(s.Name); v != "" {
		return v, true
	}
	return s.def(), false
}

var (
	dsnPassword   = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)
	queryPassword = regexp.MustCompile(`([?&]password=)[^&]*`)
)

// Mask hides what a secret setting's value must not show: a connection
// string's password, a webhook URL's path and query (where hooks keep
// their tokens). Values of other settings come back as they are.
func (s Setting) Mask(v string) string {
	if !s.Secret || v == "" {
		return v
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" {
		return dsnPassword.ReplaceAllString(v, "${1}*****")
	}
	if s.Name == "DATABASE_URL" {
		out := v
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			out = strings.Replace(u.String(), ":xxxxx@", ":*****@", 1)
		}
		return queryPassword.ReplaceAllString(out, "${1}*****")
	}
	masked := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		masked += "/*****"
	}
	return masked
}

// meaningPlain is the meaning without Markdown's backticks, for terminals
// and the environment file.
func (s Setting) meaningPlain() string {
	return strings.ReplaceAll(s.Meaning, "`", "")
}

// MarkdownTable is the settings table of docs/configuration.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, s := range Settings {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.DefaultDoc(), strings.ReplaceAll(s.Meaning, "|", `\|`))
	}
	return b.String()
}

// EnvFile is deploy/stockhold.env: every setting with its meaning and
// default, commented out but DATABASE_URL, for systemd's EnvironmentFile.
func EnvFile() string {
	var b strings.Builder
	b.WriteString(`# stockhold's settings, for systemd's EnvironmentFile= (see deploy/stockhold.service).
# Generated from app/config (make readme). Every line but DATABASE_URL is the
# default, commented out: uncomment and change the ones you need.
# Values are in single quotes, which systemd and a POSIX shell read alike
# (a value may not hold a single quote itself): the shell loads the file
# with   set -a; . /etc/stockhold/stockhold.env; set +a
# and    stockhold config --env-file /etc/stockhold/stockhold.env
# prints what systemd gives the service from it, secrets masked.

`)
	for _, s := range Settings {
		fmt.Fprintf(&b, "# %s\n", s.meaningPlain())
		switch {
		case s.Name == "DATABASE_URL":
			b.WriteString("# Required. Keep this file readable by root only (it holds the password).\n")
			fmt.Fprintf(&b, "DATABASE_URL='%s'\n\n", ExampleDatabaseURL)
			continue
		case s.Default == "":
			fmt.Fprintf(&b, "# Default: %s.\n#%s=''\n\n", strings.ReplaceAll(s.DefaultDoc(), "`", ""), s.Name)
			continue
		}
		fmt.Fprintf(&b, "#%s='%s'\n\n", s.Name, s.Default)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ExampleDatabaseURL is the DATABASE_URL deploy/stockhold.env shows: with
// an & in it, as real ones have, which an unquoted line would cut short
// in a shell.
const ExampleDatabaseURL = "postgres://stockhold:CHANGE-ME@db.internal:5432/stockhold?sslmode=verify-full&application_name=stockhold"

// Unknown is a STOCKHOLD_ variable that is no setting (a misspelling, or
// one an older or newer version reads): stockhold ignores it, and says so.
type Unknown struct {
	Name string
	// Suggestion is the setting it most likely means, or "".
	Suggestion string
}

// testPrefix names the variables the tests' own harness reads.
const testPrefix = "STOCKHOLD_TEST_"

// UnknownOf returns the names among names that start with STOCKHOLD_ but
// are no setting, each with the setting it is closest to (at most two
// edits away), in the order given.
func UnknownOf(names []string) []Unknown {
	var out []Unknown
	for _, n := range names {
		if !strings.HasPrefix(n, "STOCKHOLD_") || strings.HasPrefix(n, testPrefix) ||
			slices.ContainsFunc(Settings, func(s Setting) bool { return s.Name == n }) {
			continue
		}
		names := make([]string, len(Settings))
		for i, s := range Settings {
			names[i] = s.Name
		}
		out = append(out, Unknown{Name: n, Suggestion: Nearest(n, names)})
	}
	return out
}

// Nearest returns the name among names that name is most likely a
// misspelling of: the closest at most two edits away (a swap of two
// neighbours is one edit), the first of equals; "" when none is that
// close. A name among names is its own nearest.
func Nearest(name string, names []string) string {
	best, out := 3, ""
	for _, n := range names {
		if d := editDistance(name, n); d < best {
			best, out = d, n
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, with a swap
// of two neighbours counting as one edit (ADRR for ADDR).
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
