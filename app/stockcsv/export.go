package stockcsv

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// ExportHeader is the export's header. Its first three columns make it an
// import file (sku,pool,set_total) that sets every pool back to its total;
// the import reads past the others.
var ExportHeader = []string{"sku", "pool", "set_total", "available", "reserved", "sold", "status"}

// exportPage is how many stock rows one query of the export reads.
const exportPage = 5000

// Export writes every stock row to w as CSV, ordered by SKU and pool, from
// one snapshot of the database (a read-only repeatable-read transaction):
// however long it takes, the file is the stock of one instant. It returns
// how many rows it wrote.
func Export(ctx context.Context, pool *pgxpool.Pool, w io.Writer) (int, error) {
	out := csv.NewWriter(w)
	if err := out.Write(ExportHeader); err != nil {
		return 0, err
	}
	n := 0
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var afterSKU, afterPool string
		for {
			rows, err := q.StockExportPage(ctx, afterSKU, afterPool, exportPage)
			if err != nil {
				return fmt.Errorf("read stock: %w", err)
			}
			for _, r := range rows {
				rec := []string{r.Sku, r.Pool, i64(r.Total), i64(r.Available), i64(r.Reserved), i64(r.Sold), r.Status}
				if err := out.Write(rec); err != nil {
					return err
				}
			}
			n += len(rows)
			if len(rows) < exportPage {
				return nil
			}
			afterSKU, afterPool = rows[len(rows)-1].Sku, rows[len(rows)-1].Pool
		}
	})
	if err != nil {
		return n, err
	}
	out.Flush()
	return n, out.Error()
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }
