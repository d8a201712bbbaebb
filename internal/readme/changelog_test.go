package readme

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/buildinfo"
)

var (
	versionHeading = regexp.MustCompile(`(?m)^## \[(Unreleased|\d+\.\d+\.\d+)\](?: - (\d{4}-\d\d-\d\d))?$`)
	changeHeading  = regexp.MustCompile(`(?m)^### (.+)$`)
)

// changeKinds are Keep a Changelog's kinds of change, and the note on what
// upgrading takes that every version here ends with.
var changeKinds = map[string]bool{
	"Added": true, "Changed": true, "Deprecated": true, "Removed": true, "Fixed": true, "Security": true,
}

// TestChangelog holds CHANGELOG.md to Keep a Changelog's form: an
// Unreleased section first, then versions newest first, each released one
// with its date; each section's changes under the kinds the form names,
// and an "Upgrading" note last. The newest version is what `stockhold
// version` prints (buildinfo.Version).
func TestChangelog(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "CHANGELOG.md")
	heads := versionHeading.FindAllStringSubmatchIndex(doc, -1)
	require.GreaterOrEqual(t, len(heads), 2, "an Unreleased section and at least one version")
	require.Equal(t, "Unreleased", doc[heads[0][2]:heads[0][3]], "the first section is Unreleased")
	require.Equal(t, -1, heads[0][4], "Unreleased has no date")
	var versions []string
	for i, h := range heads {
		name := doc[h[2]:h[3]]
		end := len(doc)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		body := doc[h[1]:end]
		if i > 0 {
			require.NotEqual(t, -1, h[4], "version %s has its release date", name)
			versions = append(versions, name)
		}
		kinds := changeHeading.FindAllStringSubmatch(body, -1)
		require.NotEmpty(t, kinds, "%s lists its changes under Added, Changed, ...", name)
		last := kinds[len(kinds)-1][1]
		require.True(t, strings.HasPrefix(last, "Upgrading"), "%s ends with what upgrading to it takes (### Upgrading...), not %q", name, last)
		seen := map[string]bool{}
		for _, k := range kinds[:len(kinds)-1] {
			require.True(t, changeKinds[k[1]], "%s: %q is not one of Keep a Changelog's kinds of change", name, k[1])
			require.False(t, seen[k[1]], "%s has two %q sections: one of each kind", name, k[1])
			seen[k[1]] = true
		}
	}
	require.Equal(t, buildinfo.Version, versions[0], "the newest version in CHANGELOG.md is the one stockhold version prints: raise buildinfo.Version with it")
	for i := 1; i < len(versions); i++ {
		require.Positive(t, compareVersions(versions[i-1], versions[i]), "versions are listed newest first: %s before %s", versions[i-1], versions[i])
	}
}

// compareVersions compares two semantic versions MAJOR.MINOR.PATCH.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range 3 {
		x, y := atoi(pa[i]), atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
