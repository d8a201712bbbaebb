package inventory

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipe sends the queries of several sqlc batch calls to PostgreSQL in one
// round trip. Used as the DBTX of db.New, it collects what each batch call
// queues instead of sending it; roundTrip ships them all at once and lets
// the caller read their results in the order they were queued, through the
// result values the sqlc calls returned.
//
// Its error contract: a pipe's errors come out in one place, the error
// roundTrip returns, which is the first error any queued statement
// reported (or the connection's). Every result read records its error in
// the pipe, and roundTrip reads whatever the caller did not, so the caller
// reads only the results it needs and ignores the errors of those reads
// (`rows, _ := collect(...)`): a failed read leaves its result empty, and
// roundTrip's error says why. In PostgreSQL a failed statement aborts the
// transaction, so a commit queued after it rolls back.
//
// A pipe may also carry the transaction's begin and commit, so that a whole
// batch transaction costs two round trips: the statements that read what
// the batch decides on, then the ones that write the decision and commit.
// They are the only SQL written in Go here: transaction control, as pgx
// itself sends it.
type pipe struct {
	conn    *pgx.Conn
	batch   pgx.Batch
	control map[int]bool // positions of begin and commit, read by the pipe itself
	results pgx.BatchResults
	next    int   // position of the next result to read
	err     error // the first error a result reported
}

func newPipe(conn *pgx.Conn) *pipe {
	return &pipe{conn: conn, control: map[int]bool{}}
}

// errNotPiped is what a query that is not a batch query gets from a pipe:
// only :batch queries can be collected.
var errNotPiped = errors.New("only sqlc batch queries can go through a pipe")

func (p *pipe) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNotPiped
}

func (p *pipe) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errNotPiped }

func (p *pipe) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{errNotPiped} }

// SendBatch collects the queries of one sqlc batch call.
func (p *pipe) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	p.batch.QueuedQueries = append(p.batch.QueuedQueries, b.QueuedQueries...)
	return piped{p}
}

// begin and commit queue transaction control.
func (p *pipe) begin()  { p.queueControl("begin") }
func (p *pipe) commit() { p.queueControl("commit") }

func (p *pipe) queueControl(sql string) {
	p.control[len(p.batch.QueuedQueries)] = true
	p.batch.Queue(sql)
}

// roundTrip ships everything queued in one round trip, calls read (which
// reads the results it needs; nil: none), reads the rest, and returns the
// first error any statement reported. See pipe for the contract.
func (p *pipe) roundTrip(ctx context.Context, read func()) error {
	p.results = p.conn.SendBatch(ctx, &p.batch)
	if read != nil {
		read()
	}
	return p.close()
}

// skipControl reads the results of transaction control that come next.
func (p *pipe) skipControl() error {
	for p.control[p.next] {
		p.next++
		if _, err := p.results.Exec(); err != nil {
			p.fail(err)
			return err
		}
	}
	return nil
}

func (p *pipe) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// close reads what is left and ends the round trip; it returns the first
// error any statement reported.
func (p *pipe) close() error {
	if p.results == nil {
		return p.err
	}
	for p.next < len(p.batch.QueuedQueries) {
		if err := p.skipControl(); err != nil {
			break
		}
		if p.next < len(p.batch.QueuedQueries) {
			p.next++
			if _, err := p.results.Exec(); err != nil {
				p.fail(err)
				break
			}
		}
	}
	if err := p.results.Close(); err != nil {
		p.fail(err)
	}
	return p.err
}

// piped is the results of one sqlc batch call: consecutive results of the
// pipe's round trip.
type piped struct{ p *pipe }

func (r piped) Exec() (pgconn.CommandTag, error) {
	if err := r.p.skipControl(); err != nil {
		return pgconn.CommandTag{}, err
	}
	r.p.next++
	tag, err := r.p.results.Exec()
	if err != nil {
		r.p.fail(err)
	}
	return tag, err
}

func (r piped) Query() (pgx.Rows, error) {
	if err := r.p.skipControl(); err != nil {
		return nil, err
	}
	r.p.next++
	rows, err := r.p.results.Query()
	if err != nil {
		r.p.fail(err)
	}
	return rows, err
}

func (r piped) QueryRow() pgx.Row {
	if err := r.p.skipControl(); err != nil {
		return errRow{err}
	}
	r.p.next++
	return r.p.results.QueryRow()
}

// Close does nothing: the pipe ends the round trip once every result is read.
func (r piped) Close() error { return nil }

// Tx is nil: a pipe carries its own begin and commit.
func (r piped) Tx() pgx.Tx { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// collect reads the rows of one sqlc :batchmany result whose call carried a
// single set of parameters.
func collect[T any](read func(func(int, []T, error))) ([]T, error) {
	var (
		out []T
		err error
	)
	read(func(_ int, rows []T, e error) { out, err = rows, e })
	return out, err
}

// rollback ends whatever transaction a failed pipe left open on conn. When
// even that fails the connection is closed, and the pool drops it.
func rollback(conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' || conn.IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "rollback"); err != nil {
		_ = conn.Close(ctx)
	}
}
