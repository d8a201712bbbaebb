package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on names and free text, in bytes, from the API contract.
const (
	// MaxNameLength bounds a SKU, pool, campaign id or operator.
	MaxNameLength = 64
	// MaxTextLength bounds a reason or a ref.
	MaxTextLength = 500
)

// ValidName checks a SKU, pool or campaign id: 1 to 64 bytes of UTF-8 with
// no control characters, no slash (it would not survive a URL path) and no
// surrounding white space.
func ValidName(what, s string) error {
	switch {
	case s == "":
		return Invalid("%s is empty", what)
	case len(s) > MaxNameLength:
		return Invalid("%s is longer than %d bytes", what, MaxNameLength)
	case !utf8.ValidString(s):
		return Invalid("%s is not valid UTF-8", what)
	case strings.TrimSpace(s) != s:
		return Invalid("%s has leading or trailing white space", what)
	case strings.ContainsRune(s, '/'):
		return Invalid("%s contains a slash", what)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return Invalid("%s contains a control character", what)
	}
	return nil
}

// ValidText checks free text (reasons, refs, order refs): at most max bytes
// of UTF-8 without control characters other than tab and newline.
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
