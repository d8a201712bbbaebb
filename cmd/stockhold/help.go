package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/stockcsv"
)

// usage is the top-level help: `stockhold help`, `stockhold --help`, and
// (on stderr, exit 2) `stockhold` alone.
const usage = `usage: stockhold <command> [flags]

commands:
  serve              run the HTTP API and the job workers
  migrate up|down|status
                     apply, roll back one, or list migrations (River's included)
  apikey create|list|revoke|rotate
                     manage API keys; create and rotate print the token on the last line
  rollback           enqueue a manual rollback (rollback resume ID: resume a stranded one)
  reconcile          check the books now and print the findings; exit 1 on high risk
  stop-sale on|off|status [--client NAME | --location L]
                     stop or restart every new hold, or one channel's or location's, or show the switches
  repair             preview, or with --apply make, a repair of a pool's books
  report             the daily report of a business day: every ledger kind per stock row, location and campaign, reconciliations
  stock import|export
                     apply a CSV of stock changes (resumable), or write every stock row as CSV
  locations list|create|update|pickup
                     where stock is: warehouses, stores, with their priority and totals; where a SKU can be collected
  transfer create|receive|close|cancel|list
                     stock on its way from one location to another
  inbound create|receive|close|cancel|list
                     stock expected from suppliers at a location, by the day it is due
  limits show|set|clear
                     limits on a SKU's pool: per hold (max, min, pack size) and per customer
  bundle set|get|delete SKU
                     a SKU held as its components (a kit, a shared quota): define, show or remove it
  threshold set|clear
                     the low-stock threshold of a SKU's pool at a location, or of a bundle (stock.low)
  backorders show|set|clear
                     how far holds on a SKU's pool may promise past what is on hand
  count              preview, or with --apply record, a stock count and its difference
  ledger partitions|archive|restore
                     the ledger's monthly partitions; archive old months to files; load an archive back
  webhook-listen     a webhook receiver for trying stockhold: verifies signatures, prints events
  config             every setting: its value, its default and what it does (secrets masked)
  version            the release version, VCS revision and Go version of this binary
  help [CMD [SUB]]   this text, or a command's (as CMD [SUB] --help)

Run 'stockhold CMD --help' for a command's flags and an example. Settings come from
the environment (DATABASE_URL, STOCKHOLD_*): 'stockhold config' lists them.
`

// commandHelp is what `stockhold CMD [SUB] --help` prints around the
// command's flags, which come from its own flag.FlagSet: a flag added to a
// command shows in its help without a word here.
type commandHelp struct {
	// synopsis is the command line, after "usage: stockhold ".
	synopsis string
	// about says what the command does, in a few lines.
	about string
	// example is one or more command lines.
	example string
	// group lists subcommands, for a command that has them.
	group []string
}

