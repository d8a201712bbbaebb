#!/usr/bin/env bash
# A year of a busy shop's history, generated in SQL into a freshly migrated
# database (DATABASE_URL): CATALOGUE SKUs (sp-00000000 ...) at one location
# and pool, the ledger's twelve monthly partitions before the current month
# filled, and the stock rows as that history leaves them, so that
# reconciliation (incremental, full and deep) finds the books balanced.
#
#   - the oldest month: a stock_in of STOCK units for every SKU;
#   - each of the eleven months after it: HOLDS holds of one unit, each a
#     reserve row and, ten minutes later, a confirm (SKUs whose number is a
#     multiple of CONFIRM_EVERY, 20) or a release; month m holds the SKUs
#     from m * HOLDS on, round the catalogue, so each SKU is held about
#     11 * HOLDS / CATALOGUE times in the year.
#
# With the defaults (10,000,000 SKUs, 3,000,000 holds a month) that is
# 76,000,000 ledger rows, 31 GB: a ledger row takes about 410 bytes with
# the ledger's indexes (282 of heap), so HOLDS=4100000, 100,200,000 rows,
# takes 39 GB. Each month is one transaction: the partition is
# made, filled, indexed (the ledger's indexes built once, after the rows)
# and attached, then vacuumed. Under wal_level = minimal (and
# max_wal_senders = 0) a table made and filled in one transaction writes no
# WAL, which roughly halves the load; the history is the same either way.
# A confirmed hold keeps its reservations row and line (retention deletes
# only the holds that ended unconfirmed, whose rows the history has none
# of): one in CONFIRM_EVERY, 1.65 million, about 0.9 GB.
#
# It stops when the file system of the cluster's data directory has less
# than MIN_FREE_GB free (12 by default).
#
#   make bench-year                                  # 10,000,000 SKUs, 76 million rows
#   make bench-year YEAR_FLAGS='CATALOGUE=10000 HOLDS=4100'   # a small one
set -euo pipefail

: "${DATABASE_URL:?DATABASE_URL names the database to fill}"
CATALOGUE=${CATALOGUE:-10000000}
HOLDS=${HOLDS:-3000000}
STOCK=${STOCK:-1000000}
CONFIRM_EVERY=${CONFIRM_EVERY:-20}
MIN_FREE_GB=${MIN_FREE_GB:-12}
CHUNK=1000000

say() { echo "year: $(date -u +%T) $*"; }
sql() { psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }

datadir=$(sql -Atc "SHOW data_directory" 2>/dev/null || true)
check_disk() {
    local dir=${datadir:-/}
    [ -d "$dir" ] || dir=/
    local free
    free=$(df --output=avail -k "$dir" | tail -1)
    if [ "$free" -lt $((MIN_FREE_GB * 1024 * 1024)) ]; then
        say "only $((free / 1024 / 1024)) GB free under $dir (MIN_FREE_GB=$MIN_FREE_GB): stopping"
        exit 1
    fi
    echo "$((free / 1024 / 1024)) GB free"
}

if [ "$(sql -Atc "SELECT count(*) FROM stock")" != 0 ]; then
    echo "year: the database already has stock rows: give it a freshly migrated one" >&2
    exit 2
fi

# The twelve months before the current one (UTC), oldest first.
first=$(sql -Atc "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC') - interval '12 months', 'YYYY-MM-DD')")
say "history of $CATALOGUE SKUs, $HOLDS holds a month, from $first; $(check_disk)"

