package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// The API reference at /docs is openapi.json rendered on the server into
// HTML pages: /docs, the contents (the introduction, authentication, and
// every tag with its operations, in the document's order of tags);
// /docs/<tag>, one tag's operations, each with its recorded example;
// /docs/schemas, every schema. No script, no stylesheet or font from
// elsewhere, nothing a browser fetches but the page itself (the
// Content-Security-Policy of every answer would refuse it anyway). The
// pages are rendered once, on first use.

var (
	docsOnce  sync.Once
	docsPages map[string][]byte
	docsErr   error
)

// schemasPage is the page of every schema, /docs/schemas; no tag may have
// its name.
const schemasPage = "schemas"

func (s *server) docs(c echo.Context) error {
	docsOnce.Do(func() { docsPages, docsErr = renderDocs(openapiDoc) })
	if docsErr != nil {
		return docsErr
	}
	name := c.Param("page")
	page, ok := docsPages[name]
	if !ok {
		return newProblem(http.StatusNotFound, "not_found", "the API reference has no page "+strconv.Quote(name)+": /docs lists them")
	}
	return c.HTMLBlob(http.StatusOK, page)
}

// oaDoc is the part of an OpenAPI 3.1 document the reference shows.
type oaDoc struct {
	Info struct {
		Title, Version, Description string
	}
	Tags []struct {
		Name, Description string
	}
	Paths      map[string]map[string]json.RawMessage
	Components struct {
		Schemas         map[string]*oaSchema
		Parameters      map[string]*oaParam
		Responses       map[string]*oaResponse
		SecuritySchemes map[string]struct {
			Type, Scheme, In, Name, Description string
		}
	}
}

type oaOp struct {
	OperationID string `json:"operationId"`
	Summary     string
	Description string
	Tags        []string
	Deprecated  bool
	Role        string `json:"x-role"`
	Security    []map[string][]string
	Parameters  []*oaParam
	RequestBody *struct {
		Description string
		Required    bool
		Content     map[string]oaMedia
	} `json:"requestBody"`
	Responses map[string]*oaResponse
	// CodeSamples are the operation's example requests (x-codeSamples, as
	// Redoc names them): a curl command each, recorded from a real
	// exchange with the answer beside its status's example.
	CodeSamples []struct{ Lang, Label, Source string } `json:"x-codeSamples"`
}

// oaMedia is a body of one content type: its schema and an example.
type oaMedia struct {
	Schema  *oaSchema
	Example json.RawMessage
}

type oaParam struct {
	Ref         string `json:"$ref"`
	Name, In    string
	Description string
	Required    bool
	Deprecated  bool
	Schema      *oaSchema
}

type oaResponse struct {
	Ref         string `json:"$ref"`
	Description string
	Content     map[string]oaMedia
}

type oaSchema struct {
	Ref                  string `json:"$ref"`
	Type                 any
	Format               string
	Description          string
	Deprecated           bool
	Enum                 []any
	Const                any
	Default              any
	Items                *oaSchema
	Properties           map[string]*oaSchema
	Required             []string
	AdditionalProperties any         `json:"additionalProperties"`
	AllOf                []*oaSchema `json:"allOf"`
	OneOf                []*oaSchema `json:"oneOf"`
	Minimum, Maximum     *float64
	MinLength, MaxLength *int
	MinItems, MaxItems   *int
	Pattern              string
}

