package api

import (
	"errors"
	"testing"

	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

// FuzzHoldRequest feeds arbitrary bodies through the hold endpoint's
// decoding and validation. Whatever comes in, the answer is a 400 problem
// or a validation error, never a panic; and a body that passes obeys every
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
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var b holdBody
		if err := decodeJSON(body, &b); err != nil {
			var p *problem
			if !errors.As(err, &p) || p.Status != 400 {
				t.Fatalf("decode error is not a 400 problem: %v", err)
			}
			return
		}
		req, err := b.holdRequest("shop", "key")
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
