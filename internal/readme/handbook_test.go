package readme

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var promRule = regexp.MustCompile(`(?m)^\s*- alert: (\S+)`)

// TestHandbookNamesEveryAlert: the on-call handbook's table has a row for
// every alert kind stockhold raises (the Alert schema's kind enum, which
// TestAlertKinds holds to the code) and for every rule of the example
// Prometheus rules, each saying what it means, the first move and where.
func TestHandbookNamesEveryAlert(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "docs/OPERATIONS.md")
	start := strings.Index(doc, "## Alerts: what each means and what to do")
	require.GreaterOrEqual(t, start, 0, "docs/OPERATIONS.md has its alerts section")
	section := doc[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rows := map[string]int{}
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| alert ") && !strings.HasPrefix(line, "| ---") {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			require.Len(t, cells, 4, "a row says what it means, the first move and where: %s", line)
			for _, c := range cells {
				require.NotEmpty(t, strings.TrimSpace(c), "a row with an empty cell: %s", line)
			}
			rows[strings.TrimSpace(cells[0])]++
		}
	}

	var spec struct {
		Components struct {
			Schemas struct {
				Alert struct {
					Properties struct {
						Kind struct {
							Enum []string `json:"enum"`
						} `json:"kind"`
					} `json:"properties"`
				} `json:"Alert"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal([]byte(readDoc(t, "app/api/openapi.json")), &spec))
	kinds := spec.Components.Schemas.Alert.Properties.Kind.Enum
	require.NotEmpty(t, kinds, "openapi.json lists the alert kinds")
	want := map[string]bool{}
	for _, k := range kinds {
		want["`"+k+"`"] = true
	}
	for _, m := range promRule.FindAllStringSubmatch(readDoc(t, "deploy/prometheus/stockhold-alerts.yml"), -1) {
		want["Prometheus `"+m[1]+"`"] = true
	}
	for w := range want {
		found := 0
		for name, n := range rows {
			if strings.HasPrefix(name, w) {
				found += n
			}
		}
		require.Equal(t, 1, found, "docs/OPERATIONS.md's alerts table has one row for %s", w)
	}
	require.Len(t, rows, len(want), "every row of the table is an alert kind or a Prometheus rule")
}