// renderDocs renders the document raw as the reference's pages, by name:
// "" for /docs, a tag's name for its page, schemasPage for the schemas.
func renderDocs(raw []byte) (map[string][]byte, error) {
	var doc oaDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("read openapi.json: %w", err)
	}
	r := &docsRenderer{doc: &doc, opTag: map[string]string{}}
	d := r.site()
	pages := map[string][]byte{}
	render := func(name string, p docsPage) error {
		var b bytes.Buffer
		if err := docsTemplate.Execute(&b, p); err != nil {
			return fmt.Errorf("render the API reference's page %q: %w", name, err)
		}
		pages[name] = b.Bytes()
		return nil
	}
	if err := render("", docsPage{Site: d, Index: true}); err != nil {
		return nil, err
	}
	for i := range d.Tags {
		t := &d.Tags[i]
		if t.Name == schemasPage || t.Name == "" {
			return nil, fmt.Errorf("openapi.json: a tag may not be named %q", t.Name)
		}
		p := docsPage{Site: d, Tag: t}
		if i > 0 {
			p.Prev = &d.Tags[i-1]
		}
		if i+1 < len(d.Tags) {
			p.Next = &d.Tags[i+1]
		}
		if err := render(t.Name, p); err != nil {
			return nil, err
		}
	}
	if err := render(schemasPage, docsPage{Site: d, Schemas: true}); err != nil {
		return nil, err
	}
	return pages, nil
}

type docsRenderer struct {
	doc *oaDoc
	// opTag is each operation's tag, the page it is on.
	opTag map[string]string
}

type docsOp struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Deprecated                bool
	Auth                      string
	Params                    []docsRow
	Body                      template.HTML
	BodyNote                  template.HTML
	Responses                 []docsRow
	Examples                  []docsExample
}

// docsExample is a recorded exchange: the request as a curl command, and
// the answer's status and body.
type docsExample struct {
	Request, Status, ContentType, Answer string
}

type docsRow struct {
	Name, In   string
	Type       template.HTML
	Required   bool
	Deprecated bool
	Text       template.HTML
}

type docsTag struct {
	Name        string
	Description template.HTML
	Ops         []docsOp
}

type docsSchema struct {
	Name        string
	Type        template.HTML
	Description template.HTML
	Props       []docsRow
}

// docsSite is what every page draws on.
type docsSite struct {
	Title, Version string
	Description    template.HTML
	Auth           []docsRow
	Tags           []docsTag
	Schemas        []docsSchema
}

// docsPage is one page: the contents (Index), a tag's page (Tag, between
// Prev and Next), or the schemas (Schemas).
type docsPage struct {
	Site       docsSite
	Index      bool
	Tag        *docsTag
	Prev, Next *docsTag
	Schemas    bool
}

// methodOrder is the order of one path's operations on a page: a
// collection's create before its list, a resource's read before its
// changes.
var methodOrder = []string{"post", "get", "put", "patch", "delete", "head", "options", "trace"}

