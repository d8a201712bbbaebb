package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// outside are the documents the README names as the team's shared ones,
// kept outside this repository (the interface contract and the design it
// clarifies); every other document the docs cite must be in it.
var outside = map[string]bool{"API.md": true, "DESIGN.md": true}

var (
	mdName   = regexp.MustCompile(`\b[A-Z][A-Z_]+\.md\b`)
	linkPath = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
)

// TestDocsAreSelfContained: the project's docs cite no document that is
// not in the repository (docs/SCALING.md cited a MEASURED.md that is not),
// and every relative link in them leads to a file that is.
func TestDocsAreSelfContained(t *testing.T) {
	t.Parallel()
	docs := []string{"README.md", "ARCHITECTURE.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, m := range more {
		rel, err := filepath.Rel(root, m)
		require.NoError(t, err)
		docs = append(docs, rel)
	}
	require.Greater(t, len(docs), 3)
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(root, path))
		return err == nil
	}
	for _, doc := range docs {
		text := readDoc(t, doc)
		for _, name := range mdName.FindAllString(text, -1) {
			if outside[name] {
				continue
			}
			found := exists(name) || exists(filepath.Join("docs", name))
			require.True(t, found, "%s cites %s, which is not in the repository: copy the figure, with the command that gave it", doc, name)
		}
		for _, m := range linkPath.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(filepath.Dir(doc), target)
			require.True(t, exists(path), "%s links to %s, which does not exist", doc, target)
		}
	}
}
