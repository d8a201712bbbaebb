# stockhold's vocabulary. Without DATABASE_URL, run/test/bench bring up a
# private PostgreSQL cluster for this checkout (cmd/devdb) and use it.

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin

SQLC := go run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1
# The Go client generated from openapi.json (app/api/apiclient).
OAPI_CODEGEN := go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# testifylint with its default checkers: among them go-require (no require
# off the test goroutine), error-is-as, float-compare, expected-actual.
TESTIFYLINT := go run github.com/Antonboom/testifylint@v1.6.4
# Exports DATABASE_URL, starting the dev cluster when it is not set.
WITH_DB = export DATABASE_URL="$${DATABASE_URL:-$$(go run ./cmd/devdb up)}"

# The binary build writes and run serves (the README's test gives its own).
STOCKHOLD_BIN ?= bin/stockhold

.PHONY: run test torture readme examples screenshots generate check-generate bench bench-year bench-compare drill-failover lint build db-stop

## run: migrate, print dev API keys (rotated: the last run's stop working), and serve on :8080 (STOCKHOLD_ADDR), logging text lines;
## webhooks may reach loopback (a dev instance); the export line it prints sets DATABASE_URL, BASE (where it serves), SHOP and OPS
## The address is checked first: with the port taken (another instance serving), nothing is rotated
run: build
	@set -eo pipefail; $(WITH_DB); \
	bin=$(STOCKHOLD_BIN); unset STOCKHOLD_BIN; \
	$$bin migrate up; \
	$$bin serve --check-addr; \
	shop=$$($$bin apikey rotate --name dev-shop --role shop | tail -n 1); \
	ops=$$($$bin apikey rotate --name dev-ops --role ops | tail -n 1); \
	addr=$${STOCKHOLD_ADDR:-:8080}; host=$${addr%:*}; \
	case "$$host" in ""|0.0.0.0|"[::]") host=localhost;; esac; \
	base=http://$$host:$${addr##*:}; \
	echo; \
	echo "stockhold dev instance"; \
	echo "  DATABASE_URL=$$DATABASE_URL"; \
	echo "  shop key: $$shop"; \
	echo "  ops key:  $$ops"; \
	echo "  console:  $$base/ops/ (sign in with the ops key)"; \
	echo "  try:      curl -s -H 'Authorization: Bearer $$ops' -H 'Idempotency-Key: try-1' --json '{\"delta\": 10, \"reason\": \"first stock\"}' $$base/v1/skus/A1/adjustments"; \
	echo "  then:     curl -s -H 'Authorization: Bearer $$shop' $$base/v1/skus/A1"; \
	echo "  in another shell, for the README's walk-through:"; \
	echo "  export DATABASE_URL='$$DATABASE_URL' BASE=$$base SHOP=$$shop OPS=$$ops PATH=\"$$(cd $$(dirname $$bin) && pwd):\$$PATH\""; \
	echo; \
	STOCKHOLD_LOG_FORMAT=$${STOCKHOLD_LOG_FORMAT:-text} STOCKHOLD_WEBHOOK_ALLOW_PRIVATE=$${STOCKHOLD_WEBHOOK_ALLOW_PRIVATE:-true} \
	exec $$bin serve

## test: the whole suite against real PostgreSQL and River, with the race detector. First it installs with apt-get, saying so, the
## Debian packages some tests need (curl, jq, prometheus for promtool, chromium, pgbouncer, postgresql-15-auto-failover): as root, when missing;
## otherwise it stops and prints the command that installs them (TEST_DEPS=skip runs without them, skipping the tests that need them)
test:
	@set -eo pipefail; \
	if [ "$(TEST_DEPS)" != skip ]; then go run ./cmd/testdeps; fi; \
	$(WITH_DB); \
	go test -race -count=1 -timeout 30m ./...

## torture: every write path against every other for TORTURE_DURATION (default 2m; TORTURE_SEED reruns a seed)
torture:
	@set -eo pipefail; $(WITH_DB); \
	d=$${TORTURE_DURATION:-2m}; \
	TORTURE_DURATION=$$d go test -race -count=1 -v -run '^TestTorture$$' -timeout 2h ./app/torture/

## readme: run the walk-throughs of the README, docs/OPERATIONS.md and docs/guides against fresh servers and, in each document where an
## answer changed beyond ids and times, rewrite every answer from this run (README_ALL=1: every document's); also the generated settings
## table of docs/configuration.md and deploy/stockhold.env
readme:
	@set -eo pipefail; $(WITH_DB); \
	UPDATE_README=$(if $(README_ALL),all,1) go test -count=1 -run 'TestREADME|TestRunbook|TestGuides|TestGenerated' ./internal/readme/

## examples: drive a real server through every operation of app/api/openapi.json and write each one's example (a curl command, its
## body and the answer, which /docs shows) where any changed beyond ids and times; then regenerate the clients
examples:
	@set -eo pipefail; $(WITH_DB); \
	UPDATE_EXAMPLES=1 go test -count=1 -run '^TestOpenAPIExamples$$' ./app/api/apiexamples/
	@$(MAKE) --no-print-directory generate

## screenshots: retake docs/screenshots with the console's browser test
screenshots:
	@set -eo pipefail; $(WITH_DB); \
	UPDATE_SCREENSHOTS=1 go test -count=1 -run 'TestBrowserOperatorFlow|TestBrowserSeatMap|TestBrowserLocations' ./app/console/