func (r *docsRenderer) site() docsSite {
	d := docsSite{Title: r.doc.Info.Title, Version: r.doc.Info.Version, Description: markdown(r.doc.Info.Description)}
	for _, name := range sortedKeys(r.doc.Components.SecuritySchemes) {
		s := r.doc.Components.SecuritySchemes[name]
		d.Auth = append(d.Auth, docsRow{Name: name, Type: template.HTML(html.EscapeString(strings.TrimSpace(s.Type + " " + s.Scheme))), Text: markdown(s.Description)})
	}
	type entry struct {
		path, method string
		op           *oaOp
		shared       []*oaParam
	}
	byTag := map[string][]entry{}
	for _, path := range sortedKeys(r.doc.Paths) {
		item := r.doc.Paths[path]
		var shared []*oaParam
		if raw, ok := item["parameters"]; ok {
			_ = json.Unmarshal(raw, &shared)
		}
		for _, m := range methodOrder {
			raw, ok := item[m]
			if !ok {
				continue
			}
			op := new(oaOp)
			if err := json.Unmarshal(raw, op); err != nil {
				continue
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			if op.OperationID == "" {
				op.OperationID = strings.ToLower(m) + strings.NewReplacer("/", "-", "{", "", "}", "").Replace(path)
			}
			r.opTag[op.OperationID] = tag
			byTag[tag] = append(byTag[tag], entry{path, m, op, shared})
		}
	}
	// The operations are rendered once every one's page is known, so that
	// a description may link to another tag's operation.
	ops := func(es []entry) []docsOp {
		var out []docsOp
		for _, e := range es {
			out = append(out, r.op(e.path, e.method, e.op, e.shared))
		}
		return out
	}
	for _, t := range r.doc.Tags {
		if es := byTag[t.Name]; len(es) > 0 {
			d.Tags = append(d.Tags, docsTag{Name: t.Name, Description: markdown(t.Description), Ops: ops(es)})
			delete(byTag, t.Name)
		}
	}
	for _, name := range sortedKeys(byTag) {
		d.Tags = append(d.Tags, docsTag{Name: name, Ops: ops(byTag[name])})
	}
	for _, name := range sortedKeys(r.doc.Components.Schemas) {
		s := r.doc.Components.Schemas[name]
		d.Schemas = append(d.Schemas, docsSchema{Name: name, Type: r.typeOf(s), Description: markdown(s.Description), Props: r.props(s)})
	}
	return d
}

func (r *docsRenderer) op(path, method string, op *oaOp, shared []*oaParam) docsOp {
	o := docsOp{ID: op.OperationID, Method: strings.ToUpper(method), Path: path, Summary: op.Summary,
		Description: markdown(op.Description), Deprecated: op.Deprecated}
	switch {
	case op.Security != nil && len(op.Security) == 0:
		o.Auth = "none"
	case op.Role != "":
		o.Auth = "bearer token, role " + op.Role
	}
	for _, p := range append(slices.Clone(shared), op.Parameters...) {
		p = r.param(p)
		if p == nil {
			continue
		}
		o.Params = append(o.Params, docsRow{Name: p.Name, In: p.In, Type: r.typeOf(p.Schema), Required: p.Required,
			Deprecated: p.Deprecated || p.Schema != nil && p.Schema.Deprecated, Text: markdown(p.Description)})
	}
	if rb := op.RequestBody; rb != nil {
		if cts := sortedKeys(rb.Content); len(cts) > 0 {
			o.Body = r.typeOf(rb.Content[cts[0]].Schema)
			o.BodyNote = template.HTML(html.EscapeString(strings.Join(cts, ", ")))
			if rb.Required {
				o.BodyNote += " (required)"
			}
		}
	}
	var request string
	for _, cs := range op.CodeSamples {
		request = cs.Source
		break
	}
	for _, status := range sortedKeys(op.Responses) {
		resp := r.response(op.Responses[status])
		if resp == nil {
			continue
		}
		row := docsRow{Name: status, Text: markdown(resp.Description)}
		if cts := sortedKeys(resp.Content); len(cts) > 0 {
			row.In = strings.Join(cts, ", ")
			row.Type = r.typeOf(resp.Content[cts[0]].Schema)
		}
		o.Responses = append(o.Responses, row)
		for _, ct := range sortedKeys(resp.Content) {
			if ex := resp.Content[ct].Example; len(ex) > 0 {
				o.Examples = append(o.Examples, docsExample{Request: request, Status: status, ContentType: ct, Answer: exampleText(ex)})
				request = ""
			}
		}
	}
	if request != "" { // an answer with no body (204)
		for _, status := range sortedKeys(op.Responses) {
			if strings.HasPrefix(status, "2") {
				o.Examples = append(o.Examples, docsExample{Request: request, Status: status})
				break
			}
		}
	}
	return o
}

func (r *docsRenderer) param(p *oaParam) *oaParam {
	if p != nil && p.Ref != "" {
		return r.doc.Components.Parameters[refName(p.Ref)]
	}
	return p
}

func (r *docsRenderer) response(p *oaResponse) *oaResponse {
	if p != nil && p.Ref != "" {
		return r.doc.Components.Responses[refName(p.Ref)]
	}
	return p
}

// props lists an object schema's properties (those of allOf's parts too).
func (r *docsRenderer) props(s *oaSchema) []docsRow {
	if s == nil {
		return nil
	}
	var rows []docsRow
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		rows = append(rows, docsRow{Name: name, Type: r.typeOf(p), Required: slices.Contains(s.Required, name),
			Deprecated: p.Deprecated, Text: markdown(p.Description)})
	}
	for _, part := range s.AllOf {
		if part.Ref == "" {
			rows = append(rows, r.props(part)...)
		}
	}
	return rows
}

