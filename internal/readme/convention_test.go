package readme

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSteps reads the block convention: run blocks by session, each with
// the output block right after it, and nothing else taken for an output.
func TestSteps(t *testing.T) {
	doc := "# x\n\n```sh run:a\necho 1\n```\n\n```json output\n1\n```\n\ntext\n\n" +
		"```sh run:b\necho 2\n```\nprose between\n```json output\n2\n```\n\n" +
		"```sh run:a\nmake run\n```\n```text output\nbanner\n```\n```sh\nnot run\n```\n"
	steps := Steps(doc)
	require.Len(t, steps["a"], 2)
	require.Len(t, steps["b"], 1)
	require.Equal(t, "echo 1\n", steps["a"][0].Run.Body)
	require.NotNil(t, steps["a"][0].Output)
	require.Equal(t, "1\n", steps["a"][0].Output.Body)
	require.Nil(t, steps["b"][0].Output, "prose between a run block and an output block parts them")
	require.Equal(t, "banner\n", steps["a"][1].Output.Body)

	out := Replace(doc, map[int]string{steps["a"][0].Output.Line: "one\n"})
	require.Equal(t, "one\n", Steps(out)["a"][0].Output.Body)
	require.Equal(t, "banner\n", Steps(out)["a"][1].Output.Body)

	require.Equal(t, "clients/ts/x.ts", Blocks("```ts file:clients/ts/x.ts\nx\n```\n")[0].File())
	require.Empty(t, Blocks("```sh run:a\nx\n```\n")[0].File())

	g, err := SetGenerated("a\n<!-- generated:t -->\nold\n<!-- end:t -->\nb\n", "t", "new\n")
	require.NoError(t, err)
	require.Equal(t, "a\n<!-- generated:t -->\nnew\n<!-- end:t -->\nb\n", g)
}

// TestRewritesComeFromOneRun: when one answer of a document changed,
// make readme writes every answer of it from the same run, those that
// differ only in ids and times included (a 422 naming the hold just made,
// not one of an earlier run's); when none changed, it writes nothing.
func TestRewritesComeFromOneRun(t *testing.T) {
	doc := "```sh run:a\necho\n```\n```text output\nhold 01a22fce-e3d1-78d8-88f8-dc93ec4e5a2b held\n```\n" +
		"```sh run:a\necho\n```\n```text output\nhold 01a22fce-e3d1-78d8-88f8-dc93ec4e5a2b: 3 left\n```\n" +
		"```sh run:b\necho\n```\n```text output\nat 2026-12-01T04:13:37Z\n```\n"
	sessions := Steps(doc)
	same := map[string][]string{
		"a": {"hold 01a23230-7c8a-7d88-afd4-f7e33d57005f held\n", "hold 01a23230-7c8a-7d88-afd4-f7e33d57005f: 3 left\n"},
		"b": {"at 2026-12-02T11:00:00Z\n"},
	}
	require.Empty(t, Rewrites(sessions, same), "nothing changed beyond ids and times: the document stays")
	changed := map[string][]string{
		"a": {"hold 01a23230-7c8a-7d88-afd4-f7e33d57005f held\n", "hold 01a23230-7c8a-7d88-afd4-f7e33d57005f: 2 left\n"},
		"b": {"at 2026-12-02T11:00:00Z\n"},
	}
	got := Rewrites(sessions, changed)
	require.Len(t, got, 3, "every answer, of every session, from this run")
	out := Replace(doc, got)
	require.NotContains(t, out, "01a22fce", "no answer names the earlier run's hold")
	require.NotContains(t, out, "2026-12-01", "no answer keeps the earlier run's time")
}

// TestNormalize masks what changes from run to run and nothing else: a
// counter that differs must still fail the comparison.
func TestNormalize(t *testing.T) {
	a := `{"id":"01a22fce-e3d1-78d8-88f8-dc93ec4e5a2b","at":"2026-12-01T04:13:37.628025Z","available":108,"job_id":14,"next":"1065-3-1"} sh_NDcLCnmpnfUufdPsHhuLResjyHLeDqfUj1Vd1kyeE_8 t=1796098420 in 35ms (ttl_seconds 604799 from now)`
	b := `{"id":"01a23016-5f18-7ee7-b7ea-0064d61daeae","at":"2026-12-01T05:31:42.233173Z","available":108,"job_id":20,"next":"2001-7-0"} sh_43FpOStXOgMRxKbQBgZmpwI0GR3RFt8jalOlGjr-10M t=1796102000 in 1.2s (ttl_seconds 604798 from now)`
	require.Equal(t, Normalize(a), Normalize(b))
	require.NotEqual(t, Normalize(a), Normalize(`{"id":"01a22fce-e3d1-78d8-88f8-dc93ec4e5a2b","at":"2026-12-01T04:13:37.628025Z","available":109,"job_id":14,"next":"1065-3-1"}`+a[strings.Index(a, "}")+1:]))
}

// TestDocsFollowTheConvention holds every document to the block
// convention without running anything (TestREADME, TestRunbook and
// TestGuides run the sessions): an output block follows a run block, a
// command against the server is run by a session or says why not.
func TestDocsFollowTheConvention(t *testing.T) {
	t.Parallel()
	for _, doc := range docFiles(t) {
		checkConvention(t, doc, readDoc(t, doc))
	}
}
