package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// getDocs fetches one page of the reference ("" for /docs).
func getDocs(t *testing.T, h http.Handler, page string) (int, string) {
	t.Helper()
	path := "/docs"
	if page != "" {
		path += "/" + page
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusOK && !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %s", path, rec.Header().Get("Content-Type"))
	}
	return rec.Code, rec.Body.String()
}

// TestDocs renders the reference from the embedded document: the contents
// at /docs lists every tag in the document's order and links every
// operation to its section on its tag's page, where it has its example;
// every schema has its section on /docs/schemas; every link between the
// pages leads somewhere; and no page loads anything (no script,
// stylesheet, image or font, from here or elsewhere).
func TestDocs(t *testing.T) {
	h := New(Deps{})
	doc := loadOpenAPI(t)
	status, index := getDocs(t, h, "")
	if status != http.StatusOK {
		t.Fatalf("GET /docs: %d", status)
	}
	pages := map[string]string{"": index}
	var tags []string
	for _, tag := range doc["tags"].([]any) {
		tags = append(tags, tag.(map[string]any)["name"].(string))
	}
	for _, page := range append(tags, schemasPage) {
		code, body := getDocs(t, h, page)
		if code != http.StatusOK {
			t.Fatalf("GET /docs/%s: %d", page, code)
		}
		pages[page] = body
	}
	if code, body := getDocs(t, h, "nope"); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Errorf("GET /docs/nope: %d %s, want a 404 not_found problem", code, body)
	}

	// The nav and the contents list the tags in the document's order.
	nav := regexp.MustCompile(`<li><a href="/docs/([a-z-]+)"`)
	for _, page := range []string{"", tags[0], schemasPage} {
		var got []string
		for _, m := range nav.FindAllStringSubmatch(pages[page], -1) {
			got = append(got, m[1])
		}
		if want := append(append([]string{}, tags...), schemasPage); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("/docs/%s's nav lists %v, want %v", page, got, want)
		}
	}
	var contents []string
	for _, m := range regexp.MustCompile(`<h3 id="tag-([a-z-]+)">`).FindAllStringSubmatch(pages[""], -1) {
		contents = append(contents, m[1])
	}
	if want := append(append([]string{}, tags...), schemasPage); strings.Join(contents, " ") != strings.Join(want, " ") {
		t.Errorf("the contents list %v, want %v", contents, want)
	}

	for key, op := range operations(t, doc) {
		id, _ := op["operationId"].(string)
		tag := op["tags"].([]any)[0].(string)
		if !strings.Contains(pages[""], `href="/docs/`+tag+`#op-`+id+`"`) {
			t.Errorf("the contents do not link %s (%s) to /docs/%s#op-%s", key, id, tag, id)
		}
		section, ok := sectionOf(pages[tag], `id="op-`+id+`"`)
		if !ok {
			t.Errorf("%s (%s) has no section on /docs/%s", key, id, tag)
			continue
		}
		if !strings.Contains(section, "<h3>Example</h3>") || !strings.Contains(section, `<p class="status">→ 2`) {
			t.Errorf("%s (%s) shows no example on /docs/%s", key, id, tag)
		}
		if samples, ok := op["x-codeSamples"].([]any); ok && len(samples) > 0 {
			source := samples[0].(map[string]any)["source"].(string)
			if !strings.Contains(section, "<pre><code>"+htmlText(source)+"</code></pre>") {
				t.Errorf("%s (%s): the example request is not shown", key, id)
			}
		}
	}
	for name := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		if !strings.Contains(pages[schemasPage], `id="schema-`+name+`"`) {
			t.Errorf("schema %s has no section", name)
		}
	}

	href := regexp.MustCompile(`href="([^"]*)"`)
	for page, body := range pages {
		for _, m := range href.FindAllStringSubmatch(body, -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			switch {
			case target == "":
			case target == "/docs":
				target = ""
			case strings.HasPrefix(target, "/docs/"):
				target = strings.TrimPrefix(target, "/docs/")
			default:
				continue // another part of the site: /openapi.json, /problems
			}
			if m[1] == "" || strings.HasPrefix(m[1], "#") {
				target = page
			}
			to, ok := pages[target]
			if !ok {
				t.Errorf("/docs/%s links %s, which is no page", page, m[1])
				continue
			}
			if anchor != "" && !strings.Contains(to, `id="`+anchor+`"`) {
				t.Errorf("/docs/%s links %s, which leads nowhere on its page", page, m[1])
			}
		}
		// The one link is the icon, inline, so the browser asks for no
		// /favicon.ico either.
		body = strings.Replace(body, `<link rel="icon" href="data:,">`, "", 1)
		for _, loads := range []string{"<script", "<link", "<img", "<iframe", "src=", "@import", "url("} {
			if strings.Contains(body, loads) {
				t.Errorf("/docs/%s has %q: it must load nothing", page, loads)
			}
		}
	}
	if !strings.Contains(pages["holds"], "<code>next_cursor</code>") {
		t.Error("descriptions are not rendered (no <code>next_cursor</code> on /docs/holds)")
	}
}

// sectionOf returns the <section> of page that has attr.
func sectionOf(page, attr string) (string, bool) {
	i := strings.Index(page, attr)
	if i < 0 {
		return "", false
	}
	end := strings.Index(page[i:], "</section>")
	if end < 0 {
		return page[i:], true
	}
	return page[i : i+end], true
}

// htmlText is s as html/template writes it in a text node.
func htmlText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\'':
			b.WriteString("&#39;")
		case '"':
			b.WriteString("&#34;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsExampleText shows an example as a reader reads it: a text answer
// as it is, JSON indented in the order its keys came.
func TestDocsExampleText(t *testing.T) {
	if got := exampleText(json.RawMessage(`"# HELP a\n# TYPE a counter"`)); got != "# HELP a\n# TYPE a counter" {
		t.Errorf("text: %q", got)
	}
	if got := exampleText(json.RawMessage(`{"z":1,"a":[true],"s":"<é>"}`)); got != `{"z": 1, "a": [true], "s": "<é>"}` {
		t.Errorf("JSON that fits on a line: %q", got)
	}
	long := `{"id":"01a23646-3e01-7e85-9de5-f45de34dc37e","items":[{"sku":"A1","quantity":2},{"sku":"B2","quantity":1}],` +
		`"pools":[{"location":"default","pool":"main","total":20,"available":20,"reserved":0,"sold":0}],"empty":{}}`
	want := `{
  "id": "01a23646-3e01-7e85-9de5-f45de34dc37e",
  "items": [
    {"sku": "A1", "quantity": 2},
    {"sku": "B2", "quantity": 1}
  ],
  "pools": [
    {
      "location": "default",
      "pool": "main",
      "total": 20,
      "available": 20,
      "reserved": 0,
      "sold": 0
    }
  ],
  "empty": {}
}`
	if got := exampleText(json.RawMessage(long)); got != want {
		t.Errorf("JSON too long for a line:\n%s\nwant\n%s", got, want)
	}
}
