package api

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"
)

// BenchmarkDecodeHold measures decoding a typical hold body, the work every
// hold does before it is queued: the whole of decodeJSON, encoding/json's
// part of it alone (what decodeJSON was before it checked keys), and the
// check of the keys alone.
func BenchmarkDecodeHold(b *testing.B) {
	body := []byte(`{"order_ref": "o-1", "items": [{"sku": "A1", "quantity": 2}, {"sku": "B2", "quantity": 1}], "ttl_seconds": 900}`)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h holdBody
			if err := decodeJSON(body, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h holdBody
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&h); err != nil {
				b.Fatal(err)
			}
			if _, err := dec.Token(); err != io.EOF {
				b.Fatal(err)
			}
		}
	})
	b.Run("keys", func(b *testing.B) {
		b.ReportAllocs()
		t := reflect.TypeFor[*holdBody]()
		for b.Loop() {
			if err := checkKeys(body, t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