// helps holds every command's help, by the name of its flag set.
var helps = map[string]commandHelp{
	"serve": {
		synopsis: "serve [--check-addr]",
		about: `Runs the HTTP API, the operator console (/ops/) and the job workers until SIGTERM or
SIGINT, then drains (see STOCKHOLD_DRAIN_DELAY) and exits 0. Needs DATABASE_URL and a
migrated schema (stockhold migrate up); every other setting has a default
(stockhold config lists them). With --check-addr it only binds the listen address and
lets it go: exit 0 when serve could listen there, 1 naming what stops it (make run
checks it before it rotates the dev keys).`,
		example: "DATABASE_URL=postgres://stockhold@db/stockhold stockhold serve\nSTOCKHOLD_ADDR=:8080 stockhold serve --check-addr",
	},
	"migrate": {
		synopsis: "migrate up|down|status",
		about:    "Applies, rolls back or lists the schema's migrations (River's included), on DATABASE_URL.",
		example:  "stockhold migrate status\nstockhold migrate up",
		group:    []string{"up", "down", "status"},
	},
	"migrate up": {
		synopsis: "migrate up",
		about: `Applies every pending migration, each in its own transaction, under a session lock
(two instances migrating at once take turns). A failed migration is rolled back whole
and named; the ones before it stay applied. Run it before rolling out a new version.`,
		example: "stockhold migrate up",
	},
	"migrate down": {
		synopsis: "migrate down",
		about:    "Rolls back the newest applied migration, one per run.",
		example:  "stockhold migrate down",
	},
	"migrate status": {
		synopsis: "migrate status",
		about:    "Lists every migration, applied (with when) or pending.",
		example:  "stockhold migrate status",
	},
	"apikey": {
		synopsis: "apikey create|list|revoke|rotate [flags]",
		about: `Manages API keys. A key's name is its owner: holds and idempotency keys are scoped to
it. Tokens are stored only as SHA-256 and shown once.`,
		example: "stockhold apikey create --name shop-eu --role shop\nstockhold apikey list",
		group:   []string{"create", "list", "revoke", "rotate"},
	},
	"apikey create": {
		synopsis: "apikey create --name N --role shop|ops [--locations L1,L2] [--strategy S]",
		about: `Creates an API key and prints its token alone on the last line. A name in use by
another key is refused: rotate that key, or revoke it first. --locations binds a shop key
to those locations (a sales channel): its holds allocate only there, and a line naming
another location is refused (403 location_not_allowed), as is reinstating a hold with a
line elsewhere. A binding limits only new holds: reads, and confirm, release and extend of
the client's holds, go on everywhere. --strategy is how the key's holds that name no
strategy are allocated: priority (the default), most_stock or nearest (to the hold's
ship_to; without one, priority). A rotation keeps the binding and the strategy (unless
rotate --strategy changes it).`,
		example: "stockhold apikey create --name shop-eu --role shop\nstockhold apikey create --name shop-fr --role shop --locations paris,lyon\n" +
			"stockhold apikey create --name alice --role ops | tail -n 1",
	},
	"apikey list": {
		synopsis: "apikey list",
		about: `Lists every key, never a token: id, name, role, the locations its new holds are bound to
(any: not bound), the strategy of its holds that name none, created, and in use, revoked,
or working until the end of a rotation's grace period.`,
		example: "stockhold apikey list",
	},
	"apikey revoke": {
		synopsis: "apikey revoke --name N",
		about: `Stops the key named N (and one still in a rotation's grace period) now and ends its
console sessions; every instance refuses it within 3 s.`,
		example: "stockhold apikey revoke --name shop-eu",
	},
	"apikey rotate": {
		synopsis: "apikey rotate --name N [--role R] [--grace D] [--strategy S]",
		about: `Gives the key named N a new token, printed on the last line; the old one stops after
--grace (at once by default). Creates N when there is no such key (then --role is
required; otherwise it defaults to the old key's). The new key keeps the old one's
default strategy unless --strategy gives another (priority, most_stock or nearest).`,
		example: "stockhold apikey rotate --name shop-eu --grace 1h\nstockhold apikey rotate --name shop-eu --strategy most_stock",
	},
	"stop-sale": {
		synopsis: "stop-sale on|off|status [--client NAME | --location L] [--operator O --reason R]",
		about: `The switch for everything, or with --client the switch of one channel: the key owner NAME
(stockhold apikey list), or with --location the switch of one location. 'on' refuses every
new hold (by NAME's keys only, with --client; at L only, with --location, where allocation
skips it: the API answers 503 stop_sale with Retry-After) until 'off'; reads, confirms and
releases go on, and so do other clients and locations. Each flip records who (--operator,
and the database user as the key) and why (--reason, required both ways), and waits for the
holds being decided at that moment, so none decided before it commits after. 'off' prints
what it lifted: who turned the switch on, why, and the rule if a protection rule did
(STOCKHOLD_TRIP_STOP_SALE). 'status' prints every switch.`,
		example: `stockhold stop-sale on --operator alice --reason "payment provider down"
stockhold stop-sale status
stockhold stop-sale off --operator alice --reason "payments back"
stockhold stop-sale on --client shop-eu --operator alice --reason "EU storefront oversells"
stockhold stop-sale on --location berlin --operator alice --reason "flooded"`,
	},
	"ledger": {
		synopsis: "ledger partitions|archive|restore [flags]",
		about: `The ledger is partitioned by month (UTC). An old month can be archived to a compressed
file with a checksum manifest and replaced by its balances carried forward; an archive
loads back for an audit.`,
		example: "stockhold ledger partitions\nstockhold ledger archive --before 2026-01 --dir /var/lib/stockhold/archive --operator alice",
		group:   []string{"partitions", "archive", "restore"},
	},
	"ledger partitions": {
		synopsis: "ledger partitions",
		about:    "Lists the ledger's partitions, oldest first, with the range each covers and, once archived, its archive.",
		example:  "stockhold ledger partitions",
	},
	"ledger archive": {
		synopsis: "ledger archive --before YYYY-MM [--dir DIR] --operator O",
		about: `Archives every month before --before, oldest first: each month's rows go to DIR/<partition>.csv.gz
(CSV, id order) with DIR/<partition>.manifest.json (rows, SHA-256 of the file and of the CSV); the
file is read back and checked against the partition read again; then the partition is replaced
by one balance carried forward per stock row and the rows still read (holds the month did not
close, the last row naming each unit), and dropped. Refused while a transaction that began in
that month is open, a transfer made then is in transit, or a webhook has not received its events.`,
		example: "stockhold ledger archive --before 2026-01 --dir /var/lib/stockhold/archive --operator alice",
	},
	"ledger restore": {
		synopsis: "ledger restore FILE",
		about: `Checks an archive (FILE.csv.gz and the manifest beside it) against its checksums, loads it into
the table ledger_restored_<partition>, and checks that its rows, summed per stock row, are what
the ledger carries for that month. Exit 1 when they are not.`,
		example: "stockhold ledger restore /var/lib/stockhold/archive/ledger_2026_01.csv.gz",
	},
	"locations": {
		synopsis: "locations list|create|update|pickup [flags]",
		about: `Where stock is. Every row from before locations existed is at 'default'. A hold line
that names no location is allocated among the active locations, lowest priority first
(ties by id): the first that can fill the whole line.`,
		example: "stockhold locations create --id berlin --name Berlin --priority 1 --operator alice\nstockhold locations list",
		group:   []string{"list", "create", "update", "pickup"},
	},
	"locations pickup": {
		synopsis: "locations pickup --sku SKU",
		about:    "Lists the pickup locations (--pickup true) where the SKU's main stock can be held now (active, sales not stopped there, the row on sale, some available), by priority then id, with what is available and where each is: what GET /v1/skus/{sku}/pickup answers a click-and-collect page.",
		example:  "stockhold locations pickup --sku A1",
	},
	"locations list": {
		synopsis: "locations list",
		about:    "Lists every location with its priority, whether it takes holds, its stock summed over every SKU, every state, whether shoppers may collect there (pickup) and where it is (latitude,longitude; - when not known).",
		example:  "stockhold locations list",
	},
	"locations create": {
		synopsis: "locations create --id ID [--name N] [--priority P] [--latitude D --longitude D] [--pickup true|false] --operator O",
		about:    "Adds a location (a warehouse, a store). Allocation takes the lowest priority first, or the nearest to a hold's ship_to by its coordinates.",
		example:  "stockhold locations create --id berlin --name Berlin --priority 1 --operator alice",
	},
	"locations update": {
		synopsis: "locations update --id ID [--name N] [--priority P] [--active true|false] [--latitude D --longitude D] [--pickup true|false] --operator O",
		about: `Changes a location's name, priority, coordinates, pickup or whether it takes new holds. --active false waits
for the holds being decided at that moment: once it returns, no new hold takes stock there;
its holds finish normally.`,
		example: "stockhold locations update --id berlin --active false --operator alice",
	},
	"transfer": {
		synopsis: "transfer create|receive|close|cancel|list [flags]",
		about: `Stock on its way between locations. create takes the units out of available at --from
(they leave its total) and shows them as incoming at --to; receive moves some into
available there; close writes off what never arrived (ledger kind loss); cancel, before
any receipt, gives them back. Each step is in the ledger with who and why.`,
		example: `stockhold transfer create --sku A1 --from paris --to berlin --quantity 5 --operator alice --reason rebalance
stockhold transfer list --status in_transit`,
		group: []string{"create", "receive", "close", "cancel", "list"},
	},
	"transfer create": {
		synopsis: "transfer create --sku S [--pool P] --from L --to L --quantity N --operator O --reason R",
		about:    "Sends N units; prints the transfer and, on the last line, its id.",
		example:  "stockhold transfer create --sku A1 --from paris --to berlin --quantity 5 --operator alice --reason rebalance",
	},
	"transfer receive": {
		synopsis: "transfer receive ID --quantity N --operator O [--reason R]",
		about:    "Records N units of the transfer arrived (partial receipts allowed); more than is in transit is refused.",
		example:  "stockhold transfer receive 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --quantity 3 --operator bob",
	},
	"transfer close": {
		synopsis: "transfer close ID --operator O --reason R",
		about:    "Ends the transfer: what never arrived is written off as lost in transit.",
		example:  "stockhold transfer close 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --operator bob --reason \"pallet 2 lost\"",
	},
	"transfer cancel": {
		synopsis: "transfer cancel ID --operator O --reason R",
		about:    "Gives the transfer's units back to where they came from; refused once any was received.",
		example:  "stockhold transfer cancel 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --operator bob --reason \"wrong SKU\"",
	},
	"transfer list": {
		synopsis: "transfer list [--status S]",
		about:    "Lists transfers, oldest first, with how long each has been on its way.",
		example:  "stockhold transfer list --status in_transit",
	},
	"inbound": {
		synopsis: "inbound create|receive|close|cancel|list [flags]",
		about: `Stock expected from a supplier: a purchase order or shipment notice at a location, due on a
day, with lines of SKU, pool and quantity. create shows each line as incoming there; receive
moves some of one line into available; close writes off what never came (ledger kind
inbound_short, each line's short); cancel, before any receipt, takes the incoming back.
list shows them by the day they are expected, the late first. Each step is in the ledger
with who and why.`,
		example: `stockhold inbound create --supplier-ref PO-1 --location paris --expected 2030-01-15 --line A1=10 --operator alice
stockhold inbound list --status open`,
		group: []string{"create", "receive", "close", "cancel", "list"},
	},
	"bundle": {
		synopsis: "bundle set|get|delete SKU [flags]",
		about: `A bundle is a SKU held as its components: a hold line on it holds each component's
quantity per bundle, in the same hold, all or nothing, every component from one location
unless it is split. set defines it again as a new version (holds already made keep the
version they used); get shows the current definition; delete removes it. A component
must have stock and not be a bundle: bundles do not nest.`,
		example: "stockhold bundle set GIFT-BOX --component MUG=1 --component COASTER=2 --reason \"gift box\" --operator alice",
		group:   []string{"set", "get", "delete"},
	},
	"bundle set": {
		synopsis: "bundle set SKU --component SKU=N[:split] ... --reason R --operator O",
		about:    "Defines SKU as a bundle of its components, a new version; prints it.",
		example:  "stockhold bundle set TICKET-ADULT --component QUOTA-SAT=1 --reason \"Saturday's quota\" --operator alice",
	},
	"bundle get": {
		synopsis: "bundle get SKU",
		about:    "Prints the bundle's current definition: its version, who set it and why, its components.",
		example:  "stockhold bundle get GIFT-BOX",
	},
	"bundle delete": {
		synopsis: "bundle delete SKU",
		about:    "Removes the bundle's definition; holds already made keep what they hold.",
		example:  "stockhold bundle delete GIFT-BOX",
	},
	"inbound create": {
		synopsis: "inbound create --supplier-ref REF [--location L] --expected YYYY-MM-DD --line SKU[:POOL]=N ... --operator O [--reason R]",
		about:    "Records a notice; prints it, each line, and on the last line its id.",
		example:  "stockhold inbound create --supplier-ref PO-1 --location paris --expected 2030-01-15 --line A1=10 --line B2=4 --operator alice",
	},
	"inbound receive": {
		synopsis: "inbound receive ID --sku S [--pool P] --quantity N --operator O [--reason R]",
		about:    "Records N units of one line arrived (partial receipts allowed); more than the line still expects is refused.",
		example:  "stockhold inbound receive 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --sku A1 --quantity 6 --operator bob",
	},
	"inbound close": {
		synopsis: "inbound close ID --operator O --reason R",
		about:    "Ends the notice: what its lines never received is written off incoming and recorded as their short.",
		example:  "stockhold inbound close 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --operator bob --reason \"supplier out of stock\"",
	},
	"inbound cancel": {
		synopsis: "inbound cancel ID --operator O --reason R",
		about:    "Takes the notice's incoming back; refused once any of it was received.",
		example:  "stockhold inbound cancel 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10 --operator bob --reason \"order withdrawn\"",
	},
	"inbound list": {
		synopsis: "inbound list [--status S]",
		about:    "Lists notices by the day they are expected, the late first, with their units ordered, received and still expected.",
		example:  "stockhold inbound list --status open",
	},
	"limits": {
		synopsis: "limits show|set|clear --sku S [--pool P] [flags]",
		about: `The limits on a SKU's pool (main unless --pool names a campaign's), counted per SKU across
a hold's lines and locations: max_per_order, min_per_order and step (sold in multiples of
it) bound each hold; max_per_customer bounds the units one customer's holds (those carrying
its customer_ref) hold or bought, in the last --customer-window or ever. A hold past one is
refused 422 limit_exceeded, naming it. set replaces every limit at once (one left out is
removed); holds already made keep what they hold.`,
		example: `stockhold limits set --sku TEA --step 6 --max-per-order 12 --operator alice
stockhold limits set --sku FLASH --max-per-customer 2 --customer-window 24h --operator alice
stockhold limits show --sku TEA`,
		group: []string{"show", "set", "clear"},
	},
	"limits show": {
		synopsis: "limits show --sku S [--pool P]",
		about:    "Prints the pool's limits, who set them and when; not found when it has none.",
		example:  "stockhold limits show --sku TEA",
	},
	"limits set": {
		synopsis: "limits set --sku S [--pool P] [--max-per-order N] [--min-per-order N] [--step N] [--max-per-customer N [--customer-window D]] --operator O",
		about:    "Sets every limit of the pool at once, at least one; a limit left out is removed. The pool must have stock somewhere.",
		example:  "stockhold limits set --sku TEA --step 6 --max-per-order 12 --operator alice",
	},
	"limits clear": {
		synopsis: "limits clear --sku S [--pool P]",
		about:    "Removes every limit of the pool; not found when it had none.",
		example:  "stockhold limits clear --sku TEA",
	},
	"threshold": {
		synopsis: "threshold set|clear --sku S [--location L] [--pool P] [flags] --operator O",
		about: `The low-stock threshold of a SKU's pool at a location (main unless --pool names a
campaign's), or of a bundle, on what its components make there: a change that takes
available from above it to at or below it sends one stock.low event; available must rise
above it again before the next. Setting a threshold already met sends nothing until then.`,
		example: `stockhold threshold set --sku TEA --threshold 10 --operator alice
stockhold threshold set --sku GIFT-BOX --location berlin --threshold 3 --operator alice
stockhold threshold clear --sku TEA --operator alice`,
		group: []string{"set", "clear"},
	},
	"threshold set": {
		synopsis: "threshold set --sku S [--location L] [--pool P] --threshold N --operator O",
		about:    "Sets the threshold; prints what the pool (or the bundle) has there and whether it is low.",
		example:  "stockhold threshold set --sku GIFT-BOX --location berlin --threshold 3 --operator alice",
	},
	"threshold clear": {
		synopsis: "threshold clear --sku S [--location L] [--pool P] --operator O",
		about:    "Removes the threshold: no stock.low for the pool (or the bundle) there until one is set again.",
		example:  "stockhold threshold clear --sku TEA --operator alice",
	},
	"backorders": {
		synopsis: "backorders show|set|clear --sku S [--pool P] [flags]",
		about: `A SKU's pool's backorder policy: how far holds may go past what each location has on hand.
A hold line takes what is on hand, then promises the rest: up to --below-zero units, plus,
with --horizon-days, what is on its way (transfers in transit, inbound lines expected within
that many days). Receipts fill promises, confirmed holds first, oldest first. show prints what
each location promised; a policy below that, or a clear while any is promised, is refused.`,
		example: `stockhold backorders set --sku LAUNCH --below-zero 5 --horizon-days 14 --operator alice
stockhold backorders show --sku LAUNCH`,
		group: []string{"show", "set", "clear"},
	},
	"backorders set": {
		synopsis: "backorders set --sku S [--pool P] [--below-zero N] [--horizon-days D] --operator O",
		about:    "Sets the policy; prints it and what each location has promised under it.",
		example:  "stockhold backorders set --sku LAUNCH --below-zero 5 --horizon-days 14 --operator alice",
	},
	"backorders show": {
		synopsis: "backorders show --sku S [--pool P]",
		about:    "Prints the policy and what each location has promised under it.",
		example:  "stockhold backorders show --sku LAUNCH",
	},
	"backorders clear": {
		synopsis: "backorders clear --sku S [--pool P]",
		about:    "Removes the policy: holds take what is on hand only. Refused while a location has promised units.",
		example:  "stockhold backorders clear --sku LAUNCH",
	},
	"count": {
		synopsis: "count --sku S [--location L] [--pool P] --counted N --operator O --reason R [--force] [--apply]",
		about: `A stock count: --counted is what is on the shelf and not sold (available + reserved +
quality control + damaged + safety stock). Without --apply it prints the difference and
changes nothing; with --apply it records it (ledger kind count): the difference goes to
available. A count below what holds hold there is refused unless --force, which records it,
pauses the pool and raises a critical alert naming the holds at risk.`,
		example: `stockhold count --sku A1 --location berlin --counted 9 --operator alice --reason "monthly count"
stockhold count --sku A1 --location berlin --counted 9 --operator alice --reason "monthly count" --apply`,
	},
	"repair": {
		synopsis: "repair --sku S [--location L] [--pool P] --to ledger|counters --operator O --reason R [--ref REF ...] [--apply]",
		about: `Closes the gap between a pool's counters and its ledger, one side taken as right: --to ledger
sets the counters to what the ledger sums to; --to counters writes one ledger row (kind
repair) that accepts the counters. Without --apply it prints the counters before and
after and the difference, and changes nothing; with --apply it prints that preview, then
writes exactly it (refused, preview_stale, when the books moved in between: nothing is
written), runs a reconciliation of the SKU and prints it. It never adds stock of its own
accord, and leaves the pool paused: resume it afterwards (POST /v1/skus/S/resume, gated by
the books). --ref names what it fixes (order refs, hold or ledger ids, a ticket), stored on
its ledger row and shown in the ledger, the console and the stock.repaired event.`,
		example: `stockhold repair --sku A1 --to ledger --operator alice --reason "counters edited by hand"
stockhold repair --sku A1 --to ledger --operator alice --reason "counters edited by hand" --ref o-1042 --ref OPS-17 --apply`,
	},
	"report": {
		synopsis: "report --date YYYY-MM-DD [--tz ZONE] [--json]",
		about: `Prints the daily report of one business day (in --tz, an IANA time zone; default UTC),
from the ledger, in all, per campaign, per location and per (sku, location, pool): every
kind of ledger row in its column (units held, confirmed, released, expired, rolled back,
adjusted, transferred by campaigns, moved between states, written off, counted, sent,
in transit, received, lost in transit, given back by cancelled transfers; the repairs),
then the day's change of every state; then the day's reconciliation runs, how many
failed and what they found, with the runs that found something and their findings.
The same as GET /v1/reports/daily, every page of pools at once; --json prints that
answer, with each ledger kind's change of every state (by_kind).`,
		example: `stockhold report --date 2026-12-01
stockhold report --date 2026-12-01 --tz Asia/Shanghai --json`,
	},
	"rollback": {
		synopsis: "rollback --operator O --reason R (--reservation ID ... | --campaign C | --sku S [--pool P] [--location L] [--held-before T] | --location L [--held-before T]) [--cutoff T] [--dry-run]",
		about: `Enqueues a manual rollback job, recorded with who and why, and prints its request id on
the last line; a serving instance's workers run it (follow it with GET /v1/rollbacks/ID).
Give exactly one scope; a --sku with no stock row is refused (exit 2). --reservation and
--campaign release whole holds; --sku and --location hand back only the lines in scope
(the SKU's pool's, at --location when given; every line at --location; a bundle line
whole when one of its components is in scope): a hold's other
lines stay held, and a hold with no other line is released whole. A --dry-run counts
those same holds and units. Holds made after the request are never touched, nor, with
--cutoff, those made after that time (give a dry run's requested_at to release what the
dry run counted and nothing made since).
'stockhold rollback resume ID' gives a stranded rollback a job again.`,
		example: `stockhold rollback --operator alice --reason "payment outage" --sku A1 --dry-run
stockhold rollback --operator alice --reason fraud --reservation 0195f0c4-1c1e-7c7e-9a4e-3c0f7f1f2a10`,
		group: []string{"resume"},
	},
	"rollback resume": {
		synopsis: "rollback resume ID [--operator O]",
		about: `Gives a rollback whose jobs were cancelled, deleted or discarded a job again. It is
idempotent: a rollback with a job still to run, or one that succeeded, is left alone.`,
		example: "stockhold rollback resume 7 --operator alice",
	},
	"reconcile": {
		synopsis: "reconcile [--sku S]... [--incremental | --deep]",
		about: `Runs a reconciliation now, in this process (no worker needed), and prints its findings
and what it did. It checks every stock row, the rows of the SKUs given, or with
--incremental only the rows whose ledger moved since the last clean run. Each row's
ledger is summed from its checkpoint (the ledger rows written since); with --deep, from
its first row, trusting no checkpoint: it also finds a ledger row changed or deleted
behind the append-only trigger, or a checkpoint changed by hand, and costs a pass over the
whole ledger. Exits 1 when a pool's books do not balance (high risk: the pool is paused),
0 otherwise. A --sku that names no stock row is refused (exit 2).`,
		example: "stockhold reconcile\nstockhold reconcile --incremental\nstockhold reconcile --deep\nstockhold reconcile --sku A1 --sku B2",
	},
	"stock": {
		synopsis: "stock import|export [flags]",
		about:    "Moves stock in bulk: CSV import (resumable) and export.",
		example:  "stockhold stock import restock.csv\nstockhold stock export --out stock.csv",
		group:    []string{"import", "export"},
	},
	"stock import": {
		synopsis: "stock import FILE.csv [flags]",
		about: `Applies a CSV whose header starts sku,pool,delta or sku,pool,set_total, or the same with
location after sku (sku,location,pool,set_total: an export is one), in transactions of
1,000 rows, as the import --id (by default the file's name). Run again, an unfinished
import resumes after the rows it applied, a finished one with the same rows applies
nothing (--again imports it once more), and one whose applied rows changed is refused.
A file under another name is another import, even with the same rows (with a warning).
A row marked serialized true (an export's pools of seats or serial numbers, whose total
changes only through their units) is skipped, and named; an unmarked row of such a pool
refuses the file. Exits 2 for a bad file or a refused rerun (nothing applied), 1 when a
chunk fails (the chunks before it stay applied).`,
		example: "stockhold stock import restock-week2.csv --reason \"PO-7 delivered\"\nstockhold stock import counts.csv --id count-2026-12",
	},
	"stock export": {
		synopsis: "stock export [--out FILE]",
		about: "Writes every stock row, from one snapshot, as " + strings.Join(stockcsv.ExportHeader, ",") + `:
a file stock import reads back (it skips the pools of units, marked serialized true).
With --out the file is written whole or not at all.`,
		example: "stockhold stock export > stock.csv\nstockhold stock export --out /var/backups/stock.csv",
	},
	"webhook-listen": {
		synopsis: "webhook-listen --secret S [--addr HOST:PORT] [--count N]",
		about: `A webhook receiver for trying stockhold and checking a deployment: listens for stockhold's
webhook POSTs, verifies each Stockhold-Signature with the webhook's secret (HMAC-SHA256
of "t.body", t within 5 minutes), answers 204 to a good one and 401 to a bad one, and
prints one line per event: "verified" and the event's JSON. Needs no database.`,
		example: "stockhold webhook-listen --addr 127.0.0.1:18192 --secret whsec_... --count 2",
	},
	"config": {
		synopsis: "config [--env-file FILE]",
		about: `Prints every setting stockhold reads from the environment: the value this process would
use, its default, and what it does; secrets are masked. Then the STOCKHOLD_ variables that
are no setting (a misspelling: serve ignores them, with a warning), each with the setting
it most likely means. Exits 1 (after printing) when a value is invalid, naming it. With
--env-file, the settings come from that file alone, read as systemd's EnvironmentFile=
reads it (deploy/stockhold.env), and it first lists each variable it read, by line.
Needs no database.`,
		example: `STOCKHOLD_WORKERS=40 stockhold config
stockhold config --env-file /etc/stockhold/stockhold.env`,
	},
	"version": {
		synopsis: "version",
		about:    "Prints the release version (CHANGELOG.md names what each one changed), then the VCS revision it was\nbuilt from and the Go version.",
		example:  "stockhold version",
	},
}

