package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/alerts"
)

// TestDashboardRefusesCrossSite: with Basic
// auth (which a browser resends on its own), a cross-site POST to River
// UI's cancel endpoint with Content-Type text/plain (no CORS preflight)
// cancelled a job. Now any state-changing request from another site, or
// from a browser that says nothing of where it comes from, is refused and
// changes nothing; the dashboard's own pages and bearer-token clients
// still work; and every page is unframeable with a CSP.
func TestDashboardRefusesCrossSite(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	ctx := context.Background()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+in.ops))
	job := func() int64 {
		res, err := in.app.Inserter.Insert(ctx, alerts.DeliverAlertArgs{AlertID: 1}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		return res.Job.ID
	}
	state := func(id int64) rivertype.JobState {
		row, err := in.app.Worker.JobGet(ctx, id)
		require.NoError(t, err)
		return row.State
	}
	cancel := func(id int64, headers ...string) answer {
		req, err := http.NewRequest("POST", in.base+"/ops/jobs/api/jobs/cancel", strings.NewReader(fmt.Sprintf(`{"ids": ["%d"]}`, id)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "text/plain")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		res, err := in.http.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		return answer{status: res.StatusCode, header: res.Header}
	}

	victim := job()
	for name, headers := range map[string][]string{
		"the issue's curl":              {"Authorization", basic, "Origin", "https://evil.example"},
		"cross-site fetch":              {"Authorization", basic, "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"},
		"sibling site":                  {"Authorization", basic, "Origin", "https://other.example.com", "Sec-Fetch-Site", "same-site"},
		"cross-site, own Origin forged": {"Authorization", basic, "Origin", in.base, "Sec-Fetch-Site", "cross-site"},
		"sandboxed page":                {"Authorization", basic, "Origin", "null"},
		"Basic auth, no Origin at all":  {"Authorization", basic},
		"bearer, but from another site": {"Authorization", "Bearer " + in.ops, "Origin", "https://evil.example"},
	} {
		a := cancel(victim, headers...)
		require.Equal(t, http.StatusForbidden, a.status, name)
		require.Equal(t, "application/problem+json", a.header.Get("Content-Type"), name)
		require.Equal(t, rivertype.JobStateScheduled, state(victim), "%s: the job was not cancelled", name)
	}

	// The dashboard's own page, in a browser.
	a := cancel(victim, "Authorization", basic, "Origin", in.base, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, rivertype.JobStateCancelled, state(victim))
	// A script with a bearer token (not a browser) sends no Origin.
	other := job()
	a = cancel(other, "Authorization", "Bearer "+in.ops)
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, rivertype.JobStateCancelled, state(other))

	page := in.must("GET", "/ops/jobs/", "", "", "Authorization", basic, "Accept", "text/html")
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, string(page.body), "<html")
	require.Equal(t, "DENY", page.header.Get("X-Frame-Options"))
	require.Contains(t, page.header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Contains(t, page.header.Get("Content-Security-Policy"), "script-src 'self'")

	// The document describes only GET /ops/jobs/ (openapi.json says why):
	// other methods on the page itself are River UI's 405, as it says.
	for _, method := range []string{"POST", "PUT", "PATCH"} {
		a := in.must(method, "/ops/jobs/", "", "{}", "Authorization", "Bearer "+in.ops)
		require.Equal(t, http.StatusMethodNotAllowed, a.status, method)
		require.True(t, strings.HasPrefix(a.header.Get("Content-Type"), "text/plain"), "%s: %s", method, a.header.Get("Content-Type"))
	}
}

// TestDashboardLinksBackToTheConsole: every page of River's dashboard
// carries a link back to the operator console, right after its body tag
// (the dashboard had no way back); its scripts and JSON API are served as
// River UI writes them.
func TestDashboardLinksBackToTheConsole(t *testing.T) {
	t.Parallel()
	in := start(t, nil)
	link := `<a href="/ops/" id="stockhold-console"`
	for _, path := range []string{"/ops/jobs/", "/ops/jobs/jobs?state=available", "/ops/jobs/queues"} {
		page := in.must("GET", path, "", "", "Authorization", "Bearer "+in.ops, "Accept", "text/html")
		require.Equal(t, http.StatusOK, page.status, path)
		body := string(page.body)
		require.Equal(t, 1, strings.Count(body, link), "%s:\n%s", path, body)
		_, after, ok := strings.Cut(body, "<body")
		require.True(t, ok, path)
		require.True(t, strings.HasPrefix(after[strings.Index(after, ">")+1:], link), "%s: the link comes first in the body", path)
		require.Equal(t, strconv.Itoa(len(page.body)), page.header.Get("Content-Length"), path)
	}
	api := in.must("GET", "/ops/jobs/api/queues", "", "", "Authorization", "Bearer "+in.ops)
	require.Equal(t, http.StatusOK, api.status)
	require.NotContains(t, string(api.body), link, "River UI's JSON API is left as it is")
}
