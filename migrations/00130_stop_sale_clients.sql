-- Stop-sale for one channel: a switch per client (the API key
-- owner's name a hold records), beside the switch for everything.

-- +goose Up

-- stop_sale_clients holds a switch per client: while active, every new
-- hold by that client's keys is refused (503 stop_sale) and other clients'
-- holds go on. A hold batch reads the rows of its clients in the same
-- later statement as the switch for everything, after its share of the
-- stop-sale lock; a flip of either takes that lock exclusively, so the
-- switch for everything's guarantee holds per client too. A new, small
-- table: no lock on anything large.
CREATE TABLE stop_sale_clients (
    client     text        PRIMARY KEY,
    active     boolean     NOT NULL DEFAULT false,
    reason     text,
    actor      text        NOT NULL,
    actor_key  text,
    -- rule names the automatic trip that set it; null when a person did.
    rule       text,
    changed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT stop_sale_clients_reason CHECK (NOT active OR reason IS NOT NULL)
);

COMMENT ON TABLE stop_sale_clients IS 'Stop-sale for one client (an API key owner): while active, new holds by its keys are refused (503 stop_sale); other clients, confirms, releases and reads go on.';

-- +goose Down
DROP TABLE stop_sale_clients;
