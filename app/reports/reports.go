// Package reports answers the daily report the on-call checklist asks for:
// per (sku, pool) and per campaign, the units held, confirmed, released,
// expired, rolled back and adjusted on one business day, with the
// reconciliation runs of that day and what they found. It reads the
// ledger, which is never deleted, so a report can be asked for any day
// the ledger covers, as long as the ledger is kept.
package reports

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// Page sizes and bounds.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxCampaigns bounds the campaigns one report lists.
	MaxCampaigns = 1000
	// MaxRuns bounds the runs with findings one report lists, and
	// MaxFindings the findings listed per run (the counts are complete).
	MaxRuns     = 100
	MaxFindings = 20
)

// Service answers reports.
type Service struct{ pool *pgxpool.Pool }

// New returns a Service on pool.
func New(pool *pgxpool.Pool) *Service { return &Service{pool: pool} }

// Figures are what the ledger recorded in units over the report's day:
// Held what holds reserved, Confirmed what was sold, Released what
// cancels handed back (whole or part), Expired what expiries handed back,
// RolledBack what rollbacks (manual or a campaign's end) handed back;
// Adjusted the net change of total by adjustments and stock-ins (imports
// included), Transferred by campaign transfers; Repairs counts repairs of
// the books, Movements every ledger row.
type Figures struct {
	Held        int64 `json:"held"`
	Confirmed   int64 `json:"confirmed"`
	Released    int64 `json:"released"`
	Expired     int64 `json:"expired"`
	RolledBack  int64 `json:"rolled_back"`
	Adjusted    int64 `json:"adjusted"`
	Transferred int64 `json:"transferred"`
	Repairs     int64 `json:"repairs"`
	Movements   int64 `json:"movements"`
}

// PoolFigures are one (sku, pool)'s figures.
type PoolFigures struct {
	SKU  string `json:"sku"`
	Pool string `json:"pool"`
	Figures
}

// CampaignFigures are one campaign pool's figures, over its SKUs.
type CampaignFigures struct {
	Campaign string `json:"campaign"`
	Figures
}

