package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/campaigns"
)

// campaignStartWorker opens a campaign at its starts_at; when main lacks
// the stock it alerts and fails, so the start is retried.
type campaignStartWorker struct {
	river.WorkerDefaults[campaigns.CampaignStartArgs]
	campaigns *campaigns.Service
}

func (w *campaignStartWorker) Work(ctx context.Context, job *river.Job[campaigns.CampaignStartArgs]) error {
	return w.campaigns.Start(ctx, job.Args.Campaign)
}

// campaignEndWorker closes a campaign at its ends_at and starts its
// rollback; a campaign ended early by an operator is left as it is.
type campaignEndWorker struct {
	river.WorkerDefaults[campaigns.CampaignEndArgs]
	campaigns *campaigns.Service
}

func (w *campaignEndWorker) Work(ctx context.Context, job *river.Job[campaigns.CampaignEndArgs]) error {
	_, err := w.campaigns.End(ctx, job.Args.Campaign, "", "")
	return err
}
