package batch

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipe sends the queries of several sqlc batch calls to PostgreSQL in one
// round trip. Used as the DBTX of db.New, it collects what each batch call
// queues instead of sending it; RoundTrip ships them all at once and lets
// the caller read their results in the order they were queued, through the
// result values the sqlc calls returned.
//
// Its error contract: a pipe's errors come out in one place, the error
// RoundTrip returns, which is the first error any queued statement
// reported (or the connection's). Every result read records its error in
// the pipe, and RoundTrip reads whatever the caller did not, so the caller
// reads only the results it needs and ignores the errors of those reads
// (`rows, _ := Collect(...)`): a failed read leaves its result empty, and
// RoundTrip's error says why. In PostgreSQL a failed statement aborts the
// transaction, so a commit queued after it rolls back.
//
// A pipe may also carry the transaction's begin and commit, so that a whole
// batch transaction costs two round trips: the statements that read what
// the batch decides on, then the ones that write the decision and commit.
// They are the only SQL written in Go here: transaction control, as pgx
// itself sends it.
type Pipe struct {
	conn    *pgx.Conn
	batch   pgx.Batch
	results pgx.BatchResults
	next    int   // position of the next result to read
	err     error // the first error a result reported
}

func NewPipe(conn *pgx.Conn) *Pipe {
	return &Pipe{conn: conn}
}

// errNotPiped is what a query that is not a batch query gets from a pipe:
// only :batch queries can be collected.
var errNotPiped = errors.New("only sqlc batch queries can go through a pipe")

func (p *Pipe) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNotPiped
}

func (p *Pipe) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errNotPiped }

func (p *Pipe) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{errNotPiped} }

// SendBatch collects the queries of one sqlc batch call; their results
// are the ones at the positions they were queued at.
func (p *Pipe) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	r := &piped{p: p, pos: len(p.batch.QueuedQueries)}
	p.batch.QueuedQueries = append(p.batch.QueuedQueries, b.QueuedQueries...)
	return r
}

// Begin and Commit queue transaction control, whose results the pipe reads
// itself.
func (p *Pipe) Begin()  { p.batch.Queue("begin") }
func (p *Pipe) Commit() { p.batch.Queue("commit") }

// RoundTrip ships everything queued in one round trip, calls read (which
// reads the results it needs, in the order they were queued; nil: none),
// reads the rest, and returns the first error any statement reported. See
// pipe for the contract.
func (p *Pipe) RoundTrip(ctx context.Context, read func()) error {
	p.results = p.conn.SendBatch(ctx, &p.batch)
	if read != nil {
		read()
	}
	return p.close()
}

// errOutOfOrder is what reading a result gets when a later one was read
// already: the round trip's results come in the order they were queued.
var errOutOfOrder = errors.New("a pipe's results are read in the order they were queued")

// skipTo reads and drops the results before position pos that nobody
// read (transaction control, statements whose results the caller does not
// need), recording their errors.
func (p *Pipe) skipTo(pos int) error {
	if pos < p.next {
		p.fail(errOutOfOrder)
		return errOutOfOrder
	}
	for p.next < pos {
		p.next++
		if _, err := p.results.Exec(); err != nil {
			p.fail(err)
			return err
		}
	}
	return nil
}

func (p *Pipe) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// close reads what is left and ends the round trip; it returns the first
// error any statement reported.
func (p *Pipe) close() error {
	if p.results == nil {
		return p.err
	}
	_ = p.skipTo(len(p.batch.QueuedQueries))
	if err := p.results.Close(); err != nil {
		p.fail(err)
	}
	return p.err
}

// piped is the results of one sqlc batch call: the results of the pipe's
// round trip from position pos on, one for each query the call queued.
type piped struct {
	p   *Pipe
	pos int // the position of its next result
}

// next moves the pipe to r's next result.
func (r *piped) next() error {
	if err := r.p.skipTo(r.pos); err != nil {
		return err
	}
	r.p.next++
	r.pos++
	return nil
}

func (r *piped) Exec() (pgconn.CommandTag, error) {
	if err := r.next(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := r.p.results.Exec()
	if err != nil {
		r.p.fail(err)
	}
	return tag, err
}

func (r *piped) Query() (pgx.Rows, error) {
	if err := r.next(); err != nil {
		return nil, err
	}
	rows, err := r.p.results.Query()
	if err != nil {
		r.p.fail(err)
	}
	return rows, err
}

func (r *piped) QueryRow() pgx.Row {
	if err := r.next(); err != nil {
		return errRow{err}
	}
	return r.p.results.QueryRow()
}

// Close does nothing: the pipe ends the round trip once every result is read.
func (r *piped) Close() error { return nil }

// Tx is nil: a pipe carries its own begin and commit.
func (r *piped) Tx() pgx.Tx { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Collect reads the rows of one sqlc :batchmany result whose call carried a
// single set of parameters.
func Collect[T any](read func(func(int, []T, error))) ([]T, error) {
	var (
		out []T
		err error
	)
	read(func(_ int, rows []T, e error) { out, err = rows, e })
	return out, err
}

// rollbackTimeout bounds the rollback of a failed pipe's transaction.
const rollbackTimeout = 5 * time.Second

// Rollback ends whatever transaction a failed pipe left open on conn. When
// even that fails the connection is closed, and the pool drops it.
func Rollback(conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' || conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "rollback"); err != nil {
		_ = conn.Close(ctx)
	}
}
