package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

func TestRollbackCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	env := map[string]string{"DATABASE_URL": dbtest.URL(t, pool), "USER": "carol"}
	getenv := func(k string) string { return env[k] }
	deps := services(t, pool)
	_, err := deps.Inventory.Adjust(ctx, stock.Adjustment{SKU: "A1", Delta: 10, Actor: "test"})
	require.NoError(t, err)
	_, _, err = deps.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop", IdempotencyKey: "k", Items: []inventory.Item{{SKU: "A1", Quantity: 1}}})
	require.NoError(t, err)

	cmd := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"rollback"}, args...), getenv, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	// held_before later than now is a usage error; nothing is recorded.
	code, _, errs := cmd("--operator", "alice", "--reason", "r", "--sku", "A1", "--held-before", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, 2, code)
	require.Contains(t, errs, "later than now")

	// A SKU with no stock row is refused by name; nothing is recorded.
	code, _, errs = cmd("--operator", "alice", "--reason", "r", "--sku", "NOPE", "--dry-run")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--sku NOPE: no such SKU")
	require.Equal(t, 0, dbtest.Count(t, pool, `SELECT count(*) FROM rollback_requests`))

	code, _, errs = cmd("--operator", "alice", "--reason", "r", "--campaign", "bf", "--cutoff", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--cutoff")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM rollback_requests`))

	// A cut-off of its own, with any scope, is recorded with the scope.
	cut := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	code, out, errs := cmd("--operator", "alice", "--reason", "r", "--campaign", "bf", "--cutoff", cut.Format(time.RFC3339), "--dry-run")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	dry, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	require.NoError(t, err)
	r, err := deps.Rollbacks.Get(ctx, dry)
	require.NoError(t, err)
	require.NotNil(t, r.OperatorKey)
	require.Equal(t, "db:"+dbUser(t, env["DATABASE_URL"]), *r.OperatorKey, "the command line acts as its database user")
	require.NotNil(t, r.Scope.Cutoff)
	require.True(t, cut.Equal(*r.Scope.Cutoff))
	require.True(t, cut.Equal(r.Cutoff()))

	code, out, errs = cmd("--operator", "alice", "--reason", "r", "--sku", "A1")
	require.Equal(t, 0, code, errs)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	id, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	require.NoError(t, err)

	// Its job is still to run: nothing to resume.
	code, out, errs = cmd("resume", fmt.Sprint(id))
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "nothing to resume")

	// Its job is deleted: resuming enqueues the first batch.
	_, err = pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'manual_rollback'`)
	require.NoError(t, err)
	code, out, errs = cmd("resume", fmt.Sprint(id))
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, fmt.Sprintf("rollback %d resumed: batch job", id))
	r, err = deps.Rollbacks.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, rollbacks.StatusRunning, r.Status)
	require.Equal(t, "carol", *r.ResumedBy, "$USER by default")
	code, out, _ = cmd("resume", "--operator", "dave", fmt.Sprint(id))
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to resume", "idempotent")

	code, _, errs = cmd("resume", "999999")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not found")
	code, _, errs = cmd("resume", "x")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "positive whole number")
	code, _, _ = cmd("resume")
	require.Equal(t, 2, code)
}
