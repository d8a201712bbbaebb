-- name: CampaignGet :one
SELECT * FROM campaigns WHERE id = @id;

-- name: CampaignHoldTerms :one
-- CampaignHoldTerms tells a hold whether the campaign takes holds now, for
-- how long they last, how many units of one SKU one hold may take and one
-- customer may hold (over how long a window).
SELECT coalesce(status = 'active' AND now() >= starts_at AND now() < ends_at, false)::boolean AS open,
       status,
       extract(epoch FROM hold_ttl)::bigint AS hold_ttl_seconds,
       max_per_order, max_per_customer, customer_window_seconds
FROM campaigns
WHERE id = @id;

-- name: CampaignHoldTermsShared :one
-- CampaignHoldTermsShared is CampaignHoldTerms with the campaign's row
-- locked FOR SHARE until the transaction ends: a resume of its pool reads
-- the status an end committed (the end locks the row first, then pauses
-- the pool's rows), and an end waits for a resume under way.
SELECT coalesce(status = 'active' AND now() >= starts_at AND now() < ends_at, false)::boolean AS open,
       status
FROM campaigns
WHERE id = @id
FOR SHARE;

-- name: CampaignCreate :one
INSERT INTO campaigns (id, starts_at, ends_at, hold_ttl, created_by, max_per_order, max_per_customer, customer_window_seconds)
VALUES (@id, @starts_at, @ends_at, interval '1 second' * @hold_ttl_seconds::bigint, @created_by,
        sqlc.narg('max_per_order')::bigint, sqlc.narg('max_per_customer')::bigint, sqlc.narg('customer_window_seconds')::bigint)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: CampaignAllotmentsInsert :exec
-- CampaignAllotmentsInsert records a campaign's allotments; units holds
-- each one's named units as a JSON array, or null.
INSERT INTO campaign_allotments (campaign, sku, location, quantity, units)
SELECT @campaign, unnest(@skus::text[]), unnest(@locations::text[]), unnest(@quantities::bigint[]), unnest(@units::jsonb[]);

-- name: CampaignAllotments :many
-- In (sku, location) byte order: campaign start locks the stock rows of
-- each in turn.
SELECT * FROM campaign_allotments WHERE campaign = @campaign ORDER BY sku COLLATE "C", location COLLATE "C";

-- name: CampaignLock :one
SELECT * FROM campaigns WHERE id = @id FOR UPDATE;

-- name: CampaignSetStatus :one
-- CampaignSetStatus moves a campaign along scheduled -> active -> ended ->
-- rolled_back, stamping the time of each step.
UPDATE campaigns
SET status = @status,
    started_at = CASE WHEN @status = 'active' THEN now() ELSE started_at END,
    ended_at = CASE WHEN @status = 'ended' THEN now() ELSE ended_at END,
    ended_by = CASE WHEN @status = 'ended' THEN sqlc.narg('ended_by') ELSE ended_by END,
    end_reason = CASE WHEN @status = 'ended' THEN sqlc.narg('end_reason') ELSE end_reason END,
    ended_key = CASE WHEN @status = 'ended' THEN sqlc.narg('ended_key') ELSE ended_key END,
    rolled_back_at = CASE WHEN @status = 'rolled_back' THEN now() ELSE rolled_back_at END,
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: CampaignPools :many
-- In (sku, location) byte order: campaign end and finish lock each row in
-- turn.
SELECT * FROM stock WHERE pool = @campaign ORDER BY sku COLLATE "C", location COLLATE "C";

-- name: CampaignHeldCount :one
SELECT count(*)::int AS holds FROM reservations WHERE campaign = @campaign AND status = 'held';

-- name: CampaignLiveJob :one
-- CampaignLiveJob returns the newest job of kind (campaign_start or
-- campaign_end) for the campaign that is still to run or running; no row
-- means its next step has no job.
SELECT j.id
FROM river_job j
WHERE j.kind = @kind
  AND j.args @> jsonb_build_object('campaign', @campaign::text)
  AND j.state IN ('available', 'pending', 'running', 'retryable', 'scheduled')
ORDER BY j.id DESC
LIMIT 1;

-- name: CampaignStepJobsCancel :execrows
-- CampaignStepJobsCancel cancels the campaign_start and campaign_end jobs
-- still waiting to run for a campaign that has just ended: they would find
-- it ended and do nothing, and until then they sit in the job backlog as
-- work to come.
UPDATE river_job
SET state = 'cancelled', finalized_at = now()
WHERE kind IN ('campaign_start', 'campaign_end')
  AND state IN ('available', 'scheduled', 'retryable')
  AND args @> jsonb_build_object('campaign', @campaign::text);

-- name: CampaignsEnded :many
-- CampaignsEnded returns those of pools that are the pools of a campaign
-- that has ended (ended, or rolled_back once its end finished), with the
-- campaign's status: such a pool takes no new stock and gives none.
SELECT id, status FROM campaigns
WHERE id = ANY(@pools::text[]) AND status IN ('ended', 'rolled_back')
ORDER BY id COLLATE "C";
