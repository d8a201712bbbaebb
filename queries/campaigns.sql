-- name: CampaignGet :one
SELECT * FROM campaigns WHERE id = @id;

-- name: CampaignHoldTerms :one
-- CampaignHoldTerms tells a hold whether the campaign takes holds now, and
-- for how long they last.
SELECT coalesce(status = 'active' AND now() >= starts_at AND now() < ends_at, false)::boolean AS open,
       status,
       extract(epoch FROM hold_ttl)::bigint AS hold_ttl_seconds
FROM campaigns
WHERE id = @id;
