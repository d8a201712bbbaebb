package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestInboundCommands walks the inbound commands: a notice of two lines
// at a warehouse, listed as open, one line received in part, the notice
// closed short; a second cancelled; a notice expected in the past and a
// line that is not SKU=N refused.
func TestInboundCommands(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	t.Cleanup(func() { dbtest.RequireInvariants(t, pool) })
	cmd, ok := commandsOn(t, pool)
	lastLine := func(out string) string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	dbtest.Location(t, pool, "paris", 1)
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)

	out := ok("inbound", "create", "--supplier-ref", "PO-7", "--location", "paris", "--expected", tomorrow,
		"--line", "A1=10", "--line", "B2:main=4", "--operator", "alice")
	require.Contains(t, out, "from PO-7 at paris, expected "+tomorrow+", open")
	require.Contains(t, out, "A1 (pool main): 10 ordered, 0 received, 0 short, 10 expected")
	id := lastLine(out)
	require.Regexp(t, id+`\s+PO-7\s+paris\s+`+tomorrow+`\s+open\s+2\s+14\s+0\s+14`, ok("inbound", "list", "--status", "open"))
	require.Contains(t, ok("inbound", "receive", id, "--sku", "A1", "--quantity", "6", "--operator", "bob"),
		"A1 (pool main): 10 ordered, 6 received, 0 short, 4 expected")
	code, _, errs := cmd("inbound", "receive", id, "--sku", "A1", "--quantity", "5", "--operator", "bob")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "insufficient_incoming")
	out = ok("inbound", "close", id, "--operator", "bob", "--reason", "supplier short")
	require.Contains(t, out, "closed")
	require.Contains(t, out, "B2 (pool main): 4 ordered, 0 received, 4 short, 0 expected")

	second := lastLine(ok("inbound", "create", "--supplier-ref", "PO-8", "--location", "paris", "--expected", tomorrow,
		"--line", "A1=2", "--operator", "alice"))
	require.Contains(t, ok("inbound", "cancel", second, "--operator", "bob", "--reason", "withdrawn"), "cancelled")

	code, _, errs = cmd("inbound", "create", "--supplier-ref", "PO-9", "--expected", "2001-01-01", "--line", "A1=1", "--operator", "alice")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "in the past")
	code, _, _ = cmd("inbound", "create", "--supplier-ref", "PO-9", "--expected", tomorrow, "--line", "A1", "--operator", "alice")
	require.Equal(t, 2, code, "a line that is not SKU=N is a usage error")
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM stock WHERE sku = 'A1' AND available = 6 AND incoming = 0`))
}
