package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/inventory"
)

var nonceField = regexp.MustCompile(`name="nonce" value="([^"]+)"`)

// TestRealRunKeepsTheDryRunsCutoff: "Roll back these N holds" after a dry
// run releases the holds the dry run counted and none made after it, for
// a SKU's scope and a campaign's alike. The real run copied the dry run's
// scope without its cut-off (and a campaign scope could carry none), so a
// hold made in between was released too.
func TestRealRunKeepsTheDryRunsCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	b := newBrowser(t, e.base)
	b.signIn(e.ops)

	// dryRunThenRun starts a dry run of form from the rollbacks page,
	// waits for its count, lets between make holds, then clicks the real
	// run and waits for it: it returns the count, what was released, and
	// whether the real run carries the dry run's cut-off.
	dryRunThenRun := func(form url.Values, between func()) (counted, released string, sameCutoff bool) {
		t.Helper()
		page := b.do("GET", "/ops/rollbacks", nil, nil)
		form.Set("csrf", csrfField.FindStringSubmatch(page.body)[1])
		form.Set("nonce", nonceField.FindStringSubmatch(page.body)[1])
		form.Set("reason", "payment outage")
		a := b.do("POST", "/ops/rollbacks", form, b.sameSite)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		dryPage := a.header.Get("Location")
		dry := strings.TrimPrefix(dryPage, "/ops/rollbacks/")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, "succeeded", e.scalarFor(c, `SELECT status FROM rollback_requests WHERE id = $1`, dry))
		}, 20*time.Second, 20*time.Millisecond)
		counted = e.scalar(`SELECT matched_count::text FROM rollback_requests WHERE id = $1`, dry)

		between()

		token := b.csrf(dryPage)
		a = b.do("POST", dryPage+"/run", url.Values{"csrf": {token}}, b.sameSite)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		real := strings.TrimPrefix(a.header.Get("Location"), "/ops/rollbacks/")
		require.NotEqual(t, dry, real)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, "succeeded", e.scalarFor(c, `SELECT status FROM rollback_requests WHERE id = $1`, real))
		}, 20*time.Second, 20*time.Millisecond)
		sameCutoff = e.scalar(`SELECT coalesce((r.scope->>'cutoff')::timestamptz = d.requested_at, false)::text
			FROM rollback_requests r, rollback_requests d WHERE r.id = $1 AND d.id = $2`, real, dry) == "true"
		return counted, e.scalar(`SELECT released_count::text FROM rollback_requests WHERE id = $1`, real), sameCutoff
	}

	// A SKU: the dry run counts 1 hold; a shop holds RB1 after it.
	dbtest.StockIn(e.t, e.pool, "RB1", 10)
	first := e.hold("rb1-1", "o-1", "RB1", 1)
	var later uuid.UUID
	counted, released, sameCutoff := dryRunThenRun(url.Values{"sku": {"RB1"}}, func() { later = e.hold("rb1-2", "o-2", "RB1", 1) })
	require.Equal(t, "1", counted)
	require.Equal(t, "1", released)
	require.True(t, sameCutoff, "the real run carries the dry run's cut-off")
	require.Equal(t, "released", e.scalar(`SELECT status FROM reservations WHERE id = $1`, first))
	require.Equal(t, "held", e.scalar(`SELECT status FROM reservations WHERE id = $1`, later), "held after the dry run")

	// A campaign: 3 counted, a 4th held after the dry run, 3 released.
	dbtest.StockIn(e.t, e.pool, "C1", 50)
	dbtest.Campaign(t, e.pool, "flash", &dbtest.CampaignOptions{Allotments: map[string]int64{"C1": 10}, Active: true})
	campaignHold := func(key string) uuid.UUID {
		r, _, err := e.app.Inventory.Hold(ctx, inventory.HoldRequest{Client: "shop-a", IdempotencyKey: key, Campaign: "flash",
			Items: []inventory.Item{{SKU: "C1", Quantity: 1}}})
		require.NoError(t, err)
		return r.ID
	}
	for _, k := range []string{"c-1", "c-2", "c-3"} {
		campaignHold(k)
	}
	var fourth uuid.UUID
	counted, released, sameCutoff = dryRunThenRun(url.Values{"campaign": {"flash"}}, func() { fourth = campaignHold("c-4") })
	require.Equal(t, "3", counted)
	require.Equal(t, "3", released)
	require.True(t, sameCutoff, "the real run carries the dry run's cut-off")
	require.Equal(t, "held", e.scalar(`SELECT status FROM reservations WHERE id = $1`, fourth), "held after the dry run")
	require.Equal(t, "3", e.scalar(`SELECT count(*)::text FROM reservations WHERE campaign = 'flash' AND status = 'released'`))
}
