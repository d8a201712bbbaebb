-- Events from the ledger: the ledger is the outbox of stock.changed,
-- hold.* and stock.* events, read in order by GET /v1/events and pushed to
-- webhooks; low-stock thresholds; partial releases; flash-sale caps.

-- +goose Up

-- The feed's order. A ledger row's place in the event feed is
-- (feed_xid, id). Ledger ids are assigned at insert, but transactions commit
-- out of order, so reading "id > cursor" can skip a row a slower transaction
-- commits later with a smaller id. Transaction ids can be waited for: once
-- pg_snapshot_xmin(pg_current_snapshot()) has passed an xid, every
-- transaction with an xid below it has ended and no row with that xid can
-- appear any more. But the xid order is not the order in which transactions
-- changed one stock row (a transaction may get its xid, then wait for a row
-- another, younger one holds). So each stock row keeps the greatest xid that
-- changed it (stock.feed_xid, updated by the statement that changes the
-- counters, under the row's lock) and each ledger row carries its stock
-- row's feed_xid after the change: along one stock row both feed_xid and id
-- grow with every change, so the feed is in order per (sku, pool), and a
-- row is served only once its feed_xid is below the snapshot's xmin, so no
-- row can later appear before a position already served.
ALTER TABLE stock ADD COLUMN feed_xid xid8;
COMMENT ON COLUMN stock.feed_xid IS 'The greatest transaction id that changed this row: the event feed position of its next ledger rows (see ledger.feed_xid).';

-- Counters after the change: every ledger row written by one statement for
-- one stock row (rows sharing a stock_version) carries the row's counters
-- once the statement has changed it, which is what stock.changed reports.
ALTER TABLE ledger
    ADD COLUMN feed_xid        xid8,
    ADD COLUMN total_after     bigint,
    ADD COLUMN available_after bigint,
    ADD COLUMN reserved_after  bigint,
    ADD COLUMN sold_after      bigint;

COMMENT ON COLUMN ledger.feed_xid IS 'Event feed position (feed_xid, id): the stock row''s feed_xid after this change. Null for movements recorded before events existed (they are not in the feed).';
COMMENT ON COLUMN ledger.total_after IS 'The stock row''s total after the statement that wrote this row; likewise available_after, reserved_after, sold_after.';

-- A row written without them (by hand, say) still joins the feed, at its
-- own transaction's xid; it only lacks the counters of a stock.changed.
-- (SET DEFAULT after ADD COLUMN: the rows already there keep null, with no
-- rewrite of the table.)
ALTER TABLE ledger ALTER COLUMN feed_xid SET DEFAULT pg_current_xact_id();

-- Partial releases (POST /v1/reservations/{id}/release with items) hand back
-- some units of a held reservation; the hold stays held. The old list is a
-- subset of the new one, so the rows already there need no check.
ALTER TABLE ledger DROP CONSTRAINT ledger_kind;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind CHECK (kind IN (
    'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'release_partial', 'expire',
    'rollback', 'transfer', 'pause', 'resume')) NOT VALID;

CREATE INDEX ledger_feed ON ledger (feed_xid, id) WHERE feed_xid IS NOT NULL;

-- Low-stock thresholds: stock.low is sent once per crossing, when a change
-- takes available from above a pool's threshold to at or below it. The
-- current threshold is on the stock row (for people); the history says
-- which threshold applied to each change (from_version: the first stock
-- version it applies to), so an event read again is the same event.
ALTER TABLE stock ADD COLUMN low_threshold bigint,
    ADD CONSTRAINT stock_low_threshold CHECK (low_threshold >= 0);

CREATE TABLE stock_thresholds (
    sku           text        NOT NULL,
    pool          text        NOT NULL,
    from_version  bigint      NOT NULL,
    -- Null: no threshold from this version on.
    threshold     bigint,
    set_by        text        NOT NULL,
    set_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, pool, from_version),
    FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool),
    CONSTRAINT stock_thresholds_threshold CHECK (threshold >= 0)
);

COMMENT ON TABLE stock_thresholds IS 'Low-stock thresholds of each (sku, pool) over time: the one with the greatest from_version <= a ledger row''s stock_version applied to it.';

-- Webhook subscriptions. The secret signs every delivery, so it is kept as
-- is (an HMAC key cannot be stored as a hash); it is shown once, when the
-- subscription is made. The cursor is the last event the receiver
-- acknowledged (a 2xx answer): delivery resumes after it.
CREATE TABLE webhooks (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url               text        NOT NULL,
    events            text[]      NOT NULL,
    secret            text        NOT NULL,
    created_by        text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    cursor_xid        xid8        NOT NULL,
    cursor_id         bigint      NOT NULL,
    cursor_n          integer     NOT NULL,
    -- The last acknowledged delivery, and how many events went out in all.
    delivered_at      timestamptz,
    delivered_events  bigint      NOT NULL DEFAULT 0,
    -- Failed attempts at the batch now due (reset by a success); at the
    -- third a critical alert is raised and retries slow down.
    failures          integer     NOT NULL DEFAULT 0,
    failing_since     timestamptz,
    last_error        text,
    CONSTRAINT webhooks_url CHECK (char_length(url) BETWEEN 1 AND 2048),
    CONSTRAINT webhooks_events CHECK (cardinality(events) >= 1)
);

COMMENT ON TABLE webhooks IS 'Webhook subscriptions to the event feed: where events go, which types, and the last event each receiver acknowledged.';

-- Flash-sale caps: at most this many units of one SKU in one hold.
ALTER TABLE campaigns ADD COLUMN max_per_order bigint,
    ADD CONSTRAINT campaigns_max_per_order CHECK (max_per_order BETWEEN 1 AND 1000000);

-- +goose Down
ALTER TABLE campaigns DROP COLUMN max_per_order;
DROP TABLE webhooks;
DROP TABLE stock_thresholds;
ALTER TABLE stock DROP COLUMN low_threshold;
DROP INDEX ledger_feed;
ALTER TABLE ledger DROP CONSTRAINT ledger_kind;
ALTER TABLE ledger ADD CONSTRAINT ledger_kind CHECK (kind IN (
    'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'expire',
    'rollback', 'transfer', 'pause', 'resume')) NOT VALID;
ALTER TABLE ledger
    DROP COLUMN sold_after,
    DROP COLUMN reserved_after,
    DROP COLUMN available_after,
    DROP COLUMN total_after,
    DROP COLUMN feed_xid;
ALTER TABLE stock DROP COLUMN feed_xid;
