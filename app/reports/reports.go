// Package reports answers the daily report the on-call checklist asks for:
// per stock row (sku, location, pool), per campaign, per location and in
// all, what every kind of ledger row did on one business day (units held,
// confirmed, released, expired, rolled back, adjusted, moved, written off,
// counted, transferred, received, lost in transit...) and the day's change
// of every state, with the reconciliation runs of that day and what they
// found. It reads the ledger, which is never deleted, so a report can be
// asked for any day the ledger covers, as long as the ledger is kept.
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
	"github.com/stockhold/stockhold/app/stock"
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

// Figures are what the ledger recorded over the report's day, in units
// unless said otherwise: every ledger kind lands in a named column.
//
//   - Held what holds reserved (kind reserve), Confirmed what was sold
//     (confirm), Released what cancels handed back, whole or part
//     (release, release_partial), Expired what expiries handed back
//     (expire), RolledBack what rollbacks (manual or a campaign's end)
//     handed back (rollback);
//   - Adjusted the net change of total by adjustments and stock-ins,
//     imports included (adjust, stock_in), Transferred by campaign
//     transfers between pools (transfer);
//   - Moved the units moved between on-hand states (move), WrittenOff what
//     write-offs took out of total and LostInTransit what closed transfers
//     wrote off of incoming (loss), Counted the net change of total by
//     stock counts (count);
//   - TransferredOut what transfers sent away (transfer_out: out of total
//     at their source), TransferredIn what they put in transit
//     (transfer_in: incoming at their destination), Received what arrived
//     (receive: into total), TransferCancelled what cancelled transfers
//     gave back to their source (transfer_cancel; at the destination the
//     same units leave incoming);
//   - InboundExpected what supplier inbound notices added to incoming
//     (inbound), InboundReceived what arrived from them (inbound_receive:
//     into total), InboundShort what closes wrote off of incoming, never
//     received (inbound_short), InboundCancelled what cancels took back
//     from incoming (inbound_cancel); Promised what holds promised past
//     what was on hand (reserve: backordered up), BackordersFilled what
//     receipts gave holds they had been promised (backorder_fill:
//     available into reserved or sold);
//   - Shortfall is what held units a count found missing took out of
//     total as their holds ended (shortfall), SoldShort how many of them
//     confirms sold (sold_short);
//   - Repairs, Pauses and Resumes count those ledger rows (repair,
//     pause, resume), Movements every ledger row.
//
// Change is the day's net change of every state and of backordered, and
// ByKind each ledger kind's part of it (with its rows): the kinds'
// changes sum to Change, counter by counter.
type Figures struct {
	Held              int64 `json:"held"`
	Confirmed         int64 `json:"confirmed"`
	Released          int64 `json:"released"`
	Expired           int64 `json:"expired"`
	RolledBack        int64 `json:"rolled_back"`
	Adjusted          int64 `json:"adjusted"`
	Transferred       int64 `json:"transferred"`
	Moved             int64 `json:"moved"`
	WrittenOff        int64 `json:"written_off"`
	LostInTransit     int64 `json:"lost_in_transit"`
	Counted           int64 `json:"counted"`
	TransferredOut    int64 `json:"transferred_out"`
	TransferredIn     int64 `json:"transferred_in"`
	Received          int64 `json:"received"`
	TransferCancelled int64 `json:"transfer_cancelled"`
	InboundExpected   int64 `json:"inbound_expected"`
	InboundReceived   int64 `json:"inbound_received"`
	InboundShort      int64 `json:"inbound_short"`
	InboundCancelled  int64 `json:"inbound_cancelled"`
	Shortfall         int64 `json:"shortfall"`
	SoldShort         int64 `json:"sold_short"`
	Promised          int64 `json:"promised,omitempty"`
	BackordersFilled  int64 `json:"backorders_filled,omitempty"`
	Repairs           int64 `json:"repairs"`
	Pauses            int64 `json:"pauses"`
	Resumes           int64 `json:"resumes"`
	Movements         int64 `json:"movements"`
	// Change is the day's net change of every state and of backordered.
	Change Change `json:"change"`
	// ByKind is, per ledger kind recorded that day, its rows and its
	// change of every state and of backordered; summed, they are Change.
	ByKind map[string]KindFigures `json:"by_kind"`
}

// Change is a change of every state and of backordered, the units
// promised to holds past what is on hand (in no state of total).
type Change struct {
	stock.Counters
	Backordered int64 `json:"backordered"`
}

// Plus adds two changes, counter by counter.
func (c Change) Plus(o Change) Change {
	return Change{Counters: c.Counters.Plus(o.Counters), Backordered: c.Backordered + o.Backordered}
}

// KindFigures are one ledger kind's rows over the day and its change of
// every state and of backordered.
type KindFigures struct {
	Movements int64 `json:"movements"`
	Change
}

// sums are one kind's sums as a report's query gives them.
type sums struct {
	kind string
	KindFigures
	// gained is what the states that gained gained, summed row by row:
	// a move's units.
	gained int64
}

