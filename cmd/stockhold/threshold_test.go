package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestThresholdCommands sets and clears low-stock thresholds from the
// command line: a pool's, and a bundle's on what its components make at a
// location; and what they refuse: a missing threshold, operator or SKU, a
// negative threshold, a location where the bundle has no component, a
// bundle's pool other than main.
func TestThresholdCommands(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cmd, ok := commandsOn(t, pool)
	refused := refusedBy(t, cmd)
	dbtest.Location(t, pool, "berlin", 1)
	dbtest.StockIn(t, pool, "MUG", 10)
	dbtest.StockIn(t, pool, "COASTER", 10)
	ok("bundle", "set", "BOX", "--component", "MUG=1", "--component", "COASTER=2", "--reason", "gift box", "--operator", "alice")

	require.Equal(t, "MUG at default (pool main): available 10, low-stock threshold 4\n",
		ok("threshold", "set", "--sku", "MUG", "--threshold", "4", "--operator", "alice"))
	require.Equal(t, "bundle BOX at default: available 5, low-stock threshold 5: low\n",
		ok("threshold", "set", "--sku", "BOX", "--threshold", "5", "--operator", "alice"))
	require.Equal(t, 1, dbtest.Count(t, pool, `SELECT count(*) FROM bundle_thresholds WHERE sku = 'BOX' AND location = 'default' AND threshold = 5 AND low AND set_by = 'alice'`))

	refused(2, "threshold set needs --threshold", "threshold", "set", "--sku", "BOX", "--operator", "alice")
	refused(2, "threshold set needs --threshold", "threshold", "set", "--sku", "BOX", "--threshold", "-1", "--operator", "alice")
	refused(2, "threshold clear needs --operator", "threshold", "clear", "--sku", "BOX")
	refused(2, "threshold set needs --sku", "threshold", "set", "--threshold", "1", "--operator", "alice")
	refused(1, "it makes nothing there", "threshold", "set", "--sku", "BOX", "--location", "berlin", "--threshold", "1", "--operator", "alice")
	refused(1, "it has no pool", "threshold", "set", "--sku", "BOX", "--pool", "c1", "--threshold", "1", "--operator", "alice")

	require.Equal(t, "bundle BOX at default: available 5, no low-stock threshold\n", ok("threshold", "clear", "--sku", "BOX", "--operator", "bob"))
	require.Equal(t, "MUG at default (pool main): available 10, no low-stock threshold\n", ok("threshold", "clear", "--sku", "MUG", "--operator", "bob"))
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM bundle_thresholds`))
}
