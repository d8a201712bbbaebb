-- Flash-sale campaigns: each has its own stock pool per SKU (stock rows whose
-- pool is the campaign id), filled from main at start and emptied back into
-- main once its unpaid holds are rolled back at the end.

-- +goose Up
CREATE TABLE campaigns (
    id              text        PRIMARY KEY,
    status          text        NOT NULL DEFAULT 'scheduled',
    starts_at       timestamptz NOT NULL,
    ends_at         timestamptz NOT NULL,
    hold_ttl        interval    NOT NULL,
    created_by      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    ended_at        timestamptz,
    ended_by        text,
    end_reason      text,
    rolled_back_at  timestamptz,
    CONSTRAINT campaigns_id CHECK (char_length(id) BETWEEN 1 AND 64 AND id <> 'main'),
    CONSTRAINT campaigns_status CHECK (status IN ('scheduled', 'active', 'ended', 'rolled_back')),
    CONSTRAINT campaigns_window CHECK (ends_at > starts_at),
    CONSTRAINT campaigns_hold_ttl CHECK (hold_ttl BETWEEN interval '1 second' AND interval '7 days')
);

COMMENT ON TABLE campaigns IS 'Flash sales: scheduled -> active -> ended -> rolled_back. Holds naming a campaign draw only from its pool.';

CREATE TABLE campaign_allotments (
    campaign  text   NOT NULL REFERENCES campaigns (id),
    sku       text   NOT NULL,
    quantity  bigint NOT NULL,
    PRIMARY KEY (campaign, sku),
    CONSTRAINT campaign_allotments_quantity CHECK (quantity > 0)
);

-- reservations.campaign has no foreign key on purpose: every hold would take
-- a share lock on the campaign's row, and a flash sale's holds would queue
-- on it. The campaign pool's stock rows are what holds lock.

-- +goose Down
DROP TABLE campaign_allotments;
DROP TABLE campaigns;
