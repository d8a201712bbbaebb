package app

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readOnlyTransaction is SQLSTATE 25006, read_only_sql_transaction: the
// session cannot write, because it reached a standby or a server being
// promoted or demoted (pg_auto_failover sets default_transaction_read_only
// on a node while it changes role).
const readOnlyTransaction = "25006"

// syncRepCancelled starts the WARNING PostgreSQL sends when a COMMIT's
// wait for the synchronous standby was cancelled (by statement_timeout or
// a cancel request): the transaction committed on this server only, and
// COMMIT still answers success. A failover to the standby would lose it.
const syncRepCancelled = "canceling wait for synchronous replication"

// failoverGuard makes a pool's connections safe across a change of
// primary (a failover, a switchover), for pools on a multi-host URL with
// target_session_attrs=read-write:
//
//   - A connection that gets a read-only error is closed at once, and the
//     pool's other connections, which reached the same server, are dropped
//     as they come back (pgxpool's Reset): the next connections go to the
//     primary. Without it, a pool whose server turned read-only in place
//     would fail every request on those connections for as long as they
//     live. The request that met the error answers 503 unavailable.
//   - A COMMIT whose wait for the synchronous standby was cancelled is
//     made to fail: the connection is closed before COMMIT's success is
//     read, so the caller gets an error (503 unavailable to an HTTP
//     client, which retries with its Idempotency-Key) instead of
//     acknowledging a change only this server has.
//
// pool, filled in once the pool exists, is the pool to reset.
type failoverGuard struct {
	pool atomic.Pointer[pgxpool.Pool]
}

// guardPool hooks a new failoverGuard into cfg's connections, replacing
// the hooks a configuration copied from another pool carries (they would
// reset that pool), and returns it; set its pool once the pool exists.
// pgconn's own default, closing a connection on a FATAL error, is kept.
func guardPool(cfg *pgxpool.Config) *failoverGuard {
	g := &failoverGuard{}
	c := &cfg.ConnConfig.Config
	c.OnPgError = func(_ *pgconn.PgConn, err *pgconn.PgError) bool {
		if err.Code == readOnlyTransaction {
			if p := g.pool.Load(); p != nil {
				go p.Reset()
			}
			return false
		}
		return !strings.EqualFold(err.Severity, "FATAL")
	}
	c.OnNotice = func(conn *pgconn.PgConn, n *pgconn.Notice) {
		if n.Code == "01000" && strings.HasPrefix(n.Message, syncRepCancelled) {
			// COMMIT's CommandComplete follows this notice: reading it
			// now fails, as if the connection had dropped mid-commit.
			_ = conn.Close(context.Background())
		}
	}
	return g
}

// connectProbe is the write a new connection commits before the pool
// takes it: a transactional logical message (WAL and nothing else, no
// table needed, so migrations can connect too), its commit given two
// seconds to be confirmed by the synchronous standby. It is
// transaction control and a fixed statement, sent as one simple query so
// that it costs one round trip, and the only SQL besides app/batch/pipe.go's
// written in Go.
const connectProbe = "BEGIN; SET LOCAL statement_timeout = 2000; " +
	"SELECT pg_logical_emit_message(true, 'stockhold', 'connect'); COMMIT"

// confirmWrites is pgconn's ValidateConnect for the app's pools: after
// validate (target_session_attrs', when DATABASE_URL sets it), the
// connection commits connectProbe. A standby refuses it (read-only); an old
// primary restarted before its demotion cannot have it confirmed (its
// standby is being promoted), and the failoverGuard turns the cancelled
// wait into an error. Either way pgx goes on to the next host. Without
// it, such a server's connections answered reads from commits only it had:
// in the failover drill a partial release that committed there just
// before the kill, and whose answer the kill cut, was replayed from it to
// the client's retry (200) and was gone once the server was rewound.
func confirmWrites(validate pgconn.ValidateConnectFunc) pgconn.ValidateConnectFunc {
	return func(ctx context.Context, conn *pgconn.PgConn) error {
		if validate != nil {
			if err := validate(ctx, conn); err != nil {
				return err
			}
		}
		if _, err := conn.Exec(ctx, connectProbe).ReadAll(); err != nil {
			return fmt.Errorf("commit a write on connecting: %w", err)
		}
		return nil
	}
}
