package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
)

// TestBundleCommands walks the bundle commands: set (a split component
// too), get, set again (a new version), delete; and what they refuse: a
// component without stock, a bundle in itself, a bad component flag, a
// missing operator, a SKU that is not a bundle.
func TestBundleCommands(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	cmd, ok := commandsOn(t, pool)
	refused := refusedBy(t, cmd)
	dbtest.StockIn(t, pool, "MUG", 10)
	dbtest.StockIn(t, pool, "COASTER", 10)

	out := ok("bundle", "set", "BOX", "--component", "MUG=1", "--component", "COASTER=2:split", "--reason", "gift box", "--operator", "alice")
	require.Equal(t, "bundle BOX version 1, set by alice: gift box\n  1 x MUG\n  2 x COASTER (split)\n", out)
	require.Equal(t, out, ok("bundle", "get", "BOX"))
	require.Regexp(t, `^bundle BOX version 2, set by bob: `, ok("bundle", "set", "BOX", "--component", "MUG=2", "--reason", "two mugs", "--operator", "bob"))

	refused(1, `component "TEAPOT" has no stock at any location`, "bundle", "set", "KIT", "--component", "TEAPOT=1", "--reason", "r", "--operator", "bob")
	refused(1, "cannot contain itself", "bundle", "set", "KIT", "--component", "KIT=1", "--reason", "r", "--operator", "bob")
	refused(2, "after the quantity only :split may follow", "bundle", "set", "KIT", "--component", "MUG=1:x", "--reason", "r", "--operator", "bob")
	refused(2, "bundle set needs --operator", "bundle", "set", "KIT", "--component", "MUG=1", "--reason", "r")
	refused(1, `SKU "KIT" is not a bundle`, "bundle", "get", "KIT")

	require.Equal(t, "bundle BOX removed\n", ok("bundle", "delete", "BOX"))
	refused(1, "is not a bundle", "bundle", "delete", "BOX")
	require.Zero(t, dbtest.Count(t, pool, `SELECT count(*) FROM bundles`))
}
