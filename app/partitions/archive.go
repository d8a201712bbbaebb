package partitions

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/dbtx"
)

// SwapLockTimeout is how long the swap of an archived partition for its
// replacement waits for the ledger's lock at a time: holds queue behind
// the request for no longer. It asks again until SwapPatience has passed.
const SwapLockTimeout = 100 * time.Millisecond

// SwapPatience bounds how long an archive keeps asking for the swap's lock
// (a long transaction reading the ledger holds it off).
const SwapPatience = 5 * time.Minute

// ErrRefused is an archive that cannot be made now; its message says why.
var ErrRefused = errors.New("archive refused")

// Manifest describes an archive file: what it holds, and the checksums
// that prove it (written beside it as <partition>.manifest.json).
type Manifest struct {
	Partition string     `json:"partition"`
	From      *time.Time `json:"from"`
	To        time.Time  `json:"to"`
	Rows      int64      `json:"rows"`
	MaxID     int64      `json:"max_id"`
	FeedXid   uint64     `json:"feed_xid"`
	FeedID    int64      `json:"feed_id"`
	// File is the archive's file name (in the manifest's directory):
	// the rows as CSV with a header, in id order, gzip-compressed.
	File       string `json:"file"`
	FileSHA256 string `json:"file_sha256"`
	// DataSHA256 is the SHA-256 of the CSV before compression.
	DataSHA256 string    `json:"data_sha256"`
	WrittenAt  time.Time `json:"written_at"`
}

// Archived is one partition archived.
type Archived struct {
	Manifest
	// Kept and Carried are the rows of the partition that replaced it:
	// rows kept as they were, and carried balances.
	Kept         int64  `json:"kept"`
	Carried      int64  `json:"carried"`
	ManifestPath string `json:"manifest_path"`
	// Took is how long the archive of this partition took.
	Took time.Duration `json:"took"`
}

