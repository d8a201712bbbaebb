// Package readme keeps README.md true: it finds the walk-through's
// commands and the answers shown under them, compares answers modulo what
// changes from run to run (ids, times, keys), and rewrites answers and
// generated sections. Its test runs the commands against a fresh server
// (`make readme` rewrites what differs).
//
// The convention, in the README's own words (section "The README is
// tested"):
//
//   - A fenced block whose info string is "sh run:NAME" is run by session
//     NAME. Sessions are independent (each its own database and server);
//     a session's blocks run in README order in one bash process, so a
//     variable set in one block is seen by the next.
//   - The fenced block right after a run block (blank lines between are
//     fine) whose info string's second word is "output" shows what the
//     run block printed, stdout and stderr together. make readme writes
//     every answer of a document from one run (Rewrites).
//   - A run block that is exactly "make run" starts the session's server
//     the way a reader does; a session without one gets it unseen.
//   - A block whose info string has "file:PATH" shows the file at PATH
//     (from the repository's root) whole, as it is: a program another test
//     compiles and runs (the TypeScript client's example).
//   - Text between "<!-- generated:NAME -->" and "<!-- end:NAME -->" is
//     generated (the settings table from app/config).
package readme

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// Block is one fenced code block of the document.
type Block struct {
	// Info is the fence's info string ("sh run:walkthrough").
	Info string
	// Body is the block's text, each line ending in a newline.
	Body string
	// Line is the 1-based line of the opening fence.
	Line int
	// start and end are byte offsets of Body in the document; open is the
	// offset of the opening fence's line, close the offset just after the
	// closing fence's line.
	start, end, open, close int
}

// Session is the name in a run block's info string ("walkthrough" in
// "sh run:walkthrough"), or "".
func (b Block) Session() string {
	for _, w := range strings.Fields(b.Info)[min(1, len(strings.Fields(b.Info))):] {
		if name, ok := strings.CutPrefix(w, "run:"); ok {
			return name
		}
	}
	return ""
}

// File is the path in a block's "file:PATH" info word, or "".
func (b Block) File() string {
	for _, w := range strings.Fields(b.Info) {
		if path, ok := strings.CutPrefix(w, "file:"); ok {
			return path
		}
	}
	return ""
}

// IsOutput reports whether the block shows a run block's output.
func (b Block) IsOutput() bool {
	f := strings.Fields(b.Info)
	return len(f) >= 2 && f[1] == "output"
}

// Step is a run block and the output block shown under it, if any.
type Step struct {
	Run    Block
	Output *Block
}

// Blocks returns every fenced block of doc, in order.
func Blocks(doc string) []Block {
	var (
		blocks []Block
		cur    *Block
		fence  string
		off    int
		n      int
	)
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		n++
		next := off + len(line) + 1
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			cur = &Block{Info: strings.TrimSpace(trimmed[len(fence):]), Line: n, start: next, open: off}
		case cur != nil && strings.TrimSpace(line) == fence:
			cur.end = off
			cur.close = min(next, len(doc))
			cur.Body = doc[cur.start:cur.end]
			blocks = append(blocks, *cur)
			cur = nil
		}
		off = next
	}
	return blocks
}

// Steps returns the run blocks of each session, in order, each with the
// output block that follows it.
func Steps(doc string) map[string][]Step {
	blocks := Blocks(doc)
	steps := map[string][]Step{}
	for i, b := range blocks {
		name := b.Session()
		if name == "" {
			continue
		}
		s := Step{Run: b}
		if i+1 < len(blocks) && blocks[i+1].IsOutput() && strings.TrimSpace(doc[b.close:blocks[i+1].open]) == "" {
			o := blocks[i+1]
			s.Output = &o
		}
		steps[name] = append(steps[name], s)
	}
	return steps
}

