-- Limits on what one hold, and one customer, may take of a SKU's pool:
--
--   sku_limits   per (sku, pool), at every location together: at most
--                max_per_order and at least min_per_order units in one
--                hold, in multiples of step (a pack size), and at most
--                max_per_customer units held or bought by one customer
--                (reservations.customer_ref) over the last
--                customer_window_seconds (null: ever). A hold batch reads
--                a pool's limits with its stock rows' lock.
--   reservations.customer_ref
--                who the hold is for, as the shop names them: what
--                max_per_customer counts by.
--   campaigns.max_per_customer, campaigns.customer_window_seconds
--                a campaign's own cap per customer on each of its SKUs
--                (a SKU's limits on the campaign's pool win).
--
-- Catalog-only changes under a short lock timeout: a new table, nullable
-- columns without defaults. 00148 builds the customers' index.

-- +goose Up
SET LOCAL lock_timeout = '5s';

CREATE TABLE sku_limits (
    sku                      text        NOT NULL,
    pool                     text        NOT NULL,
    max_per_order            bigint,
    min_per_order            bigint,
    step                     bigint,
    max_per_customer         bigint,
    customer_window_seconds  bigint,
    set_by                   text        NOT NULL,
    set_at                   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sku, pool),
    CONSTRAINT sku_limits_max_per_order CHECK (max_per_order BETWEEN 1 AND 1000000),
    CONSTRAINT sku_limits_min_per_order CHECK (min_per_order BETWEEN 1 AND 1000000),
    CONSTRAINT sku_limits_step CHECK (step BETWEEN 1 AND 1000000),
    CONSTRAINT sku_limits_max_per_customer CHECK (max_per_customer BETWEEN 1 AND 1000000),
    CONSTRAINT sku_limits_customer_window CHECK (customer_window_seconds BETWEEN 1 AND 31622400),
    CONSTRAINT sku_limits_window_has_cap CHECK (customer_window_seconds IS NULL OR max_per_customer IS NOT NULL),
    CONSTRAINT sku_limits_min_le_max CHECK (min_per_order <= max_per_order),
    CONSTRAINT sku_limits_some CHECK (num_nonnulls(max_per_order, min_per_order, step, max_per_customer) > 0)
);

COMMENT ON TABLE sku_limits IS 'Limits per hold and per customer on a SKU''s pool, across its locations: a row only while some limit is set.';

ALTER TABLE reservations ADD COLUMN customer_ref text;
ALTER TABLE reservations ADD CONSTRAINT reservations_customer_ref CHECK (char_length(customer_ref) BETWEEN 1 AND 255) NOT VALID;
COMMENT ON COLUMN reservations.customer_ref IS 'Who the hold is for, as the shop names them: max_per_customer counts their held and confirmed units.';

ALTER TABLE campaigns ADD COLUMN max_per_customer bigint,
    ADD COLUMN customer_window_seconds bigint,
    ADD CONSTRAINT campaigns_max_per_customer CHECK (max_per_customer BETWEEN 1 AND 1000000),
    ADD CONSTRAINT campaigns_customer_window CHECK (customer_window_seconds IS NULL
        OR (customer_window_seconds BETWEEN 1 AND 31622400 AND max_per_customer IS NOT NULL));

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE campaigns DROP COLUMN customer_window_seconds, DROP COLUMN max_per_customer;
ALTER TABLE reservations DROP COLUMN customer_ref;
DROP TABLE sku_limits;
