package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The examples the API reference (docs.go) shows: JSON laid out as a
// reader reads it, objects' keys in the order the document gives them.

// exampleText is an example as a reader sees it: a string as it is (a
// text or HTML answer), anything else as JSON in the order its keys came,
// indented, with each object or array that fits on a line of
// exampleWidth characters on one.
func exampleText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readJSONValue(dec)
	if err != nil {
		return string(raw)
	}
	var b strings.Builder
	v.write(&b, "")
	return b.String()
}

// exampleWidth is the longest line an example puts an object on rather
// than spread it over several: a phone shows about 45 characters of it.
const exampleWidth = 60

// jsonValue is a JSON value with its objects' keys in their order.
type jsonValue struct {
	// delim is '{' or '[' for an object or an array; 0 for anything else,
	// which is text (JSON as written).
	delim byte
	keys  []string
	items []jsonValue
	text  string
}

func readJSONValue(dec *json.Decoder) (jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return jsonValue{}, err
	}
	if d, ok := tok.(json.Delim); ok {
		v := jsonValue{delim: byte(d)}
		for dec.More() {
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return v, err
				}
				v.keys = append(v.keys, quoteJSON(k.(string)))
			}
			item, err := readJSONValue(dec)
			if err != nil {
				return v, err
			}
			v.items = append(v.items, item)
		}
		_, err := dec.Token()
		return v, err
	}
	switch t := tok.(type) {
	case string:
		return jsonValue{text: quoteJSON(t)}, nil
	case nil:
		return jsonValue{text: "null"}, nil
	}
	return jsonValue{text: fmt.Sprint(tok)}, nil
}

func quoteJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// line is the value on one line.
func (v jsonValue) line() string {
	if v.delim == 0 {
		return v.text
	}
	parts := make([]string, len(v.items))
	for i, it := range v.items {
		parts[i] = it.line()
		if v.delim == '{' {
			parts[i] = v.keys[i] + ": " + parts[i]
		}
	}
	if v.delim == '{' {
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// write writes the value at indent, on one line if it fits.
func (v jsonValue) write(b *strings.Builder, indent string) {
	if line := v.line(); v.delim == 0 || len(v.items) == 0 || len(indent)+len(line) <= exampleWidth {
		b.WriteString(line)
		return
	}
	closing := "]"
	if v.delim == '{' {
		closing = "}"
	}
	b.WriteByte(v.delim)
	for i, it := range v.items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n" + indent + "  ")
		if v.delim == '{' {
			b.WriteString(v.keys[i] + ": ")
		}
		it.write(b, indent+"  ")
	}
	b.WriteString("\n" + indent + closing)
}
