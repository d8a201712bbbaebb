package readme

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	mdName   = regexp.MustCompile(`\b[A-Z][A-Z_]+\.md\b`)
	linkPath = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
)

// docFiles returns the project's documents, as paths from the repository's
// root: the README, the changelog, and every Markdown file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md", "CHANGELOG.md", filepath.Join("clients", "ts", "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		docs = append(docs, rel)
		return err
	})
	require.NoError(t, err)
	return docs
}

// trackedFiles returns the files git tracks in this checkout, as paths
// from the repository's root.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files
}

// TestDocsAreSelfContained: the project's docs cite no document that is
// not in the repository, and every relative link in them leads to a file
// that is.
func TestDocsAreSelfContained(t *testing.T) {
	t.Parallel()
	docs := docFiles(t)
	require.Greater(t, len(docs), 5)
	names := map[string]bool{}
	for _, f := range trackedFiles(t) {
		names[filepath.Base(f)] = true
	}
	exists := func(path string) bool {
		_, err := os.Stat(filepath.Join(root, path))
		return err == nil
	}
	for _, doc := range docs {
		text := readDoc(t, doc)
		for _, name := range mdName.FindAllString(text, -1) {
			require.True(t, names[name], "%s cites %s, which is not in the repository: copy what it says, with the command that shows it", doc, name)
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

// outsideRef is what a document or a comment must not cite: documents kept
// outside this repository (the team's design and contract documents, their
// measurements), and numbers of the tracker the work came from. History,
// and why a change was made, is in git's log.
var outsideRef = regexp.MustCompile(`\b(` +
	`(DESIGN|API|MEASURED|STYLE)\.md` +
	`|(?i:(the )?design (this service|it|the service) comes from)` +
	`|(?i:interface document|the team's shared)` +
	`|(?i:the seeds'?)` +
	`|(?i:issues? #?[0-9]+|issue-[0-9]+)` +
	`)\b`)

// TestNoOutsideReferences reads every tracked text file (docs, code and its
// comments, SQL, configuration) for a citation of a document outside the
// repository or a tracker number: what it says must be said here, in the
// words of what is true now.
func TestNoOutsideReferences(t *testing.T) {
	t.Parallel()
	self := filepath.Join("internal", "readme", "selfcontained_test.go")
	var found []string
	for _, f := range trackedFiles(t) {
		switch {
		case f == self,
			strings.HasSuffix(f, "package-lock.json"),
			strings.HasPrefix(f, "docs/screenshots/"),
			!textFile(f):
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // listed by git but gone from the work tree
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for n := 1; sc.Scan(); n++ {
			if m := outsideRef.FindString(sc.Text()); m != "" {
				found = append(found, f+":"+strconv.Itoa(n)+": "+m)
			}
		}
	}
	require.Empty(t, found, "these cite a document outside the repository or a tracker number: say what they mean here, "+
		"in the present tense (history belongs in commit messages)")
}

// textFile reports whether a tracked file is text this project writes.
func textFile(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".sql", ".yml", ".yaml", ".json", ".ts", ".html", ".css", ".lua", ".pgb", ".service", ".env", ".txt":
		return true
	}
	return filepath.Base(path) == "Makefile"
}

// TestOutsideRefPattern: what TestNoOutsideReferences finds, and what it
// leaves (a file of this repository whose name is in lower case). The
// strings below are made-up samples the pattern must catch, not
// citations: no document they seem to name is needed to read this
// repository.
func TestOutsideRefPattern(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"see DESIGN.md's invariant 8", "API.md says", "(issue 37, item 2)", "Issue 15's first race",
		"the design this service comes from", "the seeds' own test"} {
		require.NotEmpty(t, outsideRef.FindString(s), s)
	}
	for _, s := range []string{"docs/http-api.md", "the TORTURE_SEED", "a tissue 3"} {
		require.Empty(t, outsideRef.FindString(s), s)
	}
}

var (
	fencedBlock = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	codeSpan    = regexp.MustCompile("`[^`\n]*`")
	runDate     = regexp.MustCompile(`\b20\d\d-\d\d-\d\d\b`)
)

// TestDocsHaveNoRunDates: the docs say what is true now. A date in their
// prose is a run's or a change's ("measured on 2026-12-01", "before the
// change of 2026-11-30"): history, which lives in git's log. Dates in
// commands and the answers they print, and the changelog's release dates,
// are not prose.
func TestDocsHaveNoRunDates(t *testing.T) {
	t.Parallel()
	var found []string
	for _, doc := range docFiles(t) {
		if doc == "CHANGELOG.md" {
			continue
		}
		prose := codeSpan.ReplaceAllString(fencedBlock.ReplaceAllString(readDoc(t, doc), ""), "")
		for _, d := range runDate.FindAllString(prose, -1) {
			found = append(found, doc+": "+d)
		}
	}
	require.Empty(t, found, "dates in the docs' prose: say what is true now, and leave when it was measured or changed to git")
}
