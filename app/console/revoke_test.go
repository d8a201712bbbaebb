package console_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app"
	"github.com/stockhold/stockhold/app/api/apitest"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/config"
)

// TestRevokedKeyRefusedOnEveryInstance revokes an ops key that two
// instances on one database have just admitted (and cached), and that has
// a console session: the session ends at once on both, and each instance
// refuses the bearer token within 5 seconds of the revocation.
func TestRevokedKeyRefusedOnEveryInstance(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cfg, err := config.Load(func(k string) string { return map[string]string{"DATABASE_URL": "postgres://unused"}[k] })
	require.NoError(t, err)
	other, err := app.New(cfg, e.pool, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close()) })
	second := httptest.NewServer(other.HTTP)
	t.Cleanup(second.Close)
	bases := []string{e.base, second.URL}

	get := func(base, path string, set func(*http.Request)) (int, error) {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			return 0, err
		}
		set(req)
		res, err := (&http.Client{Transport: apitest.Transport(t, nil), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+e.ops) }

	b := newBrowser(t, e.base)
	b.signIn(e.ops)
	var cookie *http.Cookie
	for _, c := range b.client.Jar.Cookies(&url.URL{Scheme: "http", Host: strings.TrimPrefix(e.base, "http://"), Path: "/ops/"}) {
		if c.Name == "stockhold_session" {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	withSession := func(r *http.Request) { r.AddCookie(cookie) }
	for _, base := range bases {
		status, err := get(base, "/v1/alerts", bearer)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s admits the key (and caches it)", base)
		status, err = get(base, "/ops/", withSession)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s takes the session", base)
	}

	revoked := time.Now()
	_, err = auth.Revoke(context.Background(), e.pool, "alice")
	require.NoError(t, err)

	for _, base := range bases {
		status, err := get(base, "/ops/", withSession)
		require.NoError(t, err)
		require.Equal(t, http.StatusSeeOther, status, "%s: the session ended with the key, at once", base)
		status, err = get(base, "/ops/jobs/", withSession)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, status, "%s: River's dashboard too", base)
	}
	for _, base := range bases {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			status, err := get(base, "/v1/alerts", bearer)
			assert.NoError(c, err)
			assert.Equal(c, http.StatusUnauthorized, status)
		}, 5*time.Second-time.Since(revoked), 50*time.Millisecond, "%s refuses the revoked key within 5 s", base)
	}
	t.Logf("both instances refused the key %s after the revocation", time.Since(revoked).Round(time.Millisecond))
}
