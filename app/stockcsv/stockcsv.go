// Package stockcsv moves stock in and out as CSV files: the import, which
// applies a file of adjustments (sku,pool,delta) or counts
// (sku,pool,set_total), either with a location column after the SKU
// (sku,location,pool,...; without one, every row is at the default
// location), in transactions of 1,000 rows as a named import that resumes
// after a failure where it stopped, and the export, whose file the import
// reads back.
package stockcsv

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/stock"
)

// Column layouts of an import file: the header's first three columns, or
// four with a location column after the SKU.
const (
	// FormatDelta files add or take units: sku,pool,delta.
	FormatDelta = "delta"
	// FormatSetTotal files set each pool's total: sku,pool,set_total. An
	// export is one (with a location column).
	FormatSetTotal = "set_total"
)

// Row is one data row of an import file.
type Row struct {
	// Line is the row's line in the file (the header is line 1).
	Line int
	SKU  string
	// Location is the row's location: the default location when the file
	// has no location column or the cell is empty.
	Location string
	Pool     string
	// Value is the delta or the total, as the file's format says.
	Value int64
	// Serialized says the file marks the row as a pool of units with an
	// identity (its serialized column is true, as an export writes it):
	// the import skips it, since such a pool's total changes only through
	// its units.
	Serialized bool
}

// File is a parsed, validated import file. Prefixes[i] is the SHA-256 of
// the file's content through Rows[i] (see prefix hashing in Parse): an
// import records the one through the rows it applied, so a rerun can tell
// whether it has the same rows.
type File struct {
	Name   string
	Format string
	Rows   []Row
	// Ignored names the header's columns after the first three (four with
	// a location column), which the import reads past (an export's
	// available, reserved, ... columns), but serialized (see
	// Row.Serialized).
	Ignored []string
	// Located says the file has a location column.
	Located bool
	// SHA256 is the hash of the file's bytes.
	SHA256   [32]byte
	Prefixes [][32]byte
}

// Content is the SHA-256 of the file's content, every row: what tells two
// files of the same rows apart from two files of the same bytes.
func (f *File) Content() [32]byte { return f.Prefixes[len(f.Prefixes)-1] }

// Problems is why a file cannot be imported: one entry per bad line, at
// most maxProblems of them, and how many more there were.
type Problems struct {
	List []string
	More int
}

const maxProblems = 20

func (p *Problems) add(format string, args ...any) {
	if len(p.List) < maxProblems {
		p.List = append(p.List, fmt.Sprintf(format, args...))
	} else {
		p.More++
	}
}

func (p *Problems) Error() string {
	s := strings.Join(p.List, "\n")
	if p.More > 0 {
		s += fmt.Sprintf("\n... and %d more", p.More)
	}
	return s
}

// Parse reads and validates a whole import file, so that a file with a bad
// line changes nothing: the header must start with sku,pool,delta or
// sku,pool,set_total, or the same with location after sku (any case;
// further columns are ignored), a SKU, location or pool neutralized
// against spreadsheets is read back (Restore), every row must hold a valid
// SKU, a location (empty means the default location), a pool (empty means
// main) and a whole number (a non-zero delta, or a total of at least zero,
// up to 1,000,000,000), and no (sku, location, pool) may appear twice. A
// *Problems lists what is wrong.
//
// Each row's prefix hash covers the format and the sku, location (in a file
// with a location column), pool and value of every row up to it, each field
// length-prefixed: not the bytes, so a file saved with other line endings
// or quoting, or with a final newline added, has the same prefixes.
func Parse(name string, data []byte) (*File, error) {
	f := &File{Name: name, SHA256: sha256.Sum256(data)}
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return nil, &Problems{List: []string{"the file is empty: want a header sku,pool,delta or sku,pool,set_total (or sku,location,pool,...)"}}
	}
	if err != nil {
		return nil, &Problems{List: []string{err.Error()}}
	}
	serialized, err := f.readHeader(header)
	if err != nil {
		return nil, err
	}
	h := prefixHash{sha256.New()}
	h.field(f.Format)
	problems := &Problems{}
	seen := map[[3]string]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A malformed record (a bare quote, a wrong number of fields):
			// csv tells where, and reading on may resynchronise.
			problems.add("%v", err)
			var pe *csv.ParseError
			if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
				continue
			}
			break
		}
		line, _ := r.FieldPos(0)
		row, msg := f.readRow(line, rec, serialized)
		if msg != "" {
			problems.add("line %d: %s", line, msg)
			continue
		}
		k := [3]string{row.SKU, row.Location, row.Pool}
		if first, dup := seen[k]; dup {
			problems.add("line %d: SKU %q pool %s%s is already on line %d: give each pool once", line, row.SKU, row.Pool, stock.At(row.Location), first)
			continue
		}
		seen[k] = line
		f.Rows = append(f.Rows, row)
		f.Prefixes = append(f.Prefixes, h.row(row, f.Located))
	}
	if len(problems.List) > 0 {
		return nil, problems
	}
	if len(f.Rows) == 0 {
		return nil, &Problems{List: []string{"the file has a header but no rows"}}
	}
	return f, nil
}