// Rewrites returns what make readme writes into a document whose
// sessions printed outs (by session, step by step): nothing when every
// answer it shows is what was printed beyond what changes from run to run
// (Normalize), and otherwise every answer of the document, so that the
// answers it shows all come from one run: a hold id, a time or a count in
// one answer is the same in the next, as a reader running the commands
// sees them. Keys are the output blocks' lines (see Replace).
func Rewrites(sessions map[string][]Step, outs map[string][]string) map[int]string {
	all := All(sessions, outs)
	for _, steps := range sessions {
		for _, s := range steps {
			if s.Output != nil && Normalize(all[s.Output.Line]) != Normalize(s.Output.Body) {
				return all
			}
		}
	}
	return nil
}

// All returns every answer a document's sessions printed, by the line of
// the output block that shows it (see Replace).
func All(sessions map[string][]Step, outs map[string][]string) map[int]string {
	all := map[int]string{}
	for name, steps := range sessions {
		for i, s := range steps {
			if s.Output != nil && i < len(outs[name]) {
				all[s.Output.Line] = outs[name][i]
			}
		}
	}
	return all
}

// Replace returns doc with the bodies of the blocks whose opening fence is
// on a line of bodies replaced; others stay as they are.
func Replace(doc string, bodies map[int]string) string {
	var b strings.Builder
	last := 0
	for _, blk := range Blocks(doc) {
		body, ok := bodies[blk.Line]
		if !ok {
			continue
		}
		b.WriteString(doc[last:blk.start])
		b.WriteString(body)
		last = blk.end
	}
	b.WriteString(doc[last:])
	return b.String()
}

// Generated returns the text between "<!-- generated:NAME -->" and
// "<!-- end:NAME -->" (each on its own line), and whether both are there.
func Generated(doc, name string) (string, bool) {
	start, end, ok := region(doc, name)
	if !ok {
		return "", false
	}
	return doc[start:end], true
}

// SetGenerated returns doc with the region NAME's text replaced.
func SetGenerated(doc, name, text string) (string, error) {
	start, end, ok := region(doc, name)
	if !ok {
		return "", fmt.Errorf("no <!-- generated:%s --> ... <!-- end:%s --> in the document", name, name)
	}
	return doc[:start] + text + doc[end:], nil
}

func region(doc, name string) (start, end int, ok bool) {
	open, close := "<!-- generated:"+name+" -->\n", "<!-- end:"+name+" -->"
	i := strings.Index(doc, open)
	if i < 0 {
		return 0, 0, false
	}
	start = i + len(open)
	j := strings.Index(doc[start:], close)
	if j < 0 {
		return 0, 0, false
	}
	return start, start + j, true
}

// What changes from one run of the walk-through to the next, and is masked
// before two runs' answers are compared: the test fails on any other
// difference.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?Z?`), "<time>"},
	{regexp.MustCompile(`\bsh_[A-Za-z0-9_-]{20,}`), "<token>"},
	{regexp.MustCompile(`\bwhsec_[0-9a-f]{16,}`), "<secret>"},
	{regexp.MustCompile(`\bt=\d{9,}`), "t=<unix>"},
	{regexp.MustCompile(`\bv1=[0-9a-f]{64}`), "v1=<signature>"},
	// Event ids are transaction ids and ledger ids of this database.
	{regexp.MustCompile(`\b\d+-\d+-\d+\b`), "<event>"},
	// Numeric ids: of ledger rows, rollbacks, jobs, runs, webhooks, keys.
	{regexp.MustCompile(`"(id|[a-z_]+_id|next_before_id)":\d+`), `"$1":<n>`},
	{regexp.MustCompile(`\b(id|ids|job|request|run|rollback|webhook|rollbacks|runs|jobs|alerts)( |/)\d+\b`), "$1$2<n>"},
	{regexp.MustCompile(`DATABASE_URL='?[^' \n]+'?`), "DATABASE_URL=<url>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ms|µs|s)\b`), "<duration>"},
	// Seconds left until a time: they depend on how fast the steps ran.
	{regexp.MustCompile(`\b\d+ from now\b`), "<n> from now"},
}

// Normalize masks what changes from run to run.
func Normalize(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}