// typeOf says what a schema is in a few words, linking named schemas.
func (r *docsRenderer) typeOf(s *oaSchema) template.HTML {
	if s == nil {
		return ""
	}
	if s.Ref != "" {
		name := refName(s.Ref)
		return template.HTML(`<a href="/docs/schemas#schema-` + html.EscapeString(name) + `">` + html.EscapeString(name) + `</a>`)
	}
	var parts []string
	switch t := s.Type.(type) {
	case string:
		parts = append(parts, html.EscapeString(t))
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, html.EscapeString(fmt.Sprint(x)))
		}
		parts = append(parts, strings.Join(ts, " or "))
	}
	if len(parts) > 0 && (parts[0] == "array" || strings.HasPrefix(parts[0], "array ")) && s.Items != nil {
		parts[0] = strings.Replace(parts[0], "array", "array of "+string(r.typeOf(s.Items)), 1)
	}
	for _, x := range s.AllOf {
		parts = append(parts, string(r.typeOf(x)))
	}
	if len(s.OneOf) > 0 {
		var alts []string
		for _, x := range s.OneOf {
			alts = append(alts, string(r.typeOf(x)))
		}
		parts = append(parts, "one of "+strings.Join(alts, ", "))
	}
	if s.Format != "" {
		parts = append(parts, "("+html.EscapeString(s.Format)+")")
	}
	if len(s.Enum) > 0 {
		var vs []string
		for _, v := range s.Enum {
			vs = append(vs, "<code>"+html.EscapeString(jsonText(v))+"</code>")
		}
		parts = append(parts, "one of "+strings.Join(vs, ", "))
	}
	if s.Const != nil {
		parts = append(parts, "<code>"+html.EscapeString(jsonText(s.Const))+"</code>")
	}
	if bounds := rangeText(s); bounds != "" {
		parts = append(parts, bounds)
	}
	if s.Default != nil {
		parts = append(parts, "default <code>"+html.EscapeString(jsonText(s.Default))+"</code>")
	}
	return template.HTML(strings.Join(parts, " "))
}