// Run is a reconciliation run of the day that found something or failed.
type Run struct {
	ID          int64      `json:"id"`
	Trigger     string     `json:"trigger"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	RowsChecked int32      `json:"rows_checked"`
	AutoFixed   int32      `json:"auto_fixed"`
	Retried     int32      `json:"retried"`
	HighRisk    int32      `json:"high_risk"`
	Error       *string    `json:"error"`
	// Findings are its first MaxFindings findings.
	Findings []Finding `json:"findings"`
}

// Finding is one finding of a run.
type Finding struct {
	Class         string     `json:"class"`
	Kind          string     `json:"kind"`
	SKU           *string    `json:"sku"`
	Pool          *string    `json:"pool"`
	ReservationID *uuid.UUID `json:"reservation_id"`
	JobID         *int64     `json:"job_id"`
	Action        string     `json:"action"`
}

// Reconciliations are the day's reconciliation runs: how many, how many
// failed, what they found in all, and the runs that found something or
// failed (the first MaxRuns).
type Reconciliations struct {
	Runs      int64 `json:"runs"`
	Failed    int64 `json:"failed"`
	AutoFixed int64 `json:"auto_fixed"`
	Retried   int64 `json:"retried"`
	HighRisk  int64 `json:"high_risk"`
	// WithFindings are the runs that found something or failed, in order.
	WithFindings []Run `json:"with_findings"`
}

// Daily is the report of one business day: its figures in all, per
// campaign and, a page at a time, per (sku, pool) in (sku, pool) byte
// order; and its reconciliation runs. NextCursor, when not nil, asks for
// the next page of pools (the rest is the same on every page).
type Daily struct {
	Date            string            `json:"date"`
	TimeZone        string            `json:"time_zone"`
	From            time.Time         `json:"from"`
	To              time.Time         `json:"to"`
	Totals          Figures           `json:"totals"`
	Campaigns       []CampaignFigures `json:"campaigns"`
	Reconciliations Reconciliations   `json:"reconciliations"`
	Pools           []PoolFigures     `json:"pools"`
	NextCursor      *string           `json:"next_cursor"`
}

// DailyQuery asks for the report of Date (YYYY-MM-DD) as a business day
// in TimeZone (an IANA name; empty: UTC), the page of pools after Cursor
// (a previous page's NextCursor), Limit of them (0: DefaultLimit).
type DailyQuery struct {
	Date     string
	TimeZone string
	Cursor   string
	Limit    int
}

// ErrBadCursor is a cursor that is not a NextCursor of this report, and
// ErrBadDate a date that is not one: malformed requests.
var (
	ErrBadCursor = errors.New("cursor must be the next_cursor of a previous page")
	ErrBadDate   = errors.New("date must be a day as YYYY-MM-DD (2026-12-01)")
)

// ParseDay reads a business day: date as YYYY-MM-DD, in zone (empty: UTC).
// It returns the day's start and end, and the zone's name.
func ParseDay(date, zone string) (from, to time.Time, name string, err error) {
	if zone == "" {
		zone = "UTC"
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return time.Time{}, time.Time{}, "", ErrBadDate
	}
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" || strings.Contains(zone, "..") || strings.HasPrefix(zone, "/") || domain.ValidRef("tz", zone, 64) != nil {
		return time.Time{}, time.Time{}, "", domain.Invalid("tz %q is not a time zone: give an IANA name (Europe/Berlin, Asia/Shanghai) or leave it out for UTC", zone)
	}
	day, err := time.ParseInLocation(time.DateOnly, date, loc)
	if err != nil {
		return time.Time{}, time.Time{}, "", ErrBadDate
	}
	return day, day.AddDate(0, 0, 1), zone, nil
}

// Daily answers the report q asks for.
func (s *Service) Daily(ctx context.Context, q DailyQuery) (Daily, error) {
	from, to, zone, err := ParseDay(q.Date, q.TimeZone)
	if err != nil {
		return Daily{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return Daily{}, domain.Invalid("limit must be from 1 to %d", MaxLimit)
	}
	afterSKU, afterPool, err := decodeCursor(q.Cursor)
	if err != nil {
		return Daily{}, err
	}
	out := Daily{Date: q.Date, TimeZone: zone, From: from.UTC(), To: to.UTC(), Campaigns: []CampaignFigures{}, Pools: []PoolFigures{}}
	dq := db.New(s.pool)
	byPool, err := dq.ReportByPool(ctx, from, to)
	if err != nil {
		return Daily{}, fmt.Errorf("sum the day's ledger: %w", err)
	}
	for _, p := range byPool {
		f := figures(p.Held, p.Confirmed, p.Released, p.Expired, p.RolledBack, p.Adjusted, p.Transferred, p.Repairs, p.Movements)
		switch {
		case p.Everything:
			out.Totals = f
		case p.Pool != inventory.MainPool && len(out.Campaigns) < MaxCampaigns:
			out.Campaigns = append(out.Campaigns, CampaignFigures{Campaign: p.Pool, Figures: f})
		}
	}
	pools, err := dq.ReportPools(ctx, db.ReportPoolsParams{FromAt: from, ToAt: to, AfterSku: afterSKU, AfterPool: afterPool, Lim: int32(limit + 1)})
	if err != nil {
		return Daily{}, fmt.Errorf("sum the day's ledger by pool: %w", err)
	}
	for _, p := range pools[:min(len(pools), limit)] {
		out.Pools = append(out.Pools, PoolFigures{SKU: p.Sku, Pool: p.Pool,
			Figures: figures(p.Held, p.Confirmed, p.Released, p.Expired, p.RolledBack, p.Adjusted, p.Transferred, p.Repairs, p.Movements)})
	}
	if len(pools) > limit {
		last := out.Pools[len(out.Pools)-1]
		next := encodeCursor(last.SKU, last.Pool)
		out.NextCursor = &next
	}
	if out.Reconciliations, err = s.runs(ctx, dq, from, to); err != nil {
		return Daily{}, err
	}
	return out, nil
}

// figures are the nine sums of a report's row, in the order the report's
// queries give them.
func figures(held, confirmed, released, expired, rolledBack, adjusted, transferred, repairs, movements int64) Figures {
	return Figures{Held: held, Confirmed: confirmed, Released: released, Expired: expired, RolledBack: rolledBack,
		Adjusted: adjusted, Transferred: transferred, Repairs: repairs, Movements: movements}
}

func (s *Service) runs(ctx context.Context, q *db.Queries, from, to time.Time) (Reconciliations, error) {
	sum, err := q.ReportRuns(ctx, from, to)
	if err != nil {
		return Reconciliations{}, fmt.Errorf("count the day's reconciliations: %w", err)
	}
	out := Reconciliations{Runs: sum.Runs, Failed: sum.Failed, AutoFixed: sum.AutoFixed, Retried: sum.Retried, HighRisk: sum.HighRisk,
		WithFindings: []Run{}}
	rows, err := q.ReportRunsWithFindings(ctx, from, to, MaxRuns)
	if err != nil {
		return Reconciliations{}, fmt.Errorf("list the day's reconciliations: %w", err)
	}
	ids := make([]int64, len(rows))
	at := map[int64]int{}
	for i, r := range rows {
		ids[i], at[r.ID] = r.ID, i
		out.WithFindings = append(out.WithFindings, Run{
			ID: r.ID, Trigger: r.Trigger, Status: r.Status, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
			RowsChecked: r.RowsChecked, AutoFixed: r.AutoFixed, Retried: r.Retried, HighRisk: r.HighRisk, Error: r.Error,
			Findings: []Finding{},
		})
	}
	if len(ids) == 0 {
		return out, nil
	}
	found, err := q.ReportFindings(ctx, ids, MaxFindings)
	if err != nil {
		return Reconciliations{}, fmt.Errorf("list the day's findings: %w", err)
	}
	for _, f := range found {
		r := &out.WithFindings[at[f.RunID]]
		r.Findings = append(r.Findings, Finding{Class: f.Class, Kind: f.Kind, SKU: f.Sku, Pool: f.Pool,
			ReservationID: f.ReservationID, JobID: f.JobID, Action: f.Action})
	}
	return out, nil
}

// A cursor is the last (sku, pool) of a page, opaque to the caller.
func encodeCursor(sku, pool string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(sku + "\x00" + pool))
}

func decodeCursor(c string) (sku, pool string, err error) {
	if c == "" {
		return "", "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", ErrBadCursor
	}
	sku, pool, ok := strings.Cut(string(raw), "\x00")
	if !ok || domain.ValidName("sku", sku) != nil || domain.ValidName("pool", pool) != nil {
		return "", "", ErrBadCursor
	}
	return sku, pool, nil
}
