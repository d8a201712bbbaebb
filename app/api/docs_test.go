package api

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestDocs renders the reference from the embedded document: every
// operation and every schema has its section, links inside the page lead
// somewhere on it, and the page loads nothing (no script, stylesheet,
// image or font, from here or elsewhere).
func TestDocs(t *testing.T) {
	h := New(Deps{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	page := rec.Body.String()
	doc := loadOpenAPI(t)
	for key, op := range operations(t, doc) {
		id, _ := op["operationId"].(string)
		if !strings.Contains(page, `id="op-`+id+`"`) {
			t.Errorf("%s (%s) has no section", key, id)
		}
	}
	for name := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if !strings.Contains(page, `id="schema-`+name+`"`) {
			t.Errorf("schema %s has no section", name)
		}
	}
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(page, `id="`+m[1]+`"`) {
			t.Errorf("link #%s leads nowhere on the page", m[1])
		}
	}
	// The one link is the icon, inline, so the browser asks for no
	// /favicon.ico either.
	page = strings.Replace(page, `<link rel="icon" href="data:,">`, "", 1)
	for _, loads := range []string{"<script", "<link", "<img", "<iframe", "src=", "@import", "url("} {
		if strings.Contains(page, loads) {
			t.Errorf("the page has %q: it must load nothing", loads)
		}
	}
	if !strings.Contains(page, "<code>next_cursor</code>") {
		t.Error("descriptions are not rendered (no <code>next_cursor</code>)")
	}
}