func rangeText(s *oaSchema) string {
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		return num(s.Minimum) + "–" + num(s.Maximum)
	case s.Minimum != nil:
		return "≥ " + num(s.Minimum)
	case s.Maximum != nil:
		return "≤ " + num(s.Maximum)
	case s.MaxLength != nil:
		return fmt.Sprintf("up to %d characters", *s.MaxLength)
	case s.MaxItems != nil:
		return fmt.Sprintf("up to %d items", *s.MaxItems)
	}
	return ""
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func refName(ref string) string { return ref[strings.LastIndex(ref, "/")+1:] }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	mdCode   = regexp.MustCompile("`([^`]+)`")
	mdBold   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	mdLink   = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`)
	mdBullet = regexp.MustCompile(`^\s*[-*] `)
)

// markdown renders the little Markdown the document's descriptions use:
// paragraphs, bullet lists, `code`, **bold** and links (relative ones, or
// http(s)), everything else escaped.
func markdown(s string) template.HTML {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Split(para, "\n")
		if para == "" {
			continue
		}
		if mdBullet.MatchString(lines[0]) {
			b.WriteString("<ul>")
			var item []string
			flush := func() {
				if len(item) > 0 {
					b.WriteString("<li>" + inline(strings.Join(item, " ")) + "</li>")
					item = nil
				}
			}
			for _, l := range lines {
				if mdBullet.MatchString(l) {
					flush()
					l = mdBullet.ReplaceAllString(l, "")
				}
				item = append(item, strings.TrimSpace(l))
			}
			flush()
			b.WriteString("</ul>")
			continue
		}
		b.WriteString("<p>" + inline(strings.Join(lines, " ")) + "</p>")
	}
	return template.HTML(b.String())
}

func inline(s string) string {
	// Code spans first, kept aside, so nothing inside them is taken for
	// bold or a link.
	var codes []string
	s = mdCode.ReplaceAllStringFunc(s, func(m string) string {
		codes = append(codes, "<code>"+html.EscapeString(m[1:len(m)-1])+"</code>")
		return "\x00" + strconv.Itoa(len(codes)-1) + "\x00"
	})
	s = html.EscapeString(s)
	s = mdBold.ReplaceAllString(s, "<strong>$1</strong>")
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := mdLink.FindStringSubmatch(m)
		href := html.UnescapeString(sub[2])
		if !strings.HasPrefix(href, "/") && !strings.HasPrefix(href, "#") && !strings.HasPrefix(href, "https://") && !strings.HasPrefix(href, "http://") {
			return sub[1]
		}
		return `<a href="` + html.EscapeString(href) + `">` + sub[1] + `</a>`
	})
	for i, c := range codes {
		s = strings.Replace(s, "\x00"+strconv.Itoa(i)+"\x00", c, 1)
	}
	return s
}

var docsTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<title>{{with .Tag}}{{.Name}} · {{end}}{{if .Schemas}}schemas · {{end}}{{.Site.Title}} {{.Site.Version}} · API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}
main{max-width:60rem;margin:0 auto;padding:1rem}
nav{padding:.6rem 1rem;background:#f6f6f7;border-bottom:1px solid #ddd}
nav ul{display:flex;flex-wrap:wrap;gap:.1rem .9rem;list-style:none;margin:.3em 0 0;padding:0}
nav a[aria-current]{font-weight:700;color:#1d1d1f}
ul.ops{padding-left:1.2em}
ul.ops li{margin:.15em 0}
ul.names{display:flex;flex-wrap:wrap;gap:.1rem .9rem;list-style:none;padding:0}
code{background:#f1f1f3;padding:0 .25em;border-radius:3px;font-size:.92em;overflow-wrap:anywhere}
pre{background:#f6f8fa;border:1px solid #e4e4e4;border-radius:4px;padding:.5em .7em;margin:.3em 0 .6em;font-size:.82em;line-height:1.4;white-space:pre-wrap;overflow-wrap:anywhere}
pre code{background:none;padding:0;font-size:1em}
a{color:#0645ad}
section.op{border-top:1px solid #ddd;margin-top:1.5rem;padding-top:.5rem}
.method{display:inline-block;min-width:4.2em;font-weight:700;font-family:monospace}
.path{font-family:monospace;overflow-wrap:anywhere}
.dep{color:#a00;font-size:.85em}
.status{margin:.2em 0;font-family:monospace}
.up,.pager{font-size:.9em}
table{border-collapse:collapse;width:100%;margin:.5em 0}
th,td{border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top;padding:.3em .4em}
td p{margin:0 0 .3em}
@media (max-width:600px){table,tbody,tr{display:block}thead{display:none}tr{border-bottom:1px solid #ddd;padding:.35em 0}td{display:inline;border:0;padding:0 .5em 0 0}td:last-child{display:block;padding:.15em 0 0}}
</style></head><body>
{{$current := ""}}{{with .Tag}}{{$current = .Name}}{{end}}{{if .Schemas}}{{$current = "schemas"}}{{end}}
<nav id="top"><a href="/docs"{{if .Index}} aria-current="page"{{end}}><strong>{{.Site.Title}} {{.Site.Version}} API</strong></a> · <a href="/openapi.json">openapi.json</a> · <a href="/problems">problem codes</a>
<ul>{{range .Site.Tags}}<li><a href="/docs/{{.Name}}"{{if eq .Name $current}} aria-current="page"{{end}}>{{.Name}}</a></li>{{end}}<li><a href="/docs/schemas"{{if eq "schemas" $current}} aria-current="page"{{end}}>schemas</a></li></ul></nav>
<main>
{{- if .Index}}
<h1>{{.Site.Title}} API reference</h1>
{{.Site.Description}}
<h2 id="authentication">Authentication</h2>
<table><thead><tr><th>scheme</th><th>type</th><th>how</th></tr></thead><tbody>
{{range .Site.Auth}}<tr><td><code>{{.Name}}</code></td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>
<h2 id="contents">Contents</h2>
<p>One page per tag, each operation with an example recorded from a real exchange; the schemas on a page of their own.</p>
{{range .Site.Tags}}{{$tag := .Name}}<h3 id="tag-{{.Name}}"><a href="/docs/{{.Name}}">{{.Name}}</a></h3>{{.Description}}
<ul class="ops">{{range .Ops}}<li><a href="/docs/{{$tag}}#op-{{.ID}}"><span class="method">{{.Method}}</span> <span class="path">{{.Path}}</span></a> {{.Summary}}</li>{{end}}</ul>
{{end}}<h3 id="tag-schemas"><a href="/docs/schemas">schemas</a></h3><p>Every body's fields, {{len .Site.Schemas}} schemas.</p>
{{- else if .Tag}}{{with .Tag}}
<h1>{{.Name}}</h1>{{.Description}}
<ul class="ops">{{range .Ops}}<li><a href="#op-{{.ID}}"><span class="method">{{.Method}}</span> <span class="path">{{.Path}}</span></a> {{.Summary}}</li>{{end}}</ul>
{{range .Ops}}<section class="op" id="op-{{.ID}}">
<h2><span class="method">{{.Method}}</span> <span class="path">{{.Path}}</span>{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</h2>
<p><strong>{{.Summary}}</strong>{{if .Auth}} · auth: {{.Auth}}{{end}} · <code>{{.ID}}</code></p>
{{.Description}}
{{if .Examples}}<h3>Example</h3>{{range .Examples}}{{if .Request}}<pre><code>{{.Request}}</code></pre>{{end}}
<p class="status">→ {{.Status}}{{if .ContentType}} <small>{{.ContentType}}</small>{{end}}</p>{{if .Answer}}<pre><code>{{.Answer}}</code></pre>{{end}}{{end}}{{end}}
{{if .Params}}<h3>Parameters</h3><table><thead><tr><th>name</th><th>in</th><th>type</th><th>about</th></tr></thead><tbody>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} (required){{end}}{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>{{end}}
{{if .Body}}<h3>Request body</h3><p>{{.BodyNote}}: {{.Body}}</p>{{end}}
<h3>Responses</h3><table><thead><tr><th>status</th><th>body</th><th>when</th></tr></thead><tbody>
{{range .Responses}}<tr><td>{{.Name}}</td><td>{{if .Type}}{{.Type}} <small>{{.In}}</small>{{end}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>
<p class="up"><a href="#top">↑ top</a></p>
</section>{{end}}{{end}}
<p class="pager">{{with .Prev}}← <a href="/docs/{{.Name}}">{{.Name}}</a> · {{end}}<a href="/docs">contents</a>{{with .Next}} · <a href="/docs/{{.Name}}">{{.Name}}</a> →{{end}}</p>
{{- else}}
<h1>Schemas</h1>
<ul class="names">{{range .Site.Schemas}}<li><a href="#schema-{{.Name}}">{{.Name}}</a></li>{{end}}</ul>
{{range .Site.Schemas}}<section class="op" id="schema-{{.Name}}"><h2>{{.Name}}</h2><p>{{.Type}}</p>{{.Description}}
{{if .Props}}<table><thead><tr><th>field</th><th>type</th><th>about</th></tr></thead><tbody>
{{range .Props}}<tr><td><code>{{.Name}}</code>{{if .Required}} (required){{end}}{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>{{end}}<p class="up"><a href="#top">↑ top</a></p></section>
{{end}}
{{- end}}</main></body></html>
`))
