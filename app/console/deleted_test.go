package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/retention"
)

// TestDeletedHoldKeepsItsHistory lets retention delete a released hold:
// the SKU's ledger page still lists its movements and links to it, and the
// hold's page shows its history from the ledger instead of a 404.
func TestDeletedHoldKeepsItsHistory(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dbtest.StockIn(e.t, e.pool, "A1", 10)
	id := e.hold("k1", "o-1", "A1", 3)
	_, err := e.app.Inventory.Release(context.Background(), id, inventory.Caller{Name: "shop-a"}, "changed my mind")
	require.NoError(t, err)
	_, err = e.pool.Exec(context.Background(), `UPDATE reservations SET released_at = now() - interval '40 days', expires_at = now() - interval '40 days'`)
	require.NoError(t, err)
	res, err := retention.New(e.pool, retention.Config{After: 30 * 24 * time.Hour}).Run(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Holds)

	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	sku := b.do("GET", "/ops/skus/A1", nil, nil)
	require.Equal(t, http.StatusOK, sku.status)
	require.Contains(t, sku.body, `href="/ops/holds/`+id.String()+`"`)
	page := b.do("GET", "/ops/holds/"+id.String(), nil, nil)
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, "the retention job deleted it")
	require.Contains(t, page.body, "changed my mind", "the release's reason, from the ledger")
	require.Contains(t, page.body, `<td data-label="kind">reserve</td>`)
	require.Contains(t, page.body, "shop-a")
	require.Equal(t, http.StatusNotFound, b.do("GET", "/ops/holds/6f1d3c3e-0000-4000-8000-000000000000", nil, nil).status,
		"a hold that never was is still a 404")
}
