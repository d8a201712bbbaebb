package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stockhold/stockhold/app/domain"
)

// jobsPath is the one documented path for River's dashboard, which New
// mounts with e.Any on /ops/jobs and /ops/jobs/*.
const jobsPath = "/ops/jobs/"

// openapiMethods are the operations an OpenAPI 3.1 path item can hold.
var openapiMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// operations returns the document's operations as "METHOD /path" keys.
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok || len(paths) == 0 {
		t.Fatal("openapi.json has no paths")
	}
	ops := map[string]map[string]any{}
	for path, item := range paths {
		pi, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path %s is not an object", path)
		}
		for _, m := range openapiMethods {
			if op, ok := pi[m].(map[string]any); ok {
				ops[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return ops
}

var (
	echoParam   = regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	pathParamRE = regexp.MustCompile(`\{[^}]+\}`)
)

// isConsole reports whether an echo route is the operator console's: its
// HTML pages (/ops and /ops/*, minus River's dashboard) are for people,
// not API clients, and are documented in the README instead.
func isConsole(p string) bool {
	return p == "/ops" || p == "/ops/*"
}

// documentedPath turns an echo route path into its OpenAPI path.
func documentedPath(p string) string {
	if p == "/ops/jobs" || strings.HasPrefix(p, "/ops/jobs/") {
		return jobsPath
	}
	return echoParam.ReplaceAllString(p, "{$1}")
}

func TestOpenAPIVersion(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi is %v, want 3.1.0", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] != "stockhold" || info["version"] == nil {
		t.Errorf("info = %v, want title stockhold and a version", info)
	}
}

func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := operations(t, doc)
	e := New(Deps{JobsUI: http.NotFoundHandler(), Console: http.NotFoundHandler()})

	registered := map[string]bool{}
	jobsMethods := map[string]bool{}
	consoleRouted := false
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Method, "echo_") { // echo's own (RouteNotFound)
			continue
		}
		if isConsole(r.Path) {
			consoleRouted = true
			continue
		}
		path := documentedPath(r.Path)
		if path == jobsPath {
			jobsMethods[r.Method] = true
			continue
		}
		key := r.Method + " " + path
		registered[key] = true
		if !slices.Contains(openapiMethods, strings.ToLower(r.Method)) {
			t.Errorf("route %s %s uses a method OpenAPI 3.1 cannot describe", r.Method, r.Path)
			continue
		}
		if _, ok := ops[key]; !ok {
			t.Errorf("route %s %s is registered but not in openapi.json (as %s)", r.Method, r.Path, key)
		}
	}

	if !consoleRouted {
		t.Error("the console is not routed under /ops/")
	}
	for key := range ops {
		if _, path, _ := strings.Cut(key, " "); strings.HasPrefix(path, "/ops/") && path != jobsPath {
			t.Errorf("openapi.json documents console page %s: the console is HTML, documented in the README", key)
		}
	}

	// River's dashboard takes every method (e.Any); the document lists the
	// ones River UI uses. Each documented one must be routed, GET at least.
	if len(jobsMethods) > 0 {
		if _, ok := ops["GET "+jobsPath]; !ok {
			t.Errorf("the job dashboard is routed but GET %s is not documented", jobsPath)
		}
	}
	for key := range ops {
		method, path, _ := strings.Cut(key, " ")
		if path == jobsPath {
			if !jobsMethods[method] {
				t.Errorf("openapi.json documents %s but the router does not route it", key)
			}
			continue
		}
		if !registered[key] {
			t.Errorf("openapi.json documents %s but no such route is registered", key)
		}
	}
}

// TestOpenAPIRefs checks that every $ref points into the document at
// something that exists.
func TestOpenAPIRefs(t *testing.T) {
	doc := loadOpenAPI(t)
	var root any = doc
	n := 0
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if _, err := resolvePointer(root, ref); err != "" {
					t.Errorf("%s: $ref %q: %s", at, ref, err)
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(v[k], at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc, "#")
	if n == 0 {
		t.Fatal("openapi.json has no $ref at all")
	}
}

func resolvePointer(root any, ref string) (any, string) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, "not a local reference"
	}
	cur := root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, "no member " + strconv.Quote(tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, "no index " + tok
			}
			cur = c[i]
		default:
			return nil, "cannot descend into " + strconv.Quote(tok)
		}
	}
	return cur, ""
}