// errHelp says the command printed its help: exit 0.
var errHelp = errors.New("help shown")

// parseFlags parses args with fs. For -h or --help it prints the command's
// help (see helps) with fs's flags to w and returns errHelp; a bad flag is
// a usage error naming the flag as the command line spells it.
func parseFlags(fs *flag.FlagSet, args []string, w io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(w, fs.Name(), fs)
		return errHelp
	}
	if err != nil {
		msg := dashes(err.Error())
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			var flags []string
			fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
			if near := config.Nearest(name, flags); near != "" {
				msg += fmt.Sprintf(" (did you mean --%s?)", near)
			}
		}
		return fmt.Errorf("%w: %s", errUsage, msg)
	}
	return nil
}

// wantsHelp reports whether args ask for help before any flag parsing
// (commands whose first argument is a subcommand or an id).
func wantsHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

var singleDash = regexp.MustCompile(`(^|[\s:])-([a-z][a-z-]*)`)

// dashes writes flag's "-name" as "--name", the way the docs spell flags.
func dashes(s string) string { return singleDash.ReplaceAllString(s, "$1--$2") }

// printHelp writes a command's help: usage, what it does, its flags (from
// fs, when given), its subcommands and an example.
func printHelp(w io.Writer, name string, fs *flag.FlagSet) {
	h, ok := helps[name]
	if !ok {
		h = commandHelp{synopsis: name + " [flags]"}
	}
	fmt.Fprintf(w, "usage: stockhold %s\n", h.synopsis)
	if h.about != "" {
		fmt.Fprintf(w, "\n%s\n", h.about)
	}
	if fs != nil {
		var flags []*flag.Flag
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
		if len(flags) > 0 {
			fmt.Fprintln(w, "\nflags:")
			for _, f := range flags {
				arg, text := flag.UnquoteUsage(f)
				left := "--" + f.Name
				if arg != "" {
					left += " " + arg
				}
				if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" && def != "[]" {
					text += fmt.Sprintf(" (default %s)", def)
				}
				fmt.Fprintf(w, "  %-22s %s\n", left, text)
			}
		}
	}
	if len(h.group) > 0 {
		fmt.Fprintln(w, "\nsubcommands:")
		subs := append([]string(nil), h.group...)
		sort.Strings(subs)
		for _, s := range subs {
			sh := helps[name+" "+s]
			fmt.Fprintf(w, "  %-22s %s\n", s, firstLine(sh.about))
		}
		fmt.Fprintf(w, "\nRun 'stockhold %s SUB --help' for a subcommand's flags.\n", name)
	}
	if h.example != "" {
		fmt.Fprintln(w, "\nexample:")
		for _, line := range strings.Split(h.example, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// firstLine is a help text's first sentence or line, for a listing.
func firstLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// noFlags parses the args of a command that takes none (for --help and
// for refusing stray arguments).
func noFlags(name string, args []string, w io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if err := parseFlags(fs, args, w); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments (got %q)", errUsage, name, fs.Arg(0))
	}
	return nil
}

// groupHelp handles a command with subcommands when args name none, or
// ask for help: it prints the group's help and returns errHelp, or a usage
// error for a missing or unknown subcommand. It returns nil when args[0]
// is one of the group's subcommands.
func groupHelp(name string, args []string, w io.Writer) error {
	h := helps[name]
	if wantsHelp(args) {
		printHelp(w, name, nil)
		return errHelp
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: %s takes a subcommand: %s", errUsage, name, strings.Join(h.group, ", "))
	}
	for _, s := range h.group {
		if args[0] == s {
			return nil
		}
	}
	return fmt.Errorf("%w: unknown %s subcommand %q (want %s)", errUsage, name, args[0], strings.Join(h.group, ", "))
}
