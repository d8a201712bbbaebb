package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeRefusesRepeatedAndMiscasedKeys: encoding/json alone takes
// {"quantity":1,"Quantity":5} as 5, "ITEMS" as items and the last of a
// repeated key; each must be a 400 naming the key.
func TestDecodeRefusesRepeatedAndMiscasedKeys(t *testing.T) {
	t.Parallel()
	refused := []struct{ name, body, detail string }{
		{"case variant of a line's key", `{"items":[{"sku":"B2","quantity":1,"Quantity":5}]}`,
			"fields items[0].quantity and items[0].Quantity differ only in case"},
		{"key in upper case", `{"ITEMS":[{"sku":"B2","quantity":1}]}`, `unknown field "ITEMS": field names are case-sensitive (items)`},
		{"key in mixed case in a line", `{"items":[{"sku":"B2","quantity":1},{"SKU":"C3","quantity":1}]}`, `unknown field "items[1].SKU"`},
		{"items twice", `{"items":[{"sku":"B2","quantity":1}],"items":[{"sku":"B2","quantity":9}]}`, "field items appears twice"},
		{"a line's key twice", `{"items":[{"sku":"B2","quantity":1,"quantity":9}]}`, "field items[0].quantity appears twice"},
		{"escaped repeat", `{"items":[{"sku":"B2","quantity":1}],"\u0069tems":[]}`, "field items appears twice"},
		{"ttl twice", `{"ttl_seconds":60,"items":[{"sku":"B2","quantity":1}],"ttl_seconds":900}`, "field ttl_seconds appears twice"},
		{"case variant at the top", `{"order_ref":"a","Order_Ref":"b","items":[{"sku":"B2","quantity":1}]}`, "differ only in case"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			var b holdBody
			err := decodeJSON([]byte(c.body), &b)
			var p *problem
			require.ErrorAs(t, err, &p)
			require.Equal(t, 400, p.Status)
			require.Equal(t, "invalid_request", p.Code)
			require.Contains(t, p.Detail, c.detail)
		})
	}

	accepted := []string{
		`{"order_ref":"o-1","items":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}],"ttl_seconds":900}`,
		` { "items" : [ { "quantity" : 1 , "sku" : "A\"1" } ] , "campaign" : "c\\1" } `,
		`{"items":[{"sku":"quantity","quantity":1}],"order_ref":"items"}`,
		`{"items":[{"sku":"A1","quantity":1}],"campaign":null}`,
	}
	for _, body := range accepted {
		var b holdBody
		require.NoError(t, decodeJSON([]byte(body), &b), body)
	}

	// A value decoded into a map or as raw JSON may have any keys, each
	// once: case variants are different keys of a map.
	var th thresholdBody
	require.NoError(t, decodeJSON([]byte(`{"threshold":{"a":1,"A":2}}`), &th))
	require.ErrorContains(t, decodeJSON([]byte(`{"threshold":{"a":1,"a":2}}`), &th), "field threshold.a appears twice")

	// Past seenInline keys a map takes over, and still finds the repeat.
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d":1`, i)
	}
	var free map[string]any
	require.NoError(t, decodeJSON([]byte("{"+strings.Join(keys, ",")+`,"K7":2}`), &free))
	require.ErrorContains(t, decodeJSON([]byte("{"+strings.Join(keys, ",")+`,"k7":2}`), &free), "field k7 appears twice")
	lines := make([]string, 40)
	for i := range lines {
		lines[i] = fmt.Sprintf(`"order_ref%d":1`, i)
	}
	var anyKeys map[string]int
	require.NoError(t, decodeJSON([]byte("{"+strings.Join(lines, ",")+"}"), &anyKeys))
}

// TestJSONMediaType: a body must come as application/json, any parameters.
func TestJSONMediaType(t *testing.T) {
	t.Parallel()
	for _, ok := range [][]string{{"application/json"}, {"application/json; charset=utf-8"}, {"Application/JSON;charset=UTF-8"}} {
		require.NoError(t, jsonMediaType(ok), "%q", ok)
	}
	for _, bad := range [][]string{nil, {"application/x-www-form-urlencoded"}, {"text/plain"}, {"application/json-seq"},
		{"application/merge-patch+json"}, {""}, {"application/json", "application/json"}} {
		err := jsonMediaType(bad)
		var p *problem
		require.ErrorAs(t, err, &p, "%q", bad)
		require.Equal(t, 415, p.Status)
		require.Equal(t, "unsupported_media_type", p.Code)
	}
	require.ErrorContains(t, jsonMediaType([]string{"application/x-www-form-urlencoded"}), `Content-Type "application/x-www-form-urlencoded"`)
	require.ErrorContains(t, jsonMediaType(nil), "no Content-Type")
}