// Archive archives, oldest first, every partition of the ledger that ends
// at or before before (a time in the past; the command gives the start of
// a month), into dir: each is
// written to a compressed file with a manifest, the file read back and
// checked against the partition read again, then the partition is replaced
// by its carried balances and the rows still read (see
// migrations/00150_ledger_archives.sql), and dropped. A partition already
// archived is skipped (or, if its drop was cut short, dropped). It refuses
// (ErrRefused) while something that needs the rows is there: a
// transaction that began before the partition's end, a transfer made
// before it still in transit, a webhook whose cursor is before its events.
func (s *Service) Archive(ctx context.Context, before time.Time, dir, actor string) ([]Archived, error) {
	if !before.Before(time.Now()) {
		return nil, fmt.Errorf("%w: %s is not in the past", ErrRefused, before.Format(time.RFC3339))
	}
	parts, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	done, err := db.New(s.pool).LedgerArchiveList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list archives: %w", err)
	}
	archived := map[time.Time]db.LedgerArchive{}
	for _, a := range done {
		archived[a.ToAt.UTC()] = a
	}
	var out []Archived
	for _, p := range parts {
		if p.To.After(before) {
			break
		}
		if a, ok := archived[p.To]; ok {
			if a.DroppedAt == nil {
				if err := s.drop(ctx, a.Partition); err != nil {
					return out, err
				}
			}
			continue
		}
		a, err := s.archiveOne(ctx, p, dir, actor)
		if err != nil {
			return out, fmt.Errorf("archive %s: %w", p.Name, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func (s *Service) archiveOne(ctx context.Context, p Partition, dir, actor string) (Archived, error) {
	start := time.Now()
	q := db.New(s.pool)
	from := p.From
	var fromPtr *time.Time
	if !p.From.IsZero() {
		fromPtr = &from
	}
	sum, err := q.LedgerRangeSummary(ctx, p.From, p.To)
	if err != nil {
		return Archived{}, fmt.Errorf("summarise: %w", err)
	}
	block, err := q.LedgerArchiveBlockers(ctx, p.To, sum.FeedXid, sum.FeedID)
	if err != nil {
		return Archived{}, fmt.Errorf("check blockers: %w", err)
	}
	var why []string
	if block.Transactions+block.Prepared > 0 {
		why = append(why, fmt.Sprintf("%d transactions began before %s and are still open", block.Transactions+block.Prepared, p.To.Format(time.RFC3339)))
	}
	if block.Transfers > 0 {
		why = append(why, fmt.Sprintf("%d transfers made before %s are in transit", block.Transfers, p.To.Format(time.RFC3339)))
	}
	if block.Webhooks > 0 {
		why = append(why, fmt.Sprintf("%d webhooks have not received the events of %s (GET /v1/webhooks: their lag)", block.Webhooks, p.Name))
	}
	if len(why) > 0 {
		return Archived{}, fmt.Errorf("%w: %s", ErrRefused, strings.Join(why, "; "))
	}

	m := Manifest{Partition: p.Name, From: fromPtr, To: p.To, MaxID: sum.MaxID, FeedXid: sum.FeedXid, FeedID: sum.FeedID,
		File: p.Name + ".csv.gz", WrittenAt: time.Now().UTC()}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Archived{}, fmt.Errorf("archive directory: %w", err)
	}
	path := filepath.Join(dir, m.File)
	m.Rows, m.DataSHA256, m.FileSHA256, err = s.export(ctx, p.Name, path)
	if err != nil {
		return Archived{}, err
	}
	if m.Rows != sum.Rows {
		return Archived{}, fmt.Errorf("%s has %d rows, the ledger's range %d", p.Name, m.Rows, sum.Rows)
	}
	// The file as it is on disk, and the partition read again, are what
	// the manifest says.
	if err := VerifyFile(path, m); err != nil {
		return Archived{}, err
	}
	again, err := s.copyOut(ctx, p.Name, io.Discard)
	if err != nil {
		return Archived{}, err
	}
	if again.sha != m.DataSHA256 || again.rows != m.Rows {
		return Archived{}, fmt.Errorf("%s changed while it was written (%d rows, then %d)", p.Name, m.Rows, again.rows)
	}
	manifestPath := filepath.Join(dir, p.Name+".manifest.json")
	if err := writeJSON(manifestPath, m); err != nil {
		return Archived{}, err
	}

	built, err := q.LedgerArchiveBuild(ctx, p.Name, fromPtr, p.To)
	if err != nil {
		return Archived{}, fmt.Errorf("build the replacement: %w", err)
	}
	if err := s.swap(ctx, p, fromPtr, m, built, manifestPath, actor); err != nil {
		return Archived{}, err
	}
	if err := s.drop(ctx, p.Name); err != nil {
		return Archived{}, err
	}
	a := Archived{Manifest: m, Kept: built.Kept, Carried: built.Carried, ManifestPath: manifestPath, Took: time.Since(start)}
	s.log.InfoContext(ctx, "ledger partition archived", "partition", p.Name, "rows", m.Rows, "kept", a.Kept, "carried", a.Carried,
		"file", path, "took", a.Took)
	return a, nil
}

// swap puts the replacement in place and records the archive, in one
// transaction that asks for the ledger's lock SwapLockTimeout at a time.
func (s *Service) swap(ctx context.Context, p Partition, from *time.Time, m Manifest, built db.LedgerArchiveBuildRow,
	manifestPath, actor string) error {
	deadline := time.Now().Add(SwapPatience)
	for {
		err := dbtx.WithTx(ctx, s.pool, func(ctx context.Context, tx pgx.Tx) error {
			q := db.New(tx)
			if err := q.LockTimeoutLocal(ctx, fmt.Sprintf("%dms", SwapLockTimeout.Milliseconds())); err != nil {
				return err
			}
			if err := q.LedgerArchiveSwap(ctx, p.Name, from, p.To); err != nil {
				return err
			}
			_, err := q.LedgerArchiveRecord(ctx, db.LedgerArchiveRecordParams{
				Partition: p.Name, FromAt: from, ToAt: p.To, Rows: m.Rows, Kept: built.Kept, Carried: built.Carried,
				MaxID: m.MaxID, FeedXid: m.FeedXid, FeedID: m.FeedID, File: manifestPath, FileSha256: m.FileSHA256,
				DataSha256: m.DataSHA256, ArchivedBy: actor,
			})
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("swap %s for its replacement: %w", p.Name, err)
		}
		return nil
	}
}

func (s *Service) drop(ctx context.Context, name string) error {
	q := db.New(s.pool)
	if err := q.LedgerArchiveDrop(ctx, name); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	if err := q.LedgerArchiveDropped(ctx, name); err != nil {
		return fmt.Errorf("record the drop of %s: %w", name, err)
	}
	return nil
}

type copied struct {
	rows int64
	sha  string
}

// copyOut writes partition's rows as CSV with a header, in id order, to w
// and returns how many rows and the SHA-256 of what it wrote. COPY takes
// no parameters: the name comes from the catalog and is quoted.
func (s *Service) copyOut(ctx context.Context, partition string, w io.Writer) (copied, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return copied{}, fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	h := sha256.New()
	sql := fmt.Sprintf("COPY (SELECT * FROM %s ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER true)", pgx.Identifier{partition}.Sanitize())
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.MultiWriter(w, h), sql)
	if err != nil {
		return copied{}, fmt.Errorf("copy %s out: %w", partition, err)
	}
	return copied{rows: tag.RowsAffected(), sha: hex.EncodeToString(h.Sum(nil))}, nil
}

// export writes partition to path, gzip-compressed, and returns its rows,
// the SHA-256 of the CSV and that of the file.
func (s *Service) export(ctx context.Context, partition, path string) (rows int64, dataSHA, fileSHA string, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, "", "", fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	fileHash := sha256.New()
	buf := bufio.NewWriterSize(io.MultiWriter(f, fileHash), 1<<20)
	zw := gzip.NewWriter(buf)
	c, err := s.copyOut(ctx, partition, zw)
	if err != nil {
		return 0, "", "", err
	}
	if err := zw.Close(); err != nil {
		return 0, "", "", fmt.Errorf("compress %s: %w", path, err)
	}
	if err := buf.Flush(); err != nil {
		return 0, "", "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, "", "", fmt.Errorf("sync %s: %w", path, err)
	}
	return c.rows, c.sha, hex.EncodeToString(fileHash.Sum(nil)), nil
}

// VerifyFile checks an archive file against its manifest: the file's
// SHA-256, the CSV's once decompressed, and its number of rows.
func VerifyFile(path string, m Manifest) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fileHash := sha256.New()
	if _, err := io.Copy(fileHash, f); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if hexSum(fileHash) != m.FileSHA256 {
		return fmt.Errorf("%s: file SHA-256 %s, the manifest says %s", path, hexSum(fileHash), m.FileSHA256)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dataHash := sha256.New()
	rows, err := countRecords(io.TeeReader(zr, dataHash))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := io.Copy(dataHash, zr); err != nil { // to gzip's end, which checks its CRC
		return fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case hexSum(dataHash) != m.DataSHA256:
		return fmt.Errorf("%s: data SHA-256 %s, the manifest says %s", path, hexSum(dataHash), m.DataSHA256)
	case rows != m.Rows:
		return fmt.Errorf("%s: %d rows, the manifest says %d", path, rows, m.Rows)
	}
	return nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// countRecords counts the CSV records after the header.
func countRecords(r io.Reader) (int64, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	if _, err := cr.Read(); err != nil {
		return 0, fmt.Errorf("header: %w", err)
	}
	var n int64
	for {
		_, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadManifest reads the manifest beside an archive file
// (<partition>.csv.gz → <partition>.manifest.json).
func ReadManifest(file string) (Manifest, error) {
	path := strings.TrimSuffix(file, ".csv.gz") + ".manifest.json"
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("read the manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Restored is an archive loaded back into the database for an audit.
type Restored struct {
	Manifest Manifest `json:"manifest"`
	// Table holds the archive's rows: ledger_restored_<partition>.
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
	// Differ counts the stock rows whose archived rows do not sum to the
	// ledger's rows of the archived range (its carried balances and the
	// rows kept): 0 when the archive is this ledger's and intact.
	Differ int64 `json:"differ"`
}

// Restore checks an archive file against its manifest, loads it into
// ledger_restored_<partition> (made again if it exists), and checks the
// rows loaded against the manifest and against the ledger: summed per
// stock row, they are what the ledger carries for that range.
func (s *Service) Restore(ctx context.Context, file string) (Restored, error) {
	m, err := ReadManifest(file)
	if err != nil {
		return Restored{}, err
	}
	if err := VerifyFile(file, m); err != nil {
		return Restored{}, err
	}
	q := db.New(s.pool)
	name, err := q.LedgerRestoreTable(ctx, m.Partition)
	if err != nil {
		return Restored{}, fmt.Errorf("make the table to restore into: %w", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return Restored{}, fmt.Errorf("open %s: %w", file, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return Restored{}, fmt.Errorf("%s: %w", file, err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return Restored{}, fmt.Errorf("acquire a connection: %w", err)
	}
	sql := fmt.Sprintf("COPY %s FROM STDIN WITH (FORMAT csv, HEADER true)", pgx.Identifier{name}.Sanitize())
	_, err = conn.Conn().PgConn().CopyFrom(ctx, zr, sql)
	conn.Release()
	if err != nil {
		return Restored{}, fmt.Errorf("load %s: %w", file, err)
	}
	check, err := q.LedgerRestoreCheck(ctx, m.Partition, m.From, m.To)
	if err != nil {
		return Restored{}, fmt.Errorf("check %s: %w", name, err)
	}
	r := Restored{Manifest: m, Table: name, Rows: check.Rows, Differ: check.Differ}
	if r.Rows != m.Rows {
		return r, fmt.Errorf("%s: %d rows loaded, the manifest says %d", file, r.Rows, m.Rows)
	}
	return r, nil
}