// TestOpenAPISecurity checks each operation's declared security against the
// router: an operation with `security: []` answers without a token, every
// other one is 401 without one and names its role in x-role.
func TestOpenAPISecurity(t *testing.T) {
	doc := loadOpenAPI(t)
	ops := operations(t, doc)
	h := New(Deps{JobsUI: http.NotFoundHandler(), Console: http.NotFoundHandler()})
	ids := map[string]string{}
	for key, op := range ops {
		id, _ := op["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", key)
		} else if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share operationId %s", key, other, id)
		}
		ids[id] = key

		sec, ok := op["security"].([]any)
		if !ok {
			t.Errorf("%s does not declare its security", key)
			continue
		}
		open := len(sec) == 0
		role, _ := op["x-role"].(string)
		switch {
		case open && role != "":
			t.Errorf("%s is unauthenticated but has x-role %q", key, role)
		case !open && role != "shop" && role != "ops":
			t.Errorf("%s needs auth but its x-role is %q, want shop or ops", key, role)
		}
		method, path, _ := strings.Cut(key, " ")
		url := pathParamRE.ReplaceAllString(path, "1")
		if path == "/problems/{code}" {
			url = "/problems/not_found" // a code that has a page
		}
		if path == "/docs/{page}" {
			url = "/docs/holds" // a page there is
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, url, nil))
		switch {
		case open && rec.Code == http.StatusUnauthorized:
			t.Errorf("%s is documented as unauthenticated but answers 401", key)
		case open && rec.Code == http.StatusNotFound:
			t.Errorf("%s is documented but answers 404", key)
		case !open && rec.Code != http.StatusUnauthorized:
			t.Errorf("%s is documented as needing auth but answers %d without a token", key, rec.Code)
		case !open && rec.Header().Get("Content-Type") != "application/problem+json":
			t.Errorf("%s: a 401 is %q, want application/problem+json", key, rec.Header().Get("Content-Type"))
		}
		if key == "GET /openapi.json" && rec.Body.String() != string(openapiDoc) {
			t.Errorf("GET /openapi.json does not serve the embedded document")
		}
	}
}

// TestProblemCodes checks the document's problem codes against what the
// server can send. The source of truth is problems.go's problemCodes: every code
// the server sends has one (a code without would answer an empty title).
// So: every code the HTTP layer's source passes to newProblem or sets as a
// problem's Code, and every domain code (domain.Code constants), has a
// title; the Problem schema's code enum is exactly the titled codes; and
// each response's own enum names only those.
func TestProblemCodes(t *testing.T) {
	sent := map[string]string{} // code -> where
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "newProblem" && len(n.Args) > 1 {
					if lit, ok := n.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						sent[unquote(t, lit.Value)] = fset.Position(lit.Pos()).String()
					} else if conv, ok := n.Args[1].(*ast.CallExpr); ok && isIdent(conv.Fun, "string") {
						// string(e.Code): a domain code, checked below.
					} else {
						t.Errorf("%s: newProblem's code is not a literal: add it to the check", fset.Position(n.Pos()))
					}
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Code" {
					if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						sent[unquote(t, lit.Value)] = fset.Position(lit.Pos()).String()
					}
				}
			}
			return true
		})
	}
	// The domain's codes, declared as constants of type Code.
	f, err := parser.ParseFile(fset, filepath.Join("..", "domain", "errors.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	domainCodes := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "Code" {
				continue
			}
			for i, v := range vs.Values {
				code := unquote(t, v.(*ast.BasicLit).Value)
				sent[code] = fset.Position(vs.Names[i].Pos()).String()
				domainCodes++
				if _, ok := statuses[domain.Code(code)]; !ok {
					t.Errorf("domain code %s has no HTTP status in problem.go's statuses", code)
				}
			}
		}
	}
	if domainCodes < 10 || len(sent) < 20 {
		t.Fatalf("found %d codes (%d domain): the source scan is broken", len(sent), domainCodes)
	}
	// A client that went away gets no answer at all (handleError writes
	// only the status, for the log): its code is never sent.
	delete(sent, "client_closed_request")
	for code, where := range sent {
		if _, ok := problemCodes[code]; !ok {
			t.Errorf("%s: code %s has no entry in problems.go's problemCodes", where, code)
		}
	}
	for code, doc := range problemCodes {
		if _, ok := sent[code]; !ok {
			t.Errorf("problems.go documents %s, which nothing sends", code)
		}
		if doc.Title == "" || doc.Status == "" || doc.Means == "" || doc.Do == "" {
			t.Errorf("problems.go's %s lacks a title, status, meaning or what to do: its /problems page would be empty", code)
		}
	}

	doc := loadOpenAPI(t)
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	enum := schemas["Problem"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	documented := map[string]bool{}
	for _, c := range enum {
		documented[c.(string)] = true
	}
	for code := range problemCodes {
		if !documented[code] {
			t.Errorf("the server can send %s, which the Problem schema's code enum leaves out", code)
		}
	}
	for code := range documented {
		if _, ok := problemCodes[code]; !ok {
			t.Errorf("the Problem schema's code enum has %s, which the server never sends", code)
		}
	}
	// Every enum or const of a response's code names a titled code.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				if code, ok := props["code"].(map[string]any); ok {
					vals, _ := code["enum"].([]any)
					if c, ok := code["const"]; ok {
						vals = append(vals, c)
					}
					for _, c := range vals {
						if _, ok := problemCodes[c.(string)]; !ok {
							t.Errorf("%s names code %v, which the server never sends", at, c)
						}
					}
				}
			}
			for k, x := range v {
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(doc["paths"], "#/paths")
	walk(doc["components"], "#/components")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