// readHeader sets the file's format, whether it has a location column and
// the columns it ignores from its header, and returns the index of the
// serialized column in a record (the location column taken out), or -1.
func (f *File) readHeader(header []string) (serialized int, err error) {
	cols := make([]string, len(header))
	for i, h := range header {
		cols[i] = strings.ToLower(strings.TrimSpace(h))
	}
	if len(cols) >= 2 && cols[1] == "location" {
		f.Located = true
		cols = append(cols[:1:1], cols[2:]...)
	}
	if len(cols) < 3 || cols[0] != "sku" || cols[1] != "pool" || (cols[2] != FormatDelta && cols[2] != FormatSetTotal) {
		return 0, &Problems{List: []string{fmt.Sprintf("line 1: the header is %q: want sku,pool,delta or sku,pool,set_total, "+
			"or sku,location,pool,delta or sku,location,pool,set_total (more columns may follow)",
			strings.Join(header, ","))}}
	}
	f.Format = cols[2]
	serialized = -1
	for i, c := range cols[3:] {
		if c == SerializedColumn && serialized < 0 {
			serialized = 3 + i
			continue
		}
		f.Ignored = append(f.Ignored, c)
	}
	return serialized, nil
}

// readRow reads the record on line as a row of the file; msg says what is
// wrong with it, if anything.
func (f *File) readRow(line int, rec []string, serialized int) (row Row, msg string) {
	// An export's names come neutralized against spreadsheets ('=...).
	row = Row{Line: line, SKU: Restore(rec[0]), Location: stock.DefaultLocation}
	if f.Located {
		row.Location, rec = Restore(rec[1]), append(rec[:1:1], rec[2:]...)
		if row.Location == "" {
			row.Location = stock.DefaultLocation
		}
	}
	row.Pool = Restore(rec[1])
	if row.Pool == "" {
		row.Pool = stock.MainPool
	}
	if msg := rowProblem(&row, f.Format, rec[2]); msg != "" {
		return row, msg
	}
	if serialized >= 0 {
		switch v := strings.ToLower(strings.TrimSpace(rec[serialized])); v {
		case "true":
			row.Serialized = true
		case "false", "":
		default:
			return row, fmt.Sprintf("%s %q: want true or false", SerializedColumn, rec[serialized])
		}
	}
	return row, ""
}

// prefixHash is the hash of a file's rows so far (see Parse).
type prefixHash struct{ h hash.Hash }

// field adds one field, length-prefixed.
func (p prefixHash) field(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	p.h.Write(n[:])
	p.h.Write([]byte(s))
}

// row adds a row's fields and returns the prefix hash up to it.
func (p prefixHash) row(row Row, located bool) [32]byte {
	p.field(row.SKU)
	if located {
		p.field(row.Location)
	}
	p.field(row.Pool)
	p.field(strconv.FormatInt(row.Value, 10))
	if row.Serialized {
		// Only then: a file without the column hashes as it always did.
		p.field(SerializedColumn)
	}
	var sum [32]byte
	p.h.Sum(sum[:0])
	return sum
}

// rowProblem checks a row and sets its value; "" means it is fine.
func rowProblem(row *Row, format, value string) string {
	if err := domain.ValidName("sku", row.SKU); err != nil {
		return detail(err)
	}
	if err := domain.ValidName("pool", row.Pool); err != nil {
		return detail(err)
	}
	if err := domain.ValidName("location", row.Location); err != nil {
		return detail(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	switch {
	case err != nil:
		return fmt.Sprintf("%s %q is not a whole number", format, value)
	case format == FormatDelta && (v == 0 || v > stock.MaxAdjustment || v < -stock.MaxAdjustment):
		return fmt.Sprintf("delta %d: want a non-zero whole number from -%d to %d", v, stock.MaxAdjustment, stock.MaxAdjustment)
	case format == FormatSetTotal && (v < 0 || v > stock.MaxAdjustment):
		return fmt.Sprintf("set_total %d: want a whole number from 0 to %d", v, stock.MaxAdjustment)
	}
	row.Value = v
	return ""
}

func detail(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Detail
	}
	return err.Error()
}
