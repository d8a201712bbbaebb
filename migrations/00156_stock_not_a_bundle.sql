-- A bundle has no stock of its own: it is held as its components. Its
-- definition is refused for a SKU with stock (checked under the lock of
-- the bundles table, SHARE ROW EXCLUSIVE); this trigger refuses the other
-- way round, a stock row for a SKU that is a bundle, whichever write
-- makes it (an adjustment, a receipt, an inbound notice, a transfer, a
-- count, units).
--
-- A SKU that already has a stock row is no bundle (its definition would
-- have been refused), so only a SKU's first rows look further: they take
-- ROW EXCLUSIVE on bundles, which a definition's lock waits for and which
-- waits for a definition, so the two see each other's commit and no SKU
-- ends up both. Holds never insert stock rows, and read bundles under
-- ACCESS SHARE: they never wait for this.
--
-- Refused with check_violation, constraint stock_not_a_bundle, the SKU in
-- the detail: the API answers 422 invalid_request.

-- +goose Up
SET LOCAL lock_timeout = '5s';
-- +goose StatementBegin
CREATE FUNCTION stock_not_a_bundle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM stock s WHERE s.sku = NEW.sku) THEN
        RETURN NEW;
    END IF;
    LOCK TABLE bundles IN ROW EXCLUSIVE MODE;
    IF EXISTS (SELECT 1 FROM bundles b WHERE b.sku = NEW.sku) THEN
        RAISE EXCEPTION 'SKU % is a bundle: it has no stock of its own', NEW.sku
            USING ERRCODE = 'check_violation', CONSTRAINT = 'stock_not_a_bundle', DETAIL = NEW.sku;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER stock_not_a_bundle BEFORE INSERT ON stock
    FOR EACH ROW EXECUTE FUNCTION stock_not_a_bundle();

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP TRIGGER stock_not_a_bundle ON stock;
DROP FUNCTION stock_not_a_bundle();
