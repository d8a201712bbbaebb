package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/config"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/app/partitions"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/reports"
	"github.com/stockhold/stockhold/app/retention"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
	"github.com/stockhold/stockhold/app/trips"
	"github.com/stockhold/stockhold/app/webhooks"
	"github.com/stockhold/stockhold/jobs"
)

// Services is every domain service of a process: the wiring's one
// container, built by NewServices. The HTTP layer, the console, the
// commands and the job workers (Workers) all act through it.
type Services struct {
	Inventory *inventory.Service
	Alerts    *alerts.Service
	Rollbacks *rollbacks.Service
	Campaigns *campaigns.Service
	Reconcile *reconcile.Service
	// Retention is nil when STOCKHOLD_RETENTION is 0.
	Retention *retention.Service
	Webhooks  *webhooks.Service
	// Trips checks the protection switch's rules (see app/trips).
	Trips *trips.Service
	// Reports answers the daily report (see app/reports).
	Reports *reports.Service
	// Partitions keeps the ledger's monthly partitions (see app/partitions).
	Partitions *partitions.Service
}

// Workers is what the job workers call: the same services.
func (s *Services) Workers() jobs.Deps {
	return jobs.Deps{Inventory: s.Inventory, Alerts: s.Alerts, Rollbacks: s.Rollbacks, Campaigns: s.Campaigns,
		Reconcile: s.Reconcile, Retention: s.Retention, Webhooks: s.Webhooks, Partitions: s.Partitions}
}

// NewServices builds the domain services on pool, configured by cfg (from
// config.Load, or config.Defaults in tests); they enqueue their jobs with
// inserter inside their own transactions.
func NewServices(cfg config.Config, pool *pgxpool.Pool, inserter *river.Client[pgx.Tx], log *slog.Logger) *Services {
	alertSvc := alerts.New(pool, inserter, cfg.AlertWebhook != "").WithRepageAfter(cfg.AlertRepageAfter)
	inv := inventory.New(pool, log, inventory.Config{
		Serial: !cfg.Coalesce, MaxBatch: cfg.BatchSize, Flights: cfg.BatchFlights,
		LockTimeout: cfg.LockTimeout, ExpiryTick: cfg.ExpiryTick, SoldOutRecheck: offBelowZero(cfg.SoldOutRecheck),
		AllocationMemory: offBelowZero(cfg.AllocationMemory), Recorder: metrics.Recorder{},
		Strategy: inventory.Strategy(cfg.Strategy),
		Alert: func(ctx context.Context, a stock.Alert) {
			level := a.Level
			if level == "" {
				level = alerts.Critical
			}
			_, err := alertSvc.Raise(ctx, alerts.Raise{Level: level, Kind: a.Kind, Subject: a.Subject, SKU: a.SKU, Location: a.Location, Pool: a.Pool,
				Details: a.Details, Action: a.Summary})
			if err != nil {
				log.ErrorContext(ctx, "raise alert", "kind", a.Kind, "err", err)
			}
		},
	})
	rollbackSvc := rollbacks.New(pool, inserter, inv, cfg.RollbackPause)
	campaignSvc := campaigns.New(pool, inserter, inv, rollbackSvc, alertSvc)
	var keep *retention.Service
	if cfg.Retention > 0 {
		keep = retention.New(pool, retention.Config{After: cfg.Retention, Budget: jobs.RetentionBudget, Log: log})
	}
	return &Services{
		Trips: trips.New(pool, inv, alertSvc, trips.Config{
			Interval: cfg.TripInterval, LockWaits: int64(cfg.TripLockWaits), ExpiryBacklog: int64(cfg.TripExpiryBacklog),
			ConfirmP99: cfg.TripConfirmP99, Periods: cfg.TripPeriods, StopSale: cfg.TripStopSale, Log: log,
		}),
		Webhooks: webhooks.New(pool, inserter, alertSvc, webhooks.Config{
			AllowPrivate: cfg.WebhookAllowPrivate, RetryBase: cfg.RetryBase, Log: log, Recorder: metrics.Recorder{},
		}),
		Retention:  keep,
		Reports:    reports.New(pool),
		Partitions: partitions.New(pool, log).WithArchive(cfg.LedgerArchiveAfter, cfg.LedgerArchiveDir),
		Inventory:  inv,
		Alerts:     alertSvc,
		Rollbacks:  rollbackSvc,
		Campaigns:  campaignSvc,
		Reconcile: reconcile.New(pool, inserter, alertSvc, inv, reconcile.Config{
			RepairLimit: cfg.ReconcileRepairLimit,
			// A hold is stuck once the sweeper has had a full interval past
			// its own grace to release it.
			StuckGrace: max(cfg.SweepGrace+cfg.SweepInterval, time.Minute),
			Rollbacks:  rollbackSvc,
			Campaigns:  campaignSvc,
			FullEvery:  cfg.ReconcileFullInterval,
			DeepEvery:  cfg.ReconcileDeepInterval,
			Log:        log,
		}),
	}
}

// Standalone builds the domain services on pool with an insert-only River
// client of its own: what a command needs to act through the domain (a
// rollback, a reconciliation) without workers, HTTP or the job dashboard.
func Standalone(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*Services, error) {
	inserter, err := jobs.NewInserter(pool)
	if err != nil {
		return nil, fmt.Errorf("river inserter: %w", err)
	}
	return NewServices(cfg, pool, inserter, log), nil
}

// offBelowZero is a memory's bound (STOCKHOLD_SOLDOUT_RECHECK,
// STOCKHOLD_ALLOCATION_MEMORY) as inventory.Config takes it: 0 (off)
// becomes below zero, since zero there means the default.
func offBelowZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
