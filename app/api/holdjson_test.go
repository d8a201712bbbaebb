package api

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdBodies are bodies parseHold must read as decodeJSON does, or leave
// to it: plain ones of every shape, and every way of not being plain.
var holdBodies = []string{
	`{"items":[{"sku":"A1","quantity":1}]}`,
	`{"order_ref":"o-1","items":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}],"ttl_seconds":900}`,
	` { "items" : [ { "quantity" : 1 , "sku" : "A1" } ] , "campaign" : "c1" } ` + "\n",
	"{\t\"items\":\r\n[{\"sku\":\"A1\",\"quantity\":3,\"location\":\"paris\",\"split\":false}]}",
	`{"items":[{"sku":"A1","quantity":1,"split":true}],"order_ref":""}`,
	`{"items":[{"sku":"SEATS","units":["r1-s1","r1-s2"]},{"sku":"SEATS","quantity":2,"adjacent":true}]}`,
	`{"items":[{"sku":"SEATS","units":[]}]}`,
	`{"items":[]}`, `{}`, `{"items":[{}]}`,
	`{"items":[{"sku":"caf` + "\u00e9 \U0001F600 \u2028" + `","quantity":1}]}`,
	`{"items":[{"sku":"A1","quantity":-0}],"ttl_seconds":-5}`,
	`{"items":[{"sku":"A1","quantity":999999999999999999}]}`,
	`{"items":[{"sku":"A1","quantity":9223372036854775807}]}`,
	`{"items":[{"sku":"A1","quantity":9223372036854775808}]}`,
	`{"items":[{"sku":"A1","quantity":1.0}]}`, `{"items":[{"sku":"A1","quantity":1e2}]}`,
	`{"items":[{"sku":"A1","quantity":01}]}`, `{"items":[{"sku":"A1","quantity":-}]}`,
	`{"items":[{"sku":"A1","quantity":"1"}]}`, `{"items":[{"sku":1,"quantity":1}]}`,
	`{"items":[{"sku":"A\"1","quantity":1}]}`, `{"items":[{"sku":"A\u0031","quantity":1}]}`,
	`{"items":[{"sku":"\u0000","quantity":1}]}`, "{\"items\":[{\"sku\":\"A\x01\",\"quantity\":1}]}",
	"{\"items\":[{\"sku\":\"bad \xff utf8\",\"quantity\":1}]}", "{\"items\":[{\"sku\":\"\xed\xa0\x80\",\"quantity\":1}]}",
	`{"items":[{"sku":"A1","quantity":1}],"campaign":null}`, `{"items":null}`, `{"order_ref":null,"items":[]}`,
	`{"items":[{"sku":"A1","quantity":1,"adjacent":null}]}`, `{"items":[{"sku":"A1","quantity":1,"split":tru}]}`,
	`{"items":[{"sku":"A1","quantity":1,"split":truex}]}`, `{"items":[{"sku":"A1","quantity":1,"split":"true"}]}`,
	`{"items":[{"sku":"A1","quantity":1}],"items":[]}`, `{"items":[{"sku":"A1","quantity":1,"quantity":2}]}`,
	`{"items":[{"sku":"A1","quantity":1,"Quantity":2}]}`, `{"ITEMS":[{"sku":"A1","quantity":1}]}`,
	`{"items":[{"sku":"A1","quantity":1}],"\u0069tems":[]}`, `{"items":[{"sku":"A1","quantity":1}],"extra":1}`,
	`{"items":[{"sku":"A1","quantity":1,"colour":"red"}]}`,
	`{"items":[{"sku":"A1","quantity":1}]} x`, `{"items":[{"sku":"A1","quantity":1}]}{}`, `{"items":[{"sku":"A1","quantity":1}]}]`,
	`{"items":[{"sku":"A1","quantity":1},]}`, `{"items":[{"sku":"A1","quantity":1,}]}`, `{"items":[{"sku":"A1","quantity":1}],}`,
	`{"items":[{"sku":"A1","quantity":1}]`, `{"items":[{"sku":"A1","quantity":1}`, `{"items":[{"sku":"A1","quantity"`,
	`{"items" [{"sku":"A1","quantity":1}]}`, `{items:[]}`, `{'items':[]}`, `[{"sku":"A1","quantity":1}]`,
	`null`, `"x"`, `1`, `[`, `{`, `}`, "\ufeff{\"items\":[]}",
	`{"items":[{"sku":"A1","quantity":1,"units":["a",1]}]}`, `{"items":[{"sku":"A1","units":["a","a"]}]}`,
	`{"items":[{"sku":"A1","units":["a"],"units":["b"]}]}`, `{"items":{"sku":"A1","quantity":1}}`,
	`{"items":[[{"sku":"A1","quantity":1}]]}`, `{"ttl_seconds":1,"ttl_seconds":2,"items":[]}`,
	`{"items":[{"sku":"A1","quantity":1}],"strategy":"nearest","ship_to":{"latitude":43.3,"longitude":-5.37}}`,
	`{"strategy":"most_stock","items":[{"sku":"A1","quantity":1,"split":true}]}`,
	`{"items":[],"ship_to":{"latitude":0,"longitude":-0.5}}`, `{"items":[],"ship_to":{"latitude":90.000000000000001,"longitude":1}}`,
	`{"items":[],"ship_to":{"latitude":1e2,"longitude":1}}`, `{"items":[],"ship_to":{"latitude":01.5,"longitude":1}}`,
	`{"items":[],"ship_to":{"latitude":1.,"longitude":1}}`, `{"items":[],"ship_to":{"latitude":.5,"longitude":1}}`,
	`{"items":[],"ship_to":{"latitude":"1","longitude":1}}`, `{"items":[],"ship_to":{"latitude":1}}`,
	`{"items":[],"ship_to":{"latitude":1,"latitude":2,"longitude":1}}`, `{"items":[],"ship_to":{"lat":1,"longitude":1}}`,
	`{"items":[],"ship_to":null}`, `{"items":[],"strategy":null}`, `{"items":[],"strategy":"a","strategy":"b"}`,
}

