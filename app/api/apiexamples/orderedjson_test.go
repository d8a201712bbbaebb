package apiexamples_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// node is a JSON value that keeps its objects' keys in the order they came,
// so that TestOpenAPIExamples can rewrite openapi.json's examples and leave
// every other byte of it as it was.
type node struct {
	// kind is '{', '[', '"' (a string) or 0 (a number, true, false, null:
	// raw as written).
	kind  byte
	keys  []string
	items []*node // an object's values (beside keys) or an array's items
	str   string
	raw   string
}

// parseNode reads one JSON value.
func parseNode(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return n, nil
}

func readNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &node{kind: byte(v)}
		for dec.More() {
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			item, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, item)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &node{kind: '"', str: v}, nil
	case json.Number:
		return &node{raw: v.String()}, nil
	case bool:
		return &node{raw: fmt.Sprint(v)}, nil
	case nil:
		return &node{raw: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// get returns an object's member key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.kind != '{' {
		return nil
	}
	for i, k := range n.keys {
		if k == key {
			return n.items[i]
		}
	}
	return nil
}

// set replaces an object's member key, or adds it at the end.
func (n *node) set(key string, v *node) {
	for i, k := range n.keys {
		if k == key {
			n.items[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.items = append(n.items, v)
}

// del removes an object's member key, if it is there.
func (n *node) del(key string) {
	for i, k := range n.keys {
		if k == key {
			n.keys = append(n.keys[:i], n.keys[i+1:]...)
			n.items = append(n.items[:i], n.items[i+1:]...)
			return
		}
	}
}

// value is the node as encoding/json decodes it (numbers as json.Number).
func (n *node) value() any {
	if n == nil {
		return nil
	}
	switch n.kind {
	case '{':
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.items[i].value()
		}
		return m
	case '[':
		s := make([]any, 0, len(n.items))
		for _, it := range n.items {
			s = append(s, it.value())
		}
		return s
	case '"':
		return n.str
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(n.raw))
	dec.UseNumber()
	_ = dec.Decode(&v)
	return v
}

// indented writes the node as Python's json.dumps(v, indent=2,
// ensure_ascii=False) does, the form openapi.json is kept in.
func (n *node) indented() string {
	var b strings.Builder
	n.write(&b, 0, "  ", ": ")
	return b.String()
}

// compact writes the node on one line, with a space after each colon and
// comma, as the README's curl commands write a body.
func (n *node) compact() string {
	var b strings.Builder
	n.write(&b, -1, "", ": ")
	return b.String()
}

func (n *node) write(b *strings.Builder, depth int, indent, colon string) {
	newline := func(d int) {
		if depth < 0 {
			return
		}
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(indent, d))
	}
	switch n.kind {
	case '{', '[':
		closing := byte('}')
		if n.kind == '[' {
			closing = ']'
		}
		b.WriteByte(n.kind)
		if len(n.items) == 0 {
			b.WriteByte(closing)
			return
		}
		inner := depth + 1
		if depth < 0 {
			inner = -1
		}
		for i, it := range n.items {
			if i > 0 {
				b.WriteByte(',')
				if depth < 0 {
					b.WriteByte(' ')
				}
			}
			newline(depth + 1)
			if n.kind == '{' {
				writeString(b, n.keys[i])
				b.WriteString(colon)
			}
			it.write(b, inner, indent, colon)
		}
		newline(depth)
		b.WriteByte(closing)
	case '"':
		writeString(b, n.str)
	default:
		b.WriteString(n.raw)
	}
}

// writeString quotes s as Python's json module does with ensure_ascii off:
// only the quote, the backslash and control characters are escaped.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// TestNodeRoundTrip: a document in openapi.json's form is written back
// byte for byte, keys in their order, strings escaped as Python escapes
// them, numbers as they were written.
func TestNodeRoundTrip(t *testing.T) {
	doc := "{\n  \"b\": {\n    \"z\": [\n      1,\n      2.50,\n      true,\n      null\n    ],\n    \"a\": \"é <x> & \\\"q\\\" \\\\ \\n \\u0001\"\n  },\n" +
		"  \"a\": [],\n  \"c\": {}\n}"
	n, err := parseNode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.indented(); got != doc {
		t.Errorf("written back as\n%s\nwant\n%s", got, doc)
	}
	if got, want := n.get("b").compact(), `{"z": [1, 2.50, true, null], "a": "é <x> & \"q\" \\ \n \u0001"}`; got != want {
		t.Errorf("compact: %s, want %s", got, want)
	}
	n.set("a", &node{raw: "1"})
	n.set("d", &node{kind: '"', str: "new"})
	n.del("c")
	if got, want := n.compact(), `{"b": {"z": [1, 2.50, true, null], "a": "é <x> & \"q\" \\ \n \u0001"}, "a": 1, "d": "new"}`; got != want {
		t.Errorf("after set and del: %s, want %s", got, want)
	}
}
