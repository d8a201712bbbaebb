package api

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// extraOf is what a problem's Extra was before problems kept their domain
// error (fromDomain copied its Extra and its context into Extra then):
// Extra's members, then the domain error's Extra and its context.
func extraOf(p *problem) map[string]any {
	e := p.from
	if e == nil {
		return p.Extra
	}
	m := map[string]any{}
	for k, v := range p.Extra {
		m[k] = v
	}
	for k, v := range e.Extra {
		m[k] = v
	}
	if e.SKU != "" {
		m["sku"] = e.SKU
	}
	if e.Pool != "" {
		m["pool"] = e.Pool
	}
	if e.Location != "" {
		m["location"] = e.Location
	}
	if e.Line != nil {
		m["line"] = *e.Line
	}
	if len(e.Units) > 0 {
		m["units"] = e.Units
	}
	if e.Status != "" {
		m["reservation_status"] = e.Status
	}
	return m
}

// mapProblem is a problem encoded as problem.MarshalJSON encoded it before
// it built the bytes itself: a map[string]any of its members, Extra's
// (extraOf) beside the standard ones, through encoding/json.
type mapProblem struct{ p *problem }

func (m mapProblem) MarshalJSON() ([]byte, error) {
	p := m.p
	members := map[string]any{
		"type":   "/problems/" + p.Code,
		"title":  p.Title,
		"status": p.Status,
		"detail": p.Detail,
		"code":   p.Code,
	}
	for k, v := range extraOf(p) {
		if _, taken := members[k]; !taken {
			members[k] = v
		}
	}
	return json.Marshal(members)
}

// mapProblemBody is problemBody as it was: the outer json.Marshal, which
// compacts and escapes what MarshalJSON gave.
func mapProblemBody(p *problem) []byte {
	body, err := json.Marshal(mapProblem{p})
	if err != nil {
		body = []byte(`{"type":"/problems/internal_error","status":500,"code":"internal_error"}`)
	}
	return append(body, '\n')
}

// textMarshaled encodes itself as a JSON key or string would (through
// encoding.TextMarshaler), with characters to escape.
type textMarshaled struct{ s string }

func (t textMarshaled) MarshalText() ([]byte, error) { return []byte("<" + t.s + ">"), nil }

// rawMarshaled returns JSON with spaces and unescaped HTML characters,
// which encoding/json compacts and escapes.
type rawMarshaled struct{}

func (rawMarshaled) MarshalJSON() ([]byte, error) {
	return []byte(` { "a" : "<b>&" , "c" : [ 1 , 2 ] } `), nil
}

