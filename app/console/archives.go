package console

import (
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/stock"
)

// carriedPage is how many carried balances an archive's page shows.
const carriedPage = 200

// archived is one archived range of the ledger, as the console shows it.
type archived struct {
	db.LedgerArchive
	// Span names the range: a month, "before" a month for the first
	// partition, or its two ends.
	Span string
	// Data is the archive file, beside its manifest (File).
	Data string
}

func archivedOf(a db.LedgerArchive) archived {
	return archived{LedgerArchive: a, Span: span(a.FromAt, a.ToAt),
		Data: filepath.Join(filepath.Dir(a.File), a.Partition+".csv.gz")}
}

// span names the range from (nil: the beginning) to to.
func span(from *time.Time, to time.Time) string {
	to = to.UTC()
	month := func(t time.Time) bool { return t.Equal(time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)) }
	switch {
	case from == nil && month(to):
		return "before " + to.Format("2006-01")
	case from == nil:
		return "before " + when(to)
	case month(from.UTC()) && to.Equal(from.UTC().AddDate(0, 1, 0)):
		return from.UTC().Format("2006-01")
	}
	return when(*from) + " to " + when(to)
}

// archives lists what of the ledger has been archived, oldest first.
func (c *Console) archives(w http.ResponseWriter, r *http.Request, op who) error {
	rows, err := db.New(c.Pool).LedgerArchiveList(r.Context())
	if err != nil {
		return err
	}
	list := make([]archived, len(rows))
	for i, a := range rows {
		list[i] = archivedOf(a)
	}
	return c.render(w, r, op, "archives", view{Title: "Archives", Nav: "archives", Data: list})
}

type archiveData struct {
	archived
	// Carried are the balances it carried forward, a page at a time by
	// stock row; SKU filters them; After is the page's cursor and Next the
	// next page's (0: none).
	Carried     []stock.Movement
	SKU         string
	After, Next int64
}

// archive shows one archive and the balances it carried forward
// (?sku=S: of one SKU; ?after=ID: the page after that carried row).
func (c *Console) archive(w http.ResponseWriter, r *http.Request, op who) error {
	name := r.PathValue("partition")
	logging.Add(r.Context(), slog.String("partition", name))
	q := db.New(c.Pool)
	a, err := q.LedgerArchiveGet(r.Context(), name)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Missing("archive")
	}
	if err != nil {
		return err
	}
	d := archiveData{archived: archivedOf(a), SKU: r.URL.Query().Get("sku")}
	p := db.LedgerCarriedPageParams{At: a.ToAt.Add(-time.Microsecond), Lim: carriedPage + 1}
	if d.SKU != "" {
		p.Sku = &d.SKU
	}
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return domain.Invalid("after must be a ledger id")
		}
		p.AfterID, d.After = &n, n
	}
	rows, err := q.LedgerCarriedPage(r.Context(), p)
	if err != nil {
		return err
	}
	if len(rows) > carriedPage {
		rows = rows[:carriedPage]
		d.Next = rows[len(rows)-1].ID
	}
	d.Carried = stock.Movements(rows)
	return c.render(w, r, op, "archive", view{Title: "Archive " + d.Span, Nav: "archives", Data: d})
}
