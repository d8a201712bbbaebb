-- One rule for every change to a hold: the service locks the
-- holds, reads their lines in a later statement, decides in Go, and writes
-- the decision in one statement whose stock UPDATE is conditional on the
-- counters it expects. stockhold_check is how that statement (and the hold
-- batch's) refuses to commit anything other than what was decided: given
-- the problems it found (null or empty: none), it raises SQLSTATE SH001 and
-- the transaction rolls back whole.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION stockhold_check(problems text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF problems IS NOT NULL AND problems <> '' THEN
        RAISE EXCEPTION 'stockhold: the database refused a change: %', problems
            USING ERRCODE = 'SH001',
                  HINT = 'the counters, the holds or their lines are not what the service decided on; nothing was written';
    END IF;
    RETURN true;
END;
$$;
-- +goose StatementEnd

COMMENT ON FUNCTION stockhold_check(text) IS 'Raises SQLSTATE SH001 (rolling the transaction back) when a change statement finds problems: what it decided does not match the rows it locked.';

-- +goose Down
DROP FUNCTION stockhold_check(text);
