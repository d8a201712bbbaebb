package domain

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidName: names that look alike must be one name, so a name must be
// NFC and free of invisible format characters; the five look-alike
// SKUs become three (a Cyrillic О is another letter, and stays one).
func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"LOOK1", "A1", "a-b_c.d:e", "L\u041e\u041eK1", "\u00c51", "caf\u00e9", "\uff33\uff2b\uff35",
		"\u6f22\u5b57", "x y", strings.Repeat("S", 64), strings.Repeat("\u00e9", 32),
	} {
		require.NoError(t, ValidName("sku", ok), "%q", ok)
	}
	for _, c := range []struct{ name, detail string }{
		{"", "sku is empty"},
		{strings.Repeat("S", 65), "longer than 64 bytes"},
		{"A/1", "slash"},
		{"A\u00e9/1", "slash"},
		{" A1", "white space"},
		{"A1 ", "white space"},
		{"\u00a0A1", "white space"},
		{"A\x001", "control character"},
		{"A\t1", "control character"},
		{"A\x7f1", "control character"},
		{"A\u00851", "control character"},
		{"A\xff1", "not valid UTF-8"},
		{"LOOK1\u200b", `invisible format character (U+200B)`},
		{"\ufeffA1", "U+FEFF"},
		{"A\u00ad1", "U+00AD"},
		{"A\u200f1", "U+200F"},
		{"A\u030a1", `not in Unicode normalization form C (NFC): send "A\u030A1" as "\u00C51"`},
		{"e\u0301", "NFC"},
	} {
		err := ValidName("sku", c.name)
		require.ErrorContains(t, err, c.detail, "%q", c.name)
		var de *Error
		require.ErrorAs(t, err, &de)
		require.Equal(t, CodeInvalid, de.Code)
	}
}

// TestValidRef: an order reference or a ref follows the name rules on
// control and format characters and NFC, and may be empty, hold slashes
// and spaces, up to its limit.
func TestValidRef(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "o-1", "PO 7/2026", " spaced ", "caf\u00e9"} {
		require.NoError(t, ValidRef("order_ref", ok, 100), "%q", ok)
	}
	for _, c := range []struct{ ref, detail string }{
		{strings.Repeat("r", 101), "longer than 100 bytes"},
		{"o\n1", "control character"},
		{"o\t1", "control character"},
		{"o-1\u200b", "U+200B"},
		{"cafe\u0301", "NFC"},
		{"o\xfe", "UTF-8"},
	} {
		require.ErrorContains(t, ValidRef("order_ref", c.ref, 100), c.detail, "%q", c.ref)
	}
	// Free text keeps what text needs: a family emoji is joined by U+200D.
	require.NoError(t, ValidText("reason", "family \U0001F468\u200d\U0001F469\u200d\U0001F467\tok\n", 500))
}

func BenchmarkValidName(b *testing.B) {
	for _, name := range []string{"SKU-000123", "caf\u00e9-1"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := ValidName("sku", name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
