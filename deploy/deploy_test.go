// Package deploy holds what an operator deploys stockhold with: a systemd
// unit and its environment file, example Prometheus alerting rules (with
// their promtool unit tests) and a Grafana dashboard. Its tests keep them
// true to the binary.
package deploy

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/stockhold/stockhold/app/metrics"
	"github.com/stockhold/stockhold/internal/debian"
)

const (
	rulesFile     = "prometheus/stockhold-alerts.yml"
	rulesTestFile = "prometheus/stockhold-alerts.test.yml"
	dashboardFile = "grafana/stockhold-dashboard.json"
)

var metricName = regexp.MustCompile(`\bstockhold_[a-z0-9_]+`)

// requireExported fails for every stockhold_ metric expr names that the
// binary does not export (a histogram's _bucket, _count and _sum included).
func requireExported(t *testing.T, where, expr string) {
	t.Helper()
	names := metrics.Names()
	for _, name := range metricName.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if !slices.Contains(names, base) {
				base = strings.TrimSuffix(base, suffix)
			}
		}
		require.Contains(t, names, base, "%s uses %s, which stockhold does not export", where, name)
	}
}

func TestAlertRulesUseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(rulesFile)
	require.NoError(t, err)
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.Groups)
	seen := map[string]bool{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s has a rule without a name", g.Name)
			require.False(t, seen[r.Alert], "alert %s twice", r.Alert)
			seen[r.Alert] = true
			require.NotEmpty(t, r.Expr, r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], "%s has no summary", r.Alert)
			require.Contains(t, []string{"page", "ticket"}, r.Labels["severity"], r.Alert)
			requireExported(t, r.Alert, r.Expr)
		}
	}
}

func TestDashboardUsesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.Equal(t, "stockhold", dash.UID)
	require.NotEmpty(t, dash.Panels)
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "%s/%s", p.Title, tg.RefID)
			requireExported(t, p.Title, tg.Expr)
		}
	}
}

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  error
)

// promtool finds Prometheus's promtool, installing Debian's prometheus
// package when it is missing and the tests run as root (CI); elsewhere the
// test is skipped and the checks above still run.
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() { promtoolPath, promtoolErr = debian.Ensure("promtool", "prometheus") })
	if errors.Is(promtoolErr, debian.ErrNotRoot) {
		t.Skip(promtoolErr)
	}
	require.NoError(t, promtoolErr, "install promtool")
	return promtoolPath
}

// TestPromtool checks the rules with Prometheus's own parser and runs
// their unit tests (alerts fire when they should, with these summaries).
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}