// checkParseHold fails t unless parseHold either leaves body to
// decodeJSON, or reads it as decodeJSON does, without error. It reports
// whether parseHold read it.
func checkParseHold(t testing.TB, body []byte) bool {
	var fast, slow holdBody
	if !parseHold(body, &fast) {
		return false
	}
	if err := decodeJSON(body, &slow); err != nil {
		t.Fatalf("parseHold read %q, which decodeJSON refuses: %v", body, err)
	}
	require.Equal(t, slow, fast, "%q", body)
	return true
}

// TestParseHoldAgreesWithDecodeJSON: every hold body parseHold reads, it
// reads as decodeJSON decodes it, and it reads the usual ones: the fixed
// bodies above, and 50,000 made at random from their pieces (keys in
// every case, repeated, values of every type, odd strings and numbers,
// whitespace, truncation).
func TestParseHoldAgreesWithDecodeJSON(t *testing.T) {
	t.Parallel()
	read := 0
	for _, body := range holdBodies {
		if checkParseHold(t, []byte(body)) {
			read++
		}
	}
	require.GreaterOrEqual(t, read, 12, "the plain bodies are read")
	require.True(t, checkParseHold(t, []byte(`{"items":[{"sku":"soldout-1","quantity":1}]}`)), "the bench's body is plain")

	rng := rand.New(rand.NewPCG(28, 2))
	pick := func(list ...string) string { return list[rng.IntN(len(list))] }
	space := func() string {
		if rng.IntN(4) > 0 {
			return ""
		}
		return pick(" ", "\n", "\t", "\r\n ", "\v", "\u00a0")
	}
	str := func() string {
		return pick(`"A1"`, `""`, `"soldout-1"`, `"caf`+"\u00e9"+`"`, `"a\"b"`, `"\u0041"`, `"\u0000"`, "\"\x01\"", "\"\xff\"",
			`"it's"`, `"<&>"`, "\"\u2028\"", `"`+strings.Repeat("x", 300)+`"`, `1`, `null`, `true`, `[]`, `{}`)
	}
	num := func() string {
		return pick(`1`, `0`, `-1`, `-0`, `42`, `01`, `1.0`, `1e3`, `-`, `999999999999999999`, `1000000000000000000`,
			`9223372036854775808`, `"1"`, `null`, `true`, `[1]`, `1x`)
	}
	boolean := func() string { return pick(`true`, `false`, `null`, `1`, `"true"`, `tru`, `falsey`) }
	key := func(name string) string {
		switch rng.IntN(12) {
		case 0:
			return `"` + strings.ToUpper(name[:1]) + name[1:] + `"`
		case 1:
			return `"` + name + ` "`
		case 2:
			return fmt.Sprintf(`"\u%04x%s"`, name[0], name[1:]) // the same key, escaped
		case 3:
			return `"colour"`
		}
		return `"` + name + `"`
	}
	members := func(gen map[string]func() string) string {
		var parts []string
		for range rng.IntN(len(gen) + 2) {
			names := make([]string, 0, len(gen))
			for n := range gen {
				names = append(names, n)
			}
			n := names[rng.IntN(len(names))]
			parts = append(parts, space()+key(n)+space()+":"+space()+gen[n]()+space())
		}
		return "{" + strings.Join(parts, pick(",", ",", ",", ", ", ",,", "")) + "}"
	}
	units := func() string {
		var list []string
		for range rng.IntN(4) {
			list = append(list, str())
		}
		return "[" + strings.Join(list, ",") + "]"
	}
	item := func() string {
		return members(map[string]func() string{"sku": str, "quantity": num, "units": units, "adjacent": boolean, "location": str, "split": boolean})
	}
	items := func() string {
		var list []string
		for range rng.IntN(4) {
			list = append(list, space()+item()+space())
		}
		return pick("[", "[", "[", "{") + strings.Join(list, pick(",", ",", ",,")) + pick("]", "]", "]", "}")
	}
	coordinate := func() string {
		return pick(`43.3`, `-5.37`, `0`, `-0`, `90`, `0.1234567890123456`, `0.12345678901234567`, `1.`, `.5`, `01`, `1e2`, `-`, `null`, `"1"`, num())
	}
	shipTo := func() string {
		return members(map[string]func() string{"latitude": coordinate, "longitude": coordinate})
	}
	readRandom := 0
	for range 50_000 {
		body := members(map[string]func() string{"order_ref": str, "items": items, "ttl_seconds": num, "campaign": str,
			"strategy": str, "ship_to": shipTo})
		switch rng.IntN(10) {
		case 0:
			body = body[:rng.IntN(len(body)+1)]
		case 1:
			body += pick(" ", "\n", " x", "{}", "]", ",")
		}
		if checkParseHold(t, []byte(body)) {
			readRandom++
		}
	}
	t.Logf("read %d fixed, %d random", read, readRandom)
	require.Greater(t, readRandom, 1_000, "random plain bodies are read")
}

// FuzzParseHold: parseHold reads a body as decodeJSON decodes it, or not
// at all. The seed corpus runs with the normal tests.
func FuzzParseHold(f *testing.F) {
	for _, body := range holdBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkParseHold(t, bytes.Clone(body))
	})
}

// BenchmarkDecodeHoldBody: a plain hold body read by parseHold, against
// decodeJSON.
func BenchmarkDecodeHoldBody(b *testing.B) {
	body := []byte(`{"order_ref": "o-1", "items": [{"sku": "A1", "quantity": 2}, {"sku": "B2", "quantity": 1}], "ttl_seconds": 900}`)
	b.Run("parseHold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h holdBody
			if !parseHold(body, &h) {
				b.Fatal("not plain")
			}
		}
	})
	b.Run("decodeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h holdBody
			if err := decodeJSON(body, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
