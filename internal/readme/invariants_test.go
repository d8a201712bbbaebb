package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// architecture is where the invariants are numbered; code, queries,
// migrations and tests cite them as "invariant N" ("invariants N, M and
// P"), always by that list's numbers.
const architecture = "docs/internals/ARCHITECTURE.md"

var (
	// invariantItem is one entry of the numbered list.
	invariantItem = regexp.MustCompile(`(?m)^([0-9]+)\. `)
	// invariantCite is a citation and the numbers after it, across comment
	// markers and line breaks ("invariants 1, 2,\n-- 7 and 8").
	invariantCite = regexp.MustCompile(`(?i)\binvariants?((?:(?:\s|,|--|//|\band\b|\bor\b)+[0-9]+\b)+)`)
	number        = regexp.MustCompile(`[0-9]+`)
)

// invariantsListed returns the numbers of ARCHITECTURE.md's invariants:
// the numbered list of its Invariants section.
func invariantsListed(t *testing.T) map[int]bool {
	t.Helper()
	doc := readDoc(t, architecture)
	start := strings.Index(doc, "\n## Invariants\n")
	require.GreaterOrEqual(t, start, 0, "%s has no Invariants section", architecture)
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	listed := map[int]bool{}
	for i, m := range invariantItem.FindAllStringSubmatch(section, -1) {
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		require.Equal(t, i+1, n, "%s numbers its invariants 1, 2, 3 … in order", architecture)
		listed[n] = true
	}
	require.NotEmpty(t, listed)
	return listed
}

// citedInvariants returns the invariant numbers text cites.
func citedInvariants(text string) []int {
	var out []int
	for _, m := range invariantCite.FindAllStringSubmatch(text, -1) {
		for _, s := range number.FindAllString(m[1], -1) {
			n, _ := strconv.Atoi(s)
			out = append(out, n)
		}
	}
	return out
}

// TestInvariantCitationsExist: every "invariant N" a Go or SQL file of
// the repository cites is in ARCHITECTURE.md's numbered list, so a
// citation cannot point at a list kept elsewhere or at a number that was
// renumbered away.
func TestInvariantCitationsExist(t *testing.T) {
	t.Parallel()
	listed := invariantsListed(t)
	self := filepath.Join("internal", "readme", "invariants_test.go")
	var missing []string
	cited := 0
	for _, f := range trackedFiles(t) {
		if f == self || (filepath.Ext(f) != ".go" && filepath.Ext(f) != ".sql") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed by git but gone from the work tree
		}
		for _, n := range citedInvariants(string(b)) {
			cited++
			if !listed[n] {
				missing = append(missing, f+": invariant "+strconv.Itoa(n))
			}
		}
	}
	require.NotZero(t, cited, "the code cites no invariant: is the pattern still right?")
	require.Empty(t, missing, "cited, but not in the numbered list of %s", architecture)
}

// TestInvariantCitePattern: what the citation pattern reads.
func TestInvariantCitePattern(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int{4}, citedInvariants("never returns to held (invariant 4), so"))
	require.Equal(t, []int{8}, citedInvariants("-- Invariant 8's other half"))
	require.Equal(t, []int{1, 2, 3, 5, 6, 7, 8},
		citedInvariants("-- breach of the invariants 1, 2, 3, 5, 6,\n-- 7 and 8 of docs/internals/ARCHITECTURE.md"))
	require.Empty(t, citedInvariants("t.Errorf(\"invariant broken: %s\", x)"))
	require.Empty(t, citedInvariants("the invariants hold"))
}
