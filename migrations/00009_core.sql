-- stockhold's core: stock rows, holds, their lines, the ledger and API keys.
-- The CHECK constraints are the last line of defence: whatever the code does,
-- the database refuses an oversell or a lost unit.

-- +goose Up
CREATE TABLE stock (
    sku            text        NOT NULL,
    pool           text        NOT NULL,
    total          bigint      NOT NULL DEFAULT 0,
    available      bigint      NOT NULL DEFAULT 0,
    reserved       bigint      NOT NULL DEFAULT 0,
    sold           bigint      NOT NULL DEFAULT 0,
    status         text        NOT NULL DEFAULT 'on_sale',
    paused_reason  text,
    -- version counts the changes to this row; every ledger row carries the
    -- version it produced, so reconciliation can sum the ledger from a
    -- checkpoint instead of from the beginning of time.
    version        bigint      NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, pool),
    CONSTRAINT stock_sku_length CHECK (char_length(sku) BETWEEN 1 AND 64),
    CONSTRAINT stock_pool_length CHECK (char_length(pool) BETWEEN 1 AND 64),
    CONSTRAINT stock_available_nonnegative CHECK (available >= 0),
    CONSTRAINT stock_reserved_nonnegative CHECK (reserved >= 0),
    CONSTRAINT stock_sold_nonnegative CHECK (sold >= 0),
    CONSTRAINT stock_balanced CHECK (total = available + reserved + sold),
    CONSTRAINT stock_status CHECK (status IN ('on_sale', 'paused')),
    CONSTRAINT stock_paused_has_reason CHECK (status = 'on_sale' OR paused_reason IS NOT NULL)
);

COMMENT ON TABLE stock IS 'One row per (sku, pool); pool is main or a campaign id. total = available + reserved + sold, always.';

CREATE TABLE reservations (
    id               uuid        PRIMARY KEY,
    client           text        NOT NULL,
    idempotency_key  text        NOT NULL,
    request_hash     text        NOT NULL,
    order_ref        text,
    campaign         text,
    status           text        NOT NULL DEFAULT 'held',
    expires_at       timestamptz NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    confirmed_at     timestamptz,
    released_at      timestamptz,
    release_reason   text,
    released_by      text,
    CONSTRAINT reservations_idempotency UNIQUE (client, idempotency_key),
    CONSTRAINT reservations_status CHECK (status IN ('held', 'confirmed', 'released', 'expired')),
    CONSTRAINT reservations_key_length CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
    CONSTRAINT reservations_confirmed_at CHECK ((status = 'confirmed') = (confirmed_at IS NOT NULL)),
    CONSTRAINT reservations_released_at CHECK ((status IN ('released', 'expired')) = (released_at IS NOT NULL))
);

COMMENT ON TABLE reservations IS 'One row per hold: held -> confirmed | released | expired, never back.';

-- The sweeper and reconciliation look for held holds past their expiry.
CREATE INDEX reservations_held_expires_at ON reservations (expires_at) WHERE status = 'held';
-- Stats count holds by creation time; rows arrive in time order, so a BRIN
-- index is small and nearly free on insert.
CREATE INDEX reservations_created_at ON reservations USING brin (created_at);
-- Campaign end releases a campaign's unpaid holds.
CREATE INDEX reservations_held_campaign ON reservations (campaign, id) WHERE status = 'held' AND campaign IS NOT NULL;

-- A reservation may never leave a final state: a late payment must not
-- resurrect stock that was handed back.
-- +goose StatementBegin
CREATE FUNCTION reservations_final_states() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status <> 'held' AND NEW.status <> OLD.status THEN
        RAISE EXCEPTION 'reservation % is %, it cannot become %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER reservations_final_states BEFORE UPDATE OF status ON reservations
    FOR EACH ROW EXECUTE FUNCTION reservations_final_states();

CREATE TABLE reservation_lines (
    reservation_id  uuid   NOT NULL REFERENCES reservations (id),
    sku             text   NOT NULL,
    pool            text   NOT NULL,
    quantity        bigint NOT NULL,
    PRIMARY KEY (reservation_id, sku, pool),
    FOREIGN KEY (sku, pool) REFERENCES stock (sku, pool),
    CONSTRAINT reservation_lines_quantity CHECK (quantity > 0)
);

CREATE INDEX reservation_lines_sku_pool ON reservation_lines (sku, pool);

