package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// FuzzHoldRequest feeds arbitrary bodies through the hold endpoint's
// decoding and validation. Whatever comes in, the answer is a 400 problem
// (422 for a NUL, which reads but cannot be stored) or a validation error,
// never a panic; and a body that passes obeys every
// limit of the contract. The seed corpus runs with the normal tests.
func FuzzHoldRequest(f *testing.F) {
	for _, seed := range []string{
		`{"order_ref":"o-1","items":[{"sku":"A1","quantity":2}],"ttl_seconds":900}`,
		`{"items":[{"sku":"A1","quantity":2},{"sku":"A1","quantity":3}],"campaign":"c1"}`,
		`{"items":[{"sku":"A1","quantity":0}]}`,
		`{"items":[{"sku":"A1","quantity":1.5}]}`,
		`{"items":[{"sku":"A1","quantity":"1"}]}`,
		`{"items":[{"sku":"","quantity":1}]}`,
		`{"items":[{"sku":"\u0000","quantity":1}]}`,
		`{"items":[{"sku":"A1","quantity":1e400}]}`,
		`{"items":null}`,
		`{"items":[]} []`,
		`{"ttl_seconds":-1,"items":[{"sku":"A","quantity":1}]}`,
		`[`, `{}`, `null`, `"x"`, ``,
		`{"items":[{"sku":"B2","quantity":1,"Quantity":5}]}`,
		`{"ITEMS":[{"sku":"B2","quantity":1}]}`,
		`{"items":[],"items":[{"sku":"B2","quantity":1}]}`,
		`{"items":[{"sku":"B2","quantity":1}],"\u0069tems":[]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b holdBody
		if err := decodeJSON(body, &b); err != nil {
			var p *problem
			if !errors.As(err, &p) || (p.Status != 400 && !(p.Status == 422 && strings.Contains(p.Detail, "NUL"))) {
				t.Fatalf("decode error is not a 400 problem (or a 422 naming a NUL): %v", err)
			}
			return
		}
		if k := miscasedOrRepeated(body); k != "" {
			t.Fatalf("accepted key %q given twice or not as its field", k)
		}
		req, err := b.holdRequest("shop", "key", nil)
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalid {
				t.Fatalf("validation error is not invalid_request: %v", err)
			}
			return
		}
		if len(req.Items) < 1 || len(req.Items) > inventory.MaxLines {
			t.Fatalf("accepted %d lines", len(req.Items))
		}
		for _, it := range req.Items {
			if it.Quantity < 1 || it.Quantity > inventory.MaxQuantity {
				t.Fatalf("accepted quantity %d", it.Quantity)
			}
			if domain.ValidName("sku", it.SKU) != nil {
				t.Fatalf("accepted sku %q", it.SKU)
			}
		}
		if req.TTLSeconds < 0 || req.TTLSeconds > inventory.MaxTTLSeconds {
			t.Fatalf("accepted ttl %d", req.TTLSeconds)
		}
	})
}

// miscasedOrRepeated is checkKeys' oracle, built on encoding/json's own
// tokenizer: the first key of body that is not one of the hold body's
// field names exactly, or that its object has twice up to case.
func miscasedOrRepeated(body []byte) string {
	known := map[string]bool{"order_ref": true, "items": true, "ttl_seconds": true, "campaign": true, "sku": true, "quantity": true}
	type frame struct {
		object, wantKey bool
		keys            []string
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			k := tok.(string)
			if !known[k] {
				return k
			}
			for _, seen := range top.keys {
				if strings.EqualFold(seen, k) {
					return k
				}
			}
			top.keys, top.wantKey = append(top.keys, k), false
			continue
		}
		if top != nil && top.object {
			top.wantKey = true // after this value
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', wantKey: d == '{'})
		}
	}
}
