// Package partitions keeps the ledger's monthly partitions: the ledger is
// partitioned by month on its time (migrations/00149_ledger_partitioned.sql),
// and each month's partition must exist before the first row of that month
// is written, or the write fails. A periodic job makes them Ahead months
// ahead.
package partitions

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// Ahead is how many months after the current one have their partitions
// made: a job that stops running leaves that long before writes fail, and
// its failures raise alerts long before.
const Ahead = 3

// Partition is one partition of the ledger and the times it covers, From
// (included) to To (excluded); From is the zero time for the first
// partition, which covers everything before To.
type Partition struct {
	Name string    `json:"name"`
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Service makes, lists and archives the ledger's partitions.
type Service struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// archiveAfter and archiveDir are the periodic archive's (see Periodic).
	archiveAfter int
	archiveDir   string
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, log: log}
}

// WithArchive has Periodic archive, into dir, every month that ended at
// least after months ago; after 0 archives nothing.
func (s *Service) WithArchive(after int, dir string) *Service {
	s.archiveAfter, s.archiveDir = after, dir
	return s
}

// Periodic is the ledger_partitions job's run: the partitions made ahead,
// then, when configured, the months old enough archived.
func (s *Service) Periodic(ctx context.Context) error {
	if _, err := s.MakeAhead(ctx); err != nil {
		return err
	}
	if s.archiveAfter <= 0 {
		return nil
	}
	now := time.Now().UTC()
	before := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -s.archiveAfter, 0)
	_, err := s.Archive(ctx, before, s.archiveDir, "system:ledger_partitions")
	return err
}

// MakeAhead makes the monthly partitions missing through Ahead months
// after the current one and returns how many it made. Each is created
// empty and attached under SHARE UPDATE EXCLUSIVE, which blocks neither
// reads nor writes of the ledger.
func (s *Service) MakeAhead(ctx context.Context) (int, error) {
	made, err := db.New(s.pool).LedgerMakePartitions(ctx, Ahead)
	if err != nil {
		return 0, fmt.Errorf("make ledger partitions: %w", err)
	}
	if made > 0 {
		s.log.InfoContext(ctx, "ledger partitions made", "made", made, "months_ahead", Ahead)
	}
	return int(made), nil
}

// List returns the ledger's partitions in time order.
func (s *Service) List(ctx context.Context) ([]Partition, error) {
	rows, err := db.New(s.pool).LedgerPartitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list ledger partitions: %w", err)
	}
	out := make([]Partition, len(rows))
	for i, r := range rows {
		out[i] = Partition{Name: r.Name, From: r.FromAt.UTC(), To: r.ToAt.UTC()}
	}
	return out, nil
}

// Archive is one archived range of the ledger, as ledger_archives records
// it.
type Archive struct {
	Partition string     `json:"partition"`
	From      *time.Time `json:"from"`
	To        time.Time  `json:"to"`
	Rows      int64      `json:"rows"`
	Kept      int64      `json:"kept"`
	Carried   int64      `json:"carried"`
	// File is the archive's manifest, as the archive wrote it.
	File       string    `json:"file"`
	ArchivedBy string    `json:"archived_by"`
	ArchivedAt time.Time `json:"archived_at"`
}

// Archives lists the ledger's archived ranges, oldest first.
func (s *Service) Archives(ctx context.Context) ([]Archive, error) {
	rows, err := db.New(s.pool).LedgerArchiveList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list ledger archives: %w", err)
	}
	out := make([]Archive, len(rows))
	for i, r := range rows {
		out[i] = Archive{Partition: r.Partition, From: r.FromAt, To: r.ToAt.UTC(), Rows: r.Rows, Kept: r.Kept, Carried: r.Carried,
			File: r.File, ArchivedBy: r.ArchivedBy, ArchivedAt: r.ArchivedAt}
	}
	return out, nil
}

// CutNow ends the current month's partition now: the rows so far stay in a
// partition whose range ends at this instant (<name>_a, ready to archive
// as a month that has ended would be), and a new partition (<name>_b)
// takes the rest of the month. Tests and the benchmark use it to archive
// a month without waiting for its end. It takes the ledger's ACCESS
// EXCLUSIVE lock for a moment, waiting for it at most lockTimeout, and
// returns when the cut range ends.
func (s *Service) CutNow(ctx context.Context, lockTimeout time.Duration) (time.Time, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var name string
	var from, end time.Time
	if err := tx.QueryRow(ctx, `
		SELECT c.relname, (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1]::timestamptz, clock_timestamp()
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'ledger'::regclass
		  AND pg_get_expr(c.relpartbound, c.oid) LIKE '%' || to_char(date_trunc('month', now() AT TIME ZONE 'UTC'), 'YYYY-MM-DD') || '%) TO%'`).
		Scan(&name, &from, &end); err != nil {
		return time.Time{}, fmt.Errorf("find this month's partition: %w", err)
	}
	ts := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	if _, err := tx.Exec(ctx, fmt.Sprintf(`
		SET LOCAL lock_timeout = '%dms';
		ALTER TABLE ledger DETACH PARTITION %[2]s;
		ALTER TABLE %[2]s RENAME TO %[3]s;
		ALTER TABLE ledger ATTACH PARTITION %[3]s FOR VALUES FROM ('%[5]s') TO ('%[6]s');
		CREATE TABLE %[4]s (LIKE ledger INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
		ALTER TABLE ledger ATTACH PARTITION %[4]s FOR VALUES FROM ('%[6]s') TO ('%[7]s');`,
		lockTimeout.Milliseconds(), pgx.Identifier{name}.Sanitize(), pgx.Identifier{name + "_a"}.Sanitize(), pgx.Identifier{name + "_b"}.Sanitize(),
		ts(from), ts(end), ts(from.AddDate(0, 1, 0)))); err != nil {
		return time.Time{}, fmt.Errorf("cut %s: %w", name, err)
	}
	return end, tx.Commit(ctx)
}