// columns puts each ledger kind in its named column: the kinds of the
// ledger's CHECK constraint, every one (TestEveryLedgerKindHasAColumn).
var columns = map[stock.LedgerKind]func(f *Figures, s sums){
	stock.LedgerReserve: func(f *Figures, s sums) {
		f.Held += s.Reserved
		f.Promised += s.Backordered
	},
	stock.LedgerConfirm:        func(f *Figures, s sums) { f.Confirmed += s.Sold },
	stock.LedgerRelease:        func(f *Figures, s sums) { f.Released -= s.Reserved },
	stock.LedgerReleasePartial: func(f *Figures, s sums) { f.Released -= s.Reserved },
	stock.LedgerExpire:         func(f *Figures, s sums) { f.Expired -= s.Reserved },
	stock.LedgerRollback:       func(f *Figures, s sums) { f.RolledBack -= s.Reserved },
	stock.LedgerAdjust:         func(f *Figures, s sums) { f.Adjusted += s.Total },
	stock.LedgerStockIn:        func(f *Figures, s sums) { f.Adjusted += s.Total },
	stock.LedgerTransfer:       func(f *Figures, s sums) { f.Transferred += s.Total },
	stock.LedgerMove:           func(f *Figures, s sums) { f.Moved += s.gained },
	stock.LedgerLoss: func(f *Figures, s sums) {
		f.WrittenOff -= s.Total
		f.LostInTransit -= s.Incoming
	},
	stock.LedgerCount:          func(f *Figures, s sums) { f.Counted += s.Total },
	stock.LedgerTransferOut:    func(f *Figures, s sums) { f.TransferredOut -= s.Total },
	stock.LedgerTransferIn:     func(f *Figures, s sums) { f.TransferredIn += s.Incoming },
	stock.LedgerReceive:        func(f *Figures, s sums) { f.Received += s.Total },
	stock.LedgerTransferCancel: func(f *Figures, s sums) { f.TransferCancelled += s.Total },
	stock.LedgerInbound:        func(f *Figures, s sums) { f.InboundExpected += s.Incoming },
	stock.LedgerInboundReceive: func(f *Figures, s sums) { f.InboundReceived += s.Total },
	stock.LedgerInboundShort:   func(f *Figures, s sums) { f.InboundShort -= s.Incoming },
	stock.LedgerInboundCancel:  func(f *Figures, s sums) { f.InboundCancelled -= s.Incoming },
	stock.LedgerShortfall:      func(f *Figures, s sums) { f.Shortfall -= s.Total },
	stock.LedgerSoldShort:      func(f *Figures, s sums) { f.SoldShort -= s.Short },
	stock.LedgerBackorderFill:  func(f *Figures, s sums) { f.BackordersFilled -= s.Available },
	stock.LedgerRepair:         func(f *Figures, s sums) { f.Repairs += s.Movements },
	stock.LedgerPause:          func(f *Figures, s sums) { f.Pauses += s.Movements },
	stock.LedgerResume:         func(f *Figures, s sums) { f.Resumes += s.Movements },
}

// sumsOf reads one kind's sums from a report query's row.
func sumsOf(r db.ReportRowsRow) sums {
	return sums{kind: r.Kind, gained: r.Gained, KindFigures: KindFigures{Movements: r.Movements, Change: Change{Counters: stock.Counters{
		Total: r.Total, Available: r.Available, Reserved: r.Reserved, Sold: r.Sold, QualityControl: r.QualityControl,
		Damaged: r.Damaged, SafetyStock: r.SafetyStock, Incoming: r.Incoming, Short: r.Short}, Backordered: r.Backordered}}}
}

// add counts one kind's sums in f.
func (f *Figures) add(s sums) {
	if f.ByKind == nil {
		f.ByKind = map[string]KindFigures{}
	}
	k := f.ByKind[s.kind]
	k.Movements += s.Movements
	k.Change = k.Change.Plus(s.Change)
	f.ByKind[s.kind] = k
	f.Change = f.Change.Plus(s.Change)
	f.Movements += s.Movements
	if column, ok := columns[stock.LedgerKind(s.kind)]; ok {
		column(f, s)
	}
}

// empty is Figures with ByKind an empty map, as an answer shows them.
func (f Figures) empty() Figures {
	if f.ByKind == nil {
		f.ByKind = map[string]KindFigures{}
	}
	return f
}

// PoolFigures are one stock row's figures: a SKU's pool at a location.
type PoolFigures struct {
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Pool     string `json:"pool"`
	Figures
}

// CampaignFigures are one campaign pool's figures, over its SKUs and
// locations.
type CampaignFigures struct {
	Campaign string `json:"campaign"`
	Figures
}

