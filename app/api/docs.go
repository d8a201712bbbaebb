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
// one HTML page: no script, no stylesheet or font from elsewhere, nothing
// a browser fetches but the page itself (the Content-Security-Policy of
// every answer would refuse it anyway). It is rendered once, on first use.

var (
	docsOnce sync.Once
	docsPage []byte
	docsErr  error
)

func (s *server) docs(c echo.Context) error {
	docsOnce.Do(func() { docsPage, docsErr = renderDocs(openapiDoc) })
	if docsErr != nil {
		return docsErr
	}
	return c.HTMLBlob(http.StatusOK, docsPage)
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
		Content     map[string]struct{ Schema *oaSchema }
	} `json:"requestBody"`
	Responses map[string]*oaResponse
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
	Content     map[string]struct{ Schema *oaSchema }
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

// renderDocs renders the document raw as the reference page.
func renderDocs(raw []byte) ([]byte, error) {
	var doc oaDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("read openapi.json: %w", err)
	}
	r := &docsRenderer{doc: &doc}
	var b bytes.Buffer
	if err := docsTemplate.Execute(&b, r.page()); err != nil {
		return nil, fmt.Errorf("render the API reference: %w", err)
	}
	return b.Bytes(), nil
}

type docsRenderer struct{ doc *oaDoc }

type docsOp struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Deprecated                bool
	Auth                      string
	Params                    []docsRow
	Body                      template.HTML
	BodyNote                  template.HTML
	Responses                 []docsRow
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

type docsData struct {
	Title, Version string
	Description    template.HTML
	Auth           []docsRow
	Tags           []docsTag
	Schemas        []docsSchema
}

var methodOrder = []string{"get", "put", "post", "patch", "delete", "head", "options", "trace"}

func (r *docsRenderer) page() docsData {
	d := docsData{Title: r.doc.Info.Title, Version: r.doc.Info.Version, Description: markdown(r.doc.Info.Description)}
	for _, name := range sortedKeys(r.doc.Components.SecuritySchemes) {
		s := r.doc.Components.SecuritySchemes[name]
		d.Auth = append(d.Auth, docsRow{Name: name, Type: template.HTML(html.EscapeString(strings.TrimSpace(s.Type + " " + s.Scheme))), Text: markdown(s.Description)})
	}
	byTag := map[string][]docsOp{}
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
			var op oaOp
			if err := json.Unmarshal(raw, &op); err != nil {
				continue
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], r.op(path, m, &op, shared))
		}
	}
	for _, t := range r.doc.Tags {
		if ops := byTag[t.Name]; len(ops) > 0 {
			d.Tags = append(d.Tags, docsTag{Name: t.Name, Description: markdown(t.Description), Ops: ops})
			delete(byTag, t.Name)
		}
	}
	for _, name := range sortedKeys(byTag) {
		d.Tags = append(d.Tags, docsTag{Name: name, Ops: byTag[name]})
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
	if o.ID == "" {
		o.ID = strings.ToLower(method) + strings.NewReplacer("/", "-", "{", "", "}", "").Replace(path)
	}
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
		return template.HTML(`<a href="#schema-` + html.EscapeString(name) + `">` + html.EscapeString(name) + `</a>`)
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
<title>{{.Title}} {{.Version}} · API reference</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d1d1f}
main{max-width:60rem;margin:0 auto;padding:1rem}
nav{padding:1rem;background:#f6f6f7;border-bottom:1px solid #ddd}
nav ul{margin:.2em 0;padding-left:1.2em}
code{background:#f1f1f3;padding:0 .25em;border-radius:3px;font-size:.92em;overflow-wrap:anywhere}
a{color:#0645ad}
section.op{border-top:1px solid #ddd;margin-top:1.5rem;padding-top:.5rem}
.method{display:inline-block;min-width:4.2em;font-weight:700;font-family:monospace}
.path{font-family:monospace;overflow-wrap:anywhere}
.dep{color:#a00;font-size:.85em}
table{border-collapse:collapse;width:100%;margin:.5em 0}
th,td{border-bottom:1px solid #e4e4e4;text-align:left;vertical-align:top;padding:.3em .4em}
td p{margin:0 0 .3em}
@media (max-width:600px){table,tbody,tr,td,th{display:block}thead{display:none}tr{border-bottom:1px solid #ddd;padding:.3em 0}td{border:0;padding:.1em 0}}
</style></head><body>
<nav><strong>{{.Title}} {{.Version}}</strong> · <a href="/openapi.json">openapi.json</a> · <a href="/problems">problem codes</a>
<ul>{{range .Tags}}<li><a href="#tag-{{.Name}}">{{.Name}}</a> ({{len .Ops}})</li>{{end}}<li><a href="#schemas">schemas</a></li></ul></nav>
<main>
<h1>{{.Title}} API reference</h1>
{{.Description}}
<h2>Authentication</h2>
<table><thead><tr><th>scheme</th><th>type</th><th>how</th></tr></thead><tbody>
{{range .Auth}}<tr><td><code>{{.Name}}</code></td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>
{{range .Tags}}<h2 id="tag-{{.Name}}">{{.Name}}</h2>{{.Description}}
<ul>{{range .Ops}}<li><a href="#op-{{.ID}}"><span class="method">{{.Method}}</span> <span class="path">{{.Path}}</span></a> {{.Summary}}</li>{{end}}</ul>
{{range .Ops}}<section class="op" id="op-{{.ID}}">
<h3><span class="method">{{.Method}}</span> <span class="path">{{.Path}}</span>{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</h3>
<p><strong>{{.Summary}}</strong>{{if .Auth}} · auth: {{.Auth}}{{end}} · <code>{{.ID}}</code></p>
{{.Description}}
{{if .Params}}<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th>about</th></tr></thead><tbody>
{{range .Params}}<tr><td><code>{{.Name}}</code>{{if .Required}} (required){{end}}{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</td><td>{{.In}}</td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>{{end}}
{{if .Body}}<h4>Request body</h4><p>{{.BodyNote}}: {{.Body}}</p>{{end}}
<h4>Responses</h4><table><thead><tr><th>status</th><th>body</th><th>when</th></tr></thead><tbody>
{{range .Responses}}<tr><td>{{.Name}}</td><td>{{if .Type}}{{.Type}} <small>{{.In}}</small>{{end}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>
</section>{{end}}{{end}}
<h2 id="schemas">Schemas</h2>
{{range .Schemas}}<section class="op" id="schema-{{.Name}}"><h3>{{.Name}}</h3><p>{{.Type}}</p>{{.Description}}
{{if .Props}}<table><thead><tr><th>field</th><th>type</th><th>about</th></tr></thead><tbody>
{{range .Props}}<tr><td><code>{{.Name}}</code>{{if .Required}} (required){{end}}{{if .Deprecated}} <span class="dep">deprecated</span>{{end}}</td><td>{{.Type}}</td><td>{{.Text}}</td></tr>{{end}}
</tbody></table>{{end}}</section>
{{end}}</main></body></html>
`))
