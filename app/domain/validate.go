package domain

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits on names and free text, in bytes, from the API contract.
const (
	// MaxNameLength bounds a SKU, pool, campaign id or operator.
	MaxNameLength = 64
	// MaxTextLength bounds a reason or a ref.
	MaxTextLength = 500
)

// ValidName checks a SKU, pool or campaign id (or an operator's name): 1 to
// 64 bytes of UTF-8 with no control characters, no slash (it would not
// survive a URL path), no surrounding white space, and, so that two names
// that look the same are the same name, in Unicode normalization form C and
// without format characters (category Cf: zero-width spaces and joiners,
// direction marks), which are invisible. It runs on every line of every
// hold, so a name of ASCII, which is all of this, is checked in one pass
// over its bytes.
func ValidName(what, s string) error {
	switch {
	case s == "":
		return Invalid("%s is empty", what)
	case len(s) > MaxNameLength:
		return Invalid("%s is longer than %d bytes", what, MaxNameLength)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return validUnicode(what, s, true)
		case c < 0x20 || c == 0x7f:
			return Invalid("%s contains a control character", what)
		case c == '/':
			return Invalid("%s contains a slash", what)
		}
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return Invalid("%s has leading or trailing white space", what)
	}
	return nil
}

// ValidRef checks a reference another system made (an order reference,
// a purchase order's ref): at most max bytes of UTF-8, and, as names are,
// without control characters (tab and newline included) or format
// characters, in normalization form C.
func ValidRef(what, s string, max int) error {
	if len(s) > max {
		return Invalid("%s is longer than %d bytes", what, max)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return validUnicode(what, s, false)
		case c < 0x20 || c == 0x7f:
			return Invalid("%s contains a control character", what)
		}
	}
	return nil
}

// validUnicode is the rest of ValidName's (name) or ValidRef's checks for
// a string that is not all ASCII.
func validUnicode(what, s string, name bool) error {
	if !utf8.ValidString(s) {
		return Invalid("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return Invalid("%s contains a control character", what)
		case unicode.Is(unicode.Cf, r):
			return Invalid("%s contains an invisible format character (%U): it would look like another %s", what, r, what)
		case name && r == '/':
			return Invalid("%s contains a slash", what)
		}
	}
	if name && strings.TrimSpace(s) != s {
		return Invalid("%s has leading or trailing white space", what)
	}
	if !norm.NFC.IsNormalString(s) {
		return Invalid("%s is not in Unicode normalization form C (NFC): send %s as %s, its composed form",
			what, codePoints(s), codePoints(norm.NFC.String(s)))
	}
	return nil
}

// codePoints shows s with its non-ASCII characters as code points, so
// that a detail tells apart two strings that look the same.
func codePoints(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r < utf8.RuneSelf {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, `\u%04X`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ValidText checks free text (reasons): at most max bytes of UTF-8 without
// control characters other than tab and newline. Format characters and any
// normalization are allowed: text is read, not matched (an emoji sequence
// has zero-width joiners, a right-to-left phrase direction marks).
func ValidText(what, s string, max int) error {
	switch {
	case len(s) > max:
		return Invalid("%s is longer than %d bytes", what, max)
	case !utf8.ValidString(s):
		return Invalid("%s is not valid UTF-8", what)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' }) >= 0:
		return Invalid("%s contains a control character", what)
	}
	return nil
}

// Limits on the references a repair or a resume names.
const (
	MaxRefs   = 20
	MaxRefLen = 255
)

// ValidRefs checks what (a list of references: order refs, hold ids,
// ledger ids, a ticket): at most MaxRefs, each 1 to MaxRefLen bytes, as
// ValidRef.
func ValidRefs(what string, refs []string) error {
	if len(refs) > MaxRefs {
		return Invalid("%s names %d references, at most %d are allowed", what, len(refs), MaxRefs)
	}
	for i, r := range refs {
		if r == "" {
			return Invalid("%s[%d] is empty", what, i)
		}
		if err := ValidRef(fmt.Sprintf("%s[%d]", what, i), r, MaxRefLen); err != nil {
			return err
		}
	}
	return nil
}
