package stockcsv

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/db"
)

// ExportHeader is the export's header. Its first four columns make it an
// import file (sku,location,pool,set_total) that sets every pool back to
// its total; the import reads past the others (every state), except
// serialized: a row of a pool of units with an identity, whose total
// changes only through its units, which the import skips (see
// SerializedColumn).
var ExportHeader = []string{"sku", "location", "pool", "set_total", "available", "reserved", "sold",
	"quality_control", "damaged", "safety_stock", "incoming", "status", SerializedColumn}

// SerializedColumn names the column that marks a row of a pool of units
// with an identity (seats, serial numbers): true there, false elsewhere.
const SerializedColumn = "serialized"

// exportPage is how many stock rows one query of the export reads.
const exportPage = 5000

// Export writes every stock row to w as CSV, ordered by SKU and pool, from
// one snapshot of the database (a read-only repeatable-read transaction):
// however long it takes, the file is the stock of one instant. Names that a
// spreadsheet would run as a formula are written neutralized (see
// Neutralize); the import reads them back. It returns how many rows it
// wrote.
func Export(ctx context.Context, pool *pgxpool.Pool, w io.Writer) (int, error) {
	out := csv.NewWriter(w)
	if err := out.Write(ExportHeader); err != nil {
		return 0, err
	}
	n := 0
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := db.New(tx)
		var afterSKU, afterLocation, afterPool string
		for {
			rows, err := q.StockExportPage(ctx, db.StockExportPageParams{AfterSku: afterSKU, AfterLocation: afterLocation, AfterPool: afterPool, Lim: exportPage})
			if err != nil {
				return fmt.Errorf("read stock: %w", err)
			}
			for _, r := range rows {
				rec := []string{Neutralize(r.Sku), Neutralize(r.Location), Neutralize(r.Pool), i64(r.Total), i64(r.Available), i64(r.Reserved), i64(r.Sold),
					i64(r.QualityControl), i64(r.Damaged), i64(r.SafetyStock), i64(r.Incoming), r.Status, strconv.FormatBool(r.Serialized)}
				if err := out.Write(rec); err != nil {
					return err
				}
			}
			n += len(rows)
			if len(rows) < exportPage {
				return nil
			}
			last := rows[len(rows)-1]
			afterSKU, afterLocation, afterPool = last.Sku, last.Location, last.Pool
		}
	})
	if err != nil {
		return n, err
	}
	out.Flush()
	return n, out.Error()
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// Neutralize is a cell as the export writes it: a value a spreadsheet
// would take for a formula (it starts with =, +, -, @, a tab or a carriage
// return: a SKU such as =cmd|' -C calc'!A0) gets a single quote in front,
// OWASP's rule against CSV injection, which spreadsheets show as text and
// do not run. So that the import can take the quote off again (Restore), a
// value that already starts with quotes before such a character gets one
// more: every value comes back as it was.
func Neutralize(v string) string {
	if risky(strings.TrimLeft(v, "'")) {
		return "'" + v
	}
	return v
}

// Restore is a cell of an import file as a name: one single quote in front
// of what Neutralize guards (quotes, then =, +, -, @, a tab or a carriage
// return) is taken off, so an export imports back to the same names. Any
// other value is left as it is.
func Restore(v string) string {
	if strings.HasPrefix(v, "'") && risky(strings.TrimLeft(v, "'")) {
		return v[1:]
	}
	return v
}

// risky reports whether v starts with a character that makes a
// spreadsheet cell a formula.
func risky(v string) bool {
	return v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0]))
}