CREATE TABLE ledger (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at               timestamptz NOT NULL DEFAULT now(),
    sku              text        NOT NULL,
    pool             text        NOT NULL,
    kind             text        NOT NULL,
    delta_total      bigint      NOT NULL,
    delta_available  bigint      NOT NULL,
    delta_reserved   bigint      NOT NULL,
    delta_sold       bigint      NOT NULL,
    -- The stock row's version after this change.
    stock_version    bigint      NOT NULL,
    reservation_id   uuid,
    actor            text        NOT NULL,
    reason           text,
    ref              text,
    CONSTRAINT ledger_kind CHECK (kind IN (
        'stock_in', 'adjust', 'reserve', 'confirm', 'release', 'expire',
        'rollback', 'transfer', 'pause', 'resume')),
    CONSTRAINT ledger_balanced CHECK (delta_total = delta_available + delta_reserved + delta_sold)
);

COMMENT ON TABLE ledger IS 'Append-only: one row per change to a stock row. Summed per (sku, pool), the deltas equal the counters.';

CREATE INDEX ledger_sku_id ON ledger (sku, id);
CREATE INDEX ledger_sku_pool_version ON ledger (sku, pool, stock_version);
CREATE INDEX ledger_reservation ON ledger (reservation_id) WHERE reservation_id IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

CREATE TABLE api_keys (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL,
    role          text        NOT NULL,
    token_sha256  bytea       NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CONSTRAINT api_keys_role CHECK (role IN ('shop', 'ops')),
    CONSTRAINT api_keys_name_length CHECK (char_length(name) BETWEEN 1 AND 64)
);

COMMENT ON TABLE api_keys IS 'Bearer tokens, stored only as SHA-256. name is the owner: idempotency keys and holds are scoped to it.';

-- Idempotency records for the POSTs that create something other than a hold
-- (a hold's own row is its record). The stored answer is replayed.
CREATE TABLE idempotency_keys (
    client          text        NOT NULL,
    key             text        NOT NULL,
    request_hash    text        NOT NULL,
    status_code     integer     NOT NULL,
    response        bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, key)
);

-- stock_health holds, per (sku, pool), the counters next to what they must
-- equal: the lines of held and confirmed holds (invariant 2) and the ledger
-- (invariant 3). ok is false where any invariant fails. It sums the whole
-- ledger, so it is for people and tests; reconciliation sums from checkpoints.
CREATE VIEW stock_health AS
WITH lines AS (
    SELECT l.sku, l.pool,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'held'), 0)::bigint      AS held,
           coalesce(sum(l.quantity) FILTER (WHERE r.status = 'confirmed'), 0)::bigint AS confirmed
    FROM reservation_lines l
    JOIN reservations r ON r.id = l.reservation_id
    GROUP BY l.sku, l.pool
), moves AS (
    SELECT sku, pool,
           sum(delta_total)::bigint     AS total,
           sum(delta_available)::bigint AS available,
           sum(delta_reserved)::bigint  AS reserved,
           sum(delta_sold)::bigint      AS sold
    FROM ledger
    GROUP BY sku, pool
)
SELECT s.sku, s.pool, s.status,
       s.total, s.available, s.reserved, s.sold,
       coalesce(l.held, 0)           AS lines_held,
       coalesce(l.confirmed, 0)      AS lines_confirmed,
       coalesce(m.total, 0)          AS ledger_total,
       coalesce(m.available, 0)      AS ledger_available,
       coalesce(m.reserved, 0)       AS ledger_reserved,
       coalesce(m.sold, 0)           AS ledger_sold,
       (s.total = s.available + s.reserved + s.sold
        AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0)                   AS counters_ok,
       (s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0))     AS lines_ok,
       (s.total = coalesce(m.total, 0) AND s.available = coalesce(m.available, 0)
        AND s.reserved = coalesce(m.reserved, 0) AND s.sold = coalesce(m.sold, 0))  AS ledger_ok,
       (s.total = s.available + s.reserved + s.sold
        AND s.available >= 0 AND s.reserved >= 0 AND s.sold >= 0
        AND s.reserved = coalesce(l.held, 0) AND s.sold = coalesce(l.confirmed, 0)
        AND s.total = coalesce(m.total, 0) AND s.available = coalesce(m.available, 0)
        AND s.reserved = coalesce(m.reserved, 0) AND s.sold = coalesce(m.sold, 0)) AS ok
FROM stock s
LEFT JOIN lines l ON l.sku = s.sku AND l.pool = s.pool
LEFT JOIN moves m ON m.sku = s.sku AND m.pool = s.pool;

-- +goose Down
DROP VIEW stock_health;
DROP TABLE idempotency_keys;
DROP TABLE api_keys;
DROP TABLE ledger;
DROP FUNCTION ledger_append_only;
DROP TABLE reservation_lines;
DROP TABLE reservations;
DROP FUNCTION reservations_final_states;
DROP TABLE stock;