## bench: a real server on the dev database driven over HTTP, scenario by
## scenario, against the bare-SQL hold at the same concurrency (BENCH_FLAGS: -json, -duration, -scenarios...);
## rewrites docs/internals/PERFORMANCE.md with the goals it measured (BENCH_REPORT= to write none)
BENCH_REPORT ?= docs/internals/PERFORMANCE.md
bench: build
	@set -eo pipefail; $(WITH_DB); \
	go build -o bin/stockhold-bench ./cmd/stockhold-bench; \
	bin/stockhold-bench -server bin/stockhold $(if $(BENCH_REPORT),-report $(BENCH_REPORT)) $(BENCH_FLAGS)

## bench-year: a year of a busy shop's history generated in SQL (docs/bench/year.sh: 10,000,000 SKUs, 76 million ledger rows
## over twelve monthly partitions) into the bench database (dropped first; YEAR_DATABASE, default stockhold_bench), for
## `make bench BENCH_FLAGS='-catalogue 10000000 -reuse ...'` to run on; YEAR_FLAGS sets CATALOGUE, HOLDS... (about 33 GB)
YEAR_DATABASE ?= stockhold_bench
bench-year: build
	@set -eo pipefail; $(WITH_DB); \
	psql "$$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c 'DROP DATABASE IF EXISTS "$(YEAR_DATABASE)" WITH (FORCE)' -c 'CREATE DATABASE "$(YEAR_DATABASE)"'; \
	export DATABASE_URL=$$(echo "$$DATABASE_URL" | sed -E 's#^(postgres(ql)?://[^/]*/)[^?]*#\1$(YEAR_DATABASE)#'); \
	$(STOCKHOLD_BIN) migrate up >/dev/null; \
	$(YEAR_FLAGS) docs/bench/year.sh

## bench-compare: build BASE (a commit) and this checkout, run the scenarios BENCH_FLAGS names (as bench takes them) against
## each in alternate rounds on the dev cluster, BENCH_ROUNDS of each (default 3), and print per scenario both medians, head/base
## and each side's spread (lowest–highest round); writes no report
BENCH_ROUNDS ?= 3
bench-compare: build
	@set -eo pipefail; \
	if [ -z "$(BASE)" ]; then echo "usage: make bench-compare BASE=<commit> [BENCH_ROUNDS=3] [BENCH_FLAGS='-scenarios hot,spread']" >&2; exit 2; fi; \
	$(WITH_DB); \
	base=$$(mktemp -d); trap 'rm -rf "$$base"' EXIT; \
	rev=$$(git rev-parse --short "$(BASE)^{commit}"); \
	echo "building $$rev into $$base" >&2; \
	git archive "$$rev" | tar -x -C "$$base"; \
	(cd "$$base" && go build -o "$$base/stockhold-$$rev" ./cmd/stockhold); \
	go build -o bin/stockhold-bench ./cmd/stockhold-bench; \
	bin/stockhold-bench -server $(STOCKHOLD_BIN) -compare "$$base/stockhold-$$rev" -rounds $(BENCH_ROUNDS) $(BENCH_FLAGS)

## drill-failover: a pg_auto_failover formation on this machine (monitor and two nodes, synchronous
## replication; installs postgresql-15-auto-failover when missing), two instances under mixed load,
## kill -9 of the primary's postmaster, a switchover back; checks nothing acknowledged was lost (DRILL_FLAGS)
drill-failover: build
	@set -eo pipefail; \
	go build -o bin/stockhold-drill ./cmd/stockhold-drill; \
	bin/stockhold-drill -server $(STOCKHOLD_BIN) $(DRILL_FLAGS)

## generate: regenerate app/db from queries/ and migrations/ with the pinned sqlc, the Go client from openapi.json, and
## (with npm) the TypeScript client's types (clients/ts/src/schema.d.ts, from its lockfile's openapi-typescript)
generate:
	$(SQLC) generate
	$(OAPI_CODEGEN) -config app/api/apiclient/oapi-codegen.yaml -o app/api/apiclient/client.gen.go app/api/openapi.json
	@if command -v npm >/dev/null; then \
		cd clients/ts && npm ci --no-audit --no-fund --silent && npm run --silent generate; \
	else echo "npm not found: clients/ts/src/schema.d.ts not regenerated (TestTypeScriptClient checks it where Node is installed)"; fi

## check-generate: fail when app/db or the API client is stale
check-generate:
	@$(SQLC) diff || { echo "app/db is stale: run 'make generate' and commit the result" >&2; exit 1; }
	@set -eo pipefail; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(OAPI_CODEGEN) -config app/api/apiclient/oapi-codegen.yaml -o $$tmp/client.gen.go app/api/openapi.json 2>/dev/null; \
	cmp -s $$tmp/client.gen.go app/api/apiclient/client.gen.go || \
	{ echo "app/api/apiclient is stale: run 'make generate' and commit the result" >&2; exit 1; }

## lint: what CI checks besides the tests
lint:
	go vet ./...
	$(STATICCHECK) ./...
	$(TESTIFYLINT) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:" $$out >&2; exit 1; fi

build:
	go build -buildvcs=auto -o $(STOCKHOLD_BIN) ./cmd/stockhold

## db-stop: stop the private dev cluster
db-stop:
	go run ./cmd/devdb stop