# The partition from MINVALUE (made by the migrations, empty) ends where
# the history begins instead.
sql -c "
DO \$\$
DECLARE
    old text;
    first timestamptz := '$first 00:00:00+00';
    name text := 'ledger_before_' || to_char(first AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
    SELECT c.relname INTO old FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ledger'::regclass AND pg_get_expr(c.relpartbound, c.oid) LIKE 'FOR VALUES FROM (MINVALUE)%';
    IF EXISTS (SELECT 1 FROM ledger WHERE at < first + interval '12 months') THEN
        RAISE EXCEPTION 'the ledger has rows before the current month';
    END IF;
    EXECUTE format('ALTER TABLE ledger DETACH PARTITION %I', old);
    EXECUTE format('DROP TABLE %I', old);
    EXECUTE format('CREATE TABLE %I (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION)', name);
    EXECUTE format('CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON %I FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only()', name);
    EXECUTE format('ALTER TABLE ledger ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', name, first);
END
\$\$;"

# month k (0 = the oldest): makes, fills, indexes and attaches its partition.
month() {
    local k=$1 rows=$2
    local start part
    start=$(sql -Atc "SELECT to_char('$first'::date + make_interval(months => $k), 'YYYY-MM-DD')")
    part="ledger_$(sql -Atc "SELECT to_char('$start'::date, 'YYYY_MM')")"
    next=$(sql -Atc "SELECT to_char('$start'::date + interval '1 month', 'YYYY-MM-DD')")
    sql <<SQL
SET synchronous_commit = off;
SET maintenance_work_mem = '1GB';
BEGIN;
CREATE TABLE $part (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION);
INSERT INTO $part (id, at, sku, location, pool, kind, delta_total, delta_available, delta_reserved, delta_sold,
                   stock_version, reservation_id, actor, reason, total_after, available_after, reserved_after, sold_after,
                   quality_control_after, damaged_after, safety_stock_after, incoming_after)
$rows;
ALTER TABLE $part ADD PRIMARY KEY (id, at);
CREATE INDEX ON $part USING brin (at);
CREATE INDEX ON $part (feed_xid, id) WHERE feed_xid IS NOT NULL;
CREATE INDEX ON $part (reservation_id) WHERE reservation_id IS NOT NULL;
CREATE INDEX ON $part (sku, id);
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON $part FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();
ALTER TABLE ledger ATTACH PARTITION $part FOR VALUES FROM ('$start 00:00:00+00') TO ('$next 00:00:00+00');
COMMIT;
VACUUM (ANALYZE) $part;
SQL
    say "$part: $(sql -Atc "SELECT count(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('$part')) FROM $part"); $(check_disk)"
}

# The oldest month: a stock_in per SKU, spread over 27 days.
month 0 "SELECT nextval('ledger_id_seq'), '$first 00:00:00+00'::timestamptz + i * (27 * 86400.0 / $CATALOGUE) * interval '1 second',
       'sp-' || lpad(i::text, 8, '0'), 'default', 'main', 'stock_in', $STOCK, $STOCK, 0, 0,
       1, NULL, 'bench', 'a year of history', $STOCK, $STOCK, 0, 0, 0, 0, 0, 0
FROM generate_series(0, $CATALOGUE - 1) i"

# Month m: hold j is at position p = m * HOLDS + j of the catalogue, round
# and round: SKU s = p % CATALOGUE, held k = (p - HOLDS) / CATALOGUE times
# before (the positions of the months before it fall HOLDS, 2 * HOLDS, ...
# from the start), confirmed each time when s % CONFIRM_EVERY = 0.
# the holds of month m, as a FROM clause: j, and h (s, k, conf, c, t).
holds() {
    local m=$1
    echo "FROM generate_series(0, $HOLDS - 1) j
CROSS JOIN LATERAL (SELECT p % $CATALOGUE AS s, (p - $HOLDS) / $CATALOGUE AS k, p % $CATALOGUE % $CONFIRM_EVERY = 0 AS conf,
                           CASE WHEN p % $CATALOGUE % $CONFIRM_EVERY = 0 THEN (p - $HOLDS) / $CATALOGUE ELSE 0 END AS c,
                           '$first 00:00:00+00'::timestamptz + make_interval(months => $m) + j * (27 * 86400.0 / $HOLDS) * interval '1 second' AS t
                    FROM (SELECT $m::bigint * $HOLDS + j AS p) x) h"
}
for m in $(seq 1 11); do
    month "$m" "SELECT nextval('ledger_id_seq'),
       h.t + r * interval '10 minutes',
       'sp-' || lpad(h.s::text, 8, '0'), 'default', 'main',
       CASE WHEN r = 0 THEN 'reserve' WHEN h.conf THEN 'confirm' ELSE 'release' END,
       0,
       CASE WHEN r = 0 THEN -1 WHEN h.conf THEN 0 ELSE 1 END,
       CASE WHEN r = 0 THEN 1 ELSE -1 END,
       CASE WHEN r = 1 AND h.conf THEN 1 ELSE 0 END,
       2 + 2 * h.k + r, md5($m || ':' || j)::uuid, 'bench', NULL,
       $STOCK,
       $STOCK - h.c - 1 + CASE WHEN r = 1 AND NOT h.conf THEN 1 ELSE 0 END,
       1 - r,
       h.c + CASE WHEN r = 1 AND h.conf THEN 1 ELSE 0 END,
       0, 0, 0, 0
$(holds "$m")
CROSS JOIN generate_series(0, 1) r"
done

# The stock rows as the year leaves them: SKU s was held K times, K the
# positions below 12 * HOLDS that fall on it less those below HOLDS.
for ((from = 0; from < CATALOGUE; from += CHUNK)); do
    to=$((from + CHUNK < CATALOGUE ? from + CHUNK : CATALOGUE))
    sql -c "SET synchronous_commit = off" -c "
INSERT INTO stock (sku, location, pool, total, available, sold, version, feed_xid, created_at)
SELECT 'sp-' || lpad(s::text, 8, '0'), 'default', 'main', $STOCK, $STOCK - c, c, 1 + 2 * n, pg_current_xact_id(), '$first 00:00:00+00'
FROM generate_series($from::bigint, $to::bigint - 1) s
CROSS JOIN LATERAL (SELECT CASE WHEN 12::bigint * $HOLDS > s THEN (12::bigint * $HOLDS - s + $CATALOGUE - 1) / $CATALOGUE ELSE 0 END
                         - CASE WHEN $HOLDS::bigint > s THEN ($HOLDS::bigint - s + $CATALOGUE - 1) / $CATALOGUE ELSE 0 END AS n) k
CROSS JOIN LATERAL (SELECT CASE WHEN s % $CONFIRM_EVERY = 0 THEN k.n ELSE 0 END AS c) x"
    say "stock rows $from-$((to - 1))"
done
# The confirmed holds, a month a transaction.
for m in $(seq 1 11); do
    sql -c "SET synchronous_commit = off" -c "INSERT INTO reservations (id, client, idempotency_key, request_hash, status, expires_at, created_at, updated_at, confirmed_at)
SELECT md5($m || ':' || j)::uuid, 'bench-shop', 'year-$m-' || j, 'year', 'confirmed', h.t + interval '15 minutes', h.t,
       h.t + interval '10 minutes', h.t + interval '10 minutes'
$(holds "$m")
WHERE h.conf;
INSERT INTO reservation_lines (reservation_id, sku, location, pool, quantity)
SELECT md5($m || ':' || j)::uuid, 'sp-' || lpad(h.s::text, 8, '0'), 'default', 'main', 1
$(holds "$m")
WHERE h.conf;"
    say "confirmed holds of month $m: $(sql -Atc "SELECT count(*) FROM reservations")"
done
sql -c "VACUUM (ANALYZE) stock, reservations, reservation_lines"
say "done: $(sql -Atc "SELECT count(*) FROM ledger") ledger rows, $(sql -Atc "SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) FROM pg_inherits WHERE inhparent = 'ledger'::regclass"), stock $(sql -Atc "SELECT pg_size_pretty(pg_total_relation_size('stock'))"); $(check_disk)"