// LocationFigures are one location's figures, over its SKUs and pools.
type LocationFigures struct {
	Location string `json:"location"`
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
// campaign, per location and, a page at a time, per stock row (sku,
// location, pool) in byte order; and its reconciliation runs. NextCursor,
// when not nil, asks for the next page of pools (the rest is the same on
// every page).
type Daily struct {
	Date            string            `json:"date"`
	TimeZone        string            `json:"time_zone"`
	From            time.Time         `json:"from"`
	To              time.Time         `json:"to"`
	Totals          Figures           `json:"totals"`
	Campaigns       []CampaignFigures `json:"campaigns"`
	Locations       []LocationFigures `json:"locations"`
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
// It returns the day's start and end, and the zone's name. A day that
// starts or ends outside the years 1 to 9999 in UTC (9999-12-31 in UTC
// ends in the year 10000) is refused as invalid: times outside those
// years have no RFC 3339 form to answer with.
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
	from, to = day, day.AddDate(0, 0, 1)
	if from.UTC().Year() < 1 || to.UTC().Year() > 9999 {
		return time.Time{}, time.Time{}, "", domain.Invalid("date %s (%s) starts or ends outside the years 0001 to 9999 in UTC: ask for a day from 0001-01-02 to 9999-12-30", date, zone)
	}
	return from, to, zone, nil
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
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return Daily{}, err
	}
	out := Daily{Date: q.Date, TimeZone: zone, From: from.UTC(), To: to.UTC(), Totals: Figures{}.empty(),
		Campaigns: []CampaignFigures{}, Locations: []LocationFigures{}, Pools: []PoolFigures{}}
	dq := db.New(s.pool)
	archived, err := dq.LedgerArchived(ctx)
	if err != nil {
		return Daily{}, fmt.Errorf("read how far the ledger is archived: %w", err)
	}
	if from.Before(archived.ToAt) {
		return Daily{}, domain.Archived("the ledger before %s is archived: %s starts at %s", archived.ToAt.UTC().Format(time.RFC3339),
			q.Date, from.UTC().Format(time.RFC3339))
	}
	all, err := dq.ReportSums(ctx, from, to)
	if err != nil {
		return Daily{}, fmt.Errorf("sum the day's ledger: %w", err)
	}
	out.addSums(all)
	rows, err := dq.ReportRows(ctx, db.ReportRowsParams{FromAt: from, ToAt: to, AfterSku: after.sku, AfterLocation: after.location,
		AfterPool: after.pool, Lim: int32(limit + 1)})
	if err != nil {
		return Daily{}, fmt.Errorf("sum the day's ledger by stock row: %w", err)
	}
	for _, r := range rows {
		n := len(out.Pools)
		if n == 0 || out.Pools[n-1].SKU != r.Sku || out.Pools[n-1].Location != r.Location || out.Pools[n-1].Pool != r.Pool {
			out.Pools = append(out.Pools, PoolFigures{SKU: r.Sku, Location: r.Location, Pool: r.Pool})
			n++
		}
		out.Pools[n-1].add(sumsOf(r))
	}
	if len(out.Pools) > limit {
		out.Pools = out.Pools[:limit]
		last := out.Pools[limit-1]
		next := encodeCursor(rowKey{last.SKU, last.Location, last.Pool})
		out.NextCursor = &next
	}
	if out.Reconciliations, err = s.runs(ctx, dq, from, to); err != nil {
		return Daily{}, err
	}
	return out, nil
}

// addSums files the day's sums: the totals, each campaign's (at most
// MaxCampaigns) and each location's.
func (out *Daily) addSums(all []db.ReportSumsRow) {
	campaigns, locations := map[string]int{}, map[string]int{}
	for _, r := range all {
		k := sumsOf(db.ReportRowsRow{Kind: r.Kind, Movements: r.Movements, Total: r.Total, Available: r.Available, Reserved: r.Reserved,
			Sold: r.Sold, QualityControl: r.QualityControl, Damaged: r.Damaged, SafetyStock: r.SafetyStock, Incoming: r.Incoming,
			Short: r.Short, Backordered: r.Backordered, Gained: r.Gained})
		switch {
		case r.ByPool && r.Pool == stock.MainPool:
		case r.ByPool:
			i, ok := campaigns[r.Pool]
			if !ok {
				if len(out.Campaigns) >= MaxCampaigns {
					continue
				}
				i = len(out.Campaigns)
				campaigns[r.Pool] = i
				out.Campaigns = append(out.Campaigns, CampaignFigures{Campaign: r.Pool})
			}
			out.Campaigns[i].add(k)
		case r.ByLocation:
			i, ok := locations[r.Location]
			if !ok {
				i = len(out.Locations)
				locations[r.Location] = i
				out.Locations = append(out.Locations, LocationFigures{Location: r.Location})
			}
			out.Locations[i].add(k)
		default:
			out.Totals.add(k)
		}
	}
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

// rowKey is a stock row's key: where a page of pools ends.
type rowKey struct{ sku, location, pool string }

// A cursor is the last stock row of a page, opaque to the caller.
func encodeCursor(k rowKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.sku + "\x00" + k.location + "\x00" + k.pool))
}

func decodeCursor(c string) (rowKey, error) {
	if c == "" {
		return rowKey{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return rowKey{}, ErrBadCursor
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 || domain.ValidName("sku", parts[0]) != nil || domain.ValidName("location", parts[1]) != nil ||
		domain.ValidName("pool", parts[2]) != nil {
		return rowKey{}, ErrBadCursor
	}
	return rowKey{parts[0], parts[1], parts[2]}, nil
}