// oddStrings hold every kind of character encoding/json escapes.
var oddStrings = []string{
	"", "plain", `quote " and backslash \`, "<script>alert('x')</script> & more", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c \U0001F600", "line\u2028sep\u2029para", "bad \xff\xfe utf8 \xe2\x80",
	"\xe2\x80\xa8\xe2\x80\xa9", "half \xed\xa0\x80 surrogate", strings.Repeat("long ", 200), "/problems/x",
}

// TestProblemJSON: the problem's JSON built by hand is byte for byte what
// encoding/json made of it as a map: for every code, Extra members of
// every kind (odd strings, integers, slices, nested maps, marshalers,
// members named as the standard ones), and random strings.
func TestProblemJSON(t *testing.T) {
	t.Parallel()
	line := 4
	var problems []*problem
	for code := range problemCodes {
		problems = append(problems, newProblem(http.StatusConflict, code, "detail of "+code))
	}
	for code := range statuses {
		problems = append(problems, fromDomain(&domain.Error{Code: code, Detail: fmt.Sprintf("SKU %q (pool main) has 0 available, 1 requested", "A<1>"),
			SKU: "A<1>", Pool: "main", Location: "dépôt", Line: &line, Units: []string{"u1", "u&2"}, Status: "expired"}))
	}
	for _, extra := range []map[string]any{nil, {}, {"sku": "from extra", "type": "x", "difference": 3, "line": "l"}, {"units": []int{1}, "z<": "&"}} {
		problems = append(problems, fromDomain(&domain.Error{Code: domain.CodeBooksUnbalanced, Detail: "d", Extra: extra}),
			fromDomain(&domain.Error{Code: domain.CodeNotHeld, Detail: "d", SKU: "A1", Status: "expired", Line: &line, Extra: extra}))
		p := fromDomain(&domain.Error{Code: domain.CodeOutOfStock, Detail: "d", SKU: "A1", Units: []string{"u"}, Extra: extra})
		p.Extra = map[string]any{"sku": "own", "own": true, "pool": "p"}
		problems = append(problems, p)
	}
	extras := []map[string]any{
		nil,
		{},
		{"sku": "A1", "pool": "main"},
		{"type": "taken", "title": 1, "status": "x", "detail": nil, "code": []int{1}},
		{"line": 3, "n64": int64(-9_223_372_036_854_775_808), "n32": int32(7), "u": uint(5), "u8": uint8(200), "f": 1.5, "big": 1e21, "tiny": 1e-7,
			"neg0": math.Copysign(0, -1), "t": true, "no": false, "null": nil},
		{"units": []string{"a", "<b>", "c\u2028"}, "empty": []string{}, "nilslice": []string(nil), "any": []any{1, "x", nil, 2.5, []any{}}},
		{"nested": map[string]any{"z": 1, "a": map[string]any{"<k>": "&v", "b": []int{3}}, "\u2028": "sep"}},
		{"code ": "space", "Code": "upper", "détail": "accent", "": "empty key", "<>&": "html key", "a\"b": "quoted key", "\x01": "control key"},
		{"when": time.Date(2026, 12, 1, 20, 0, 0, 123, time.UTC), "dur": time.Second, "ref": domain.Code("out_of_stock")},
		{"text": textMarshaled{"&x"}, "raw": rawMarshaled{}, "textmap": map[textMarshaled]int{{"k"}: 1}, "rawmsg": json.RawMessage(` {"<": 1} `)},
		{"ptr": &line, "nilptr": (*int)(nil), "struct": struct {
			A string `json:"a"`
			B int    `json:"b,omitempty"`
		}{A: "<"}, "bytes": []byte("hi <there>")},
	}
	for _, s := range oddStrings {
		extras = append(extras, map[string]any{s: s, "x" + s: []string{s}})
	}
	for i, extra := range extras {
		for _, code := range []string{"out_of_stock", "invalid_request", "odd <code> \"&\"\u2028\xff"} {
			p := newProblem(http.StatusUnprocessableEntity+i, code, oddStrings[i%len(oddStrings)])
			p.Extra = extra
			problems = append(problems, p)
		}
	}
	rng := rand.New(rand.NewPCG(28, 1))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "\x80", "\xff", "\xc3",
		"é", "日", "😀", "\u2028", "\u2029", "\u2027", "\u202a", "\xe2\x80", "\xed\xa0\x80", "\ufffd", "'"}
	random := func() string {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 5000 {
		p := newProblem(400+rng.IntN(200), random(), random())
		p.Title = random()
		p.Extra = map[string]any{random(): random(), random(): rng.IntN(1000) - 500, random(): []string{random()}}
		problems = append(problems, p)
	}

	for _, p := range problems {
		want := mapProblemBody(p)
		require.Equal(t, string(want), string(problemBody(p)), "%#v", p)
		direct, err := json.Marshal(p)
		require.NoError(t, err)
		require.Equal(t, string(want), string(direct)+"\n")
	}

	// A member encoding/json cannot encode fails the whole body, as before.
	for _, bad := range []any{make(chan int), math.NaN(), math.Inf(1), func() {}} {
		p := newProblem(http.StatusConflict, "conflict", "d")
		p.Extra = map[string]any{"bad": bad, "sku": "A1"}
		require.Equal(t, string(mapProblemBody(p)), string(problemBody(p)))
		require.Contains(t, string(problemBody(p)), `"internal_error"`)
	}
}

// BenchmarkProblemBody: a sold-out refusal's body, built by hand and
// through encoding/json as before.
func BenchmarkProblemBody(b *testing.B) {
	p := fromDomain(&domain.Error{Code: domain.CodeOutOfStock, SKU: "soldout-1", Pool: "main",
		Detail: `SKU "soldout-1" (pool main) has 0 available, 1 requested`})
	b.Run("built", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			problemBody(p)
		}
	})
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mapProblemBody(p)
		}
	})
}
