// Package apitest proves stockhold's OpenAPI document against the server:
// an http.RoundTripper for the tests' HTTP clients that validates every
// request and every answer against /openapi.json with kin-openapi's
// openapi3filter, and reports each mismatch as a test error. It is for
// tests only; the binary never imports it.
//
// The rules:
//   - an answer must have a status the operation documents, and a body and
//     headers its schema accepts;
//   - a request the document forbids (a bad body, a missing header, a
//     parameter out of range, no credentials on a secured route) may be
//     sent, since tests send bad input on purpose, but must be refused
//     with a 4xx: the server may not accept what its document forbids;
//   - a route the document does not have (the tests' unknown routes, wrong
//     methods) must be answered with a problem+json 404 or 405.
//
// Paths under /ops/ other than /ops/jobs/ are the operator console's HTML
// pages and River's dashboard, which the document leaves out; they are not
// checked.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/stockhold/stockhold/app/api"
)

func init() {
	// The reference and the problem pages are HTML: checked as text, as
	// text/plain is, against their string schemas.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
}

// Validator checks exchanges against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	// problem is the Problem schema, for answers to undocumented routes.
	problem *openapi3.Schema
}

var (
	once   sync.Once
	shared *Validator
	err    error
)

// Load returns the validator of the embedded document, loaded and checked
// once per test binary.
func Load() (*Validator, error) {
	once.Do(func() { shared, err = load(api.OpenAPI()) })
	return shared, err
}

func load(raw []byte) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	// The examples are not checked here: TestOpenAPIExamples holds each
	// to what the server answers (which this validator checks), and a
	// schema changed ahead of its example must fail that test, with how to
	// rewrite it, rather than every test that speaks HTTP.
	if err := doc.Validate(loader.Context, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
	}
	// The tests' servers listen on random ports: match routes on any host.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.json: %w", err)
	}
	ref := doc.Components.Schemas["Problem"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("openapi.json has no Problem schema")
	}
	return &Validator{doc: doc, router: router, problem: ref.Value}, nil
}

// Transport returns a RoundTripper that sends requests with base (nil:
// http.DefaultTransport) and reports, with t.Errorf, every exchange that
// does not match the document. It is safe for concurrent use; t must
// outlive the requests.
func Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	t.Helper()
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, v: v, base: base}
}

type transport struct {
	t    testing.TB
	v    *Validator
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	res, err := tr.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return res, nil // the caller sees the read error when it reads
	}
	if err := tr.v.Check(req, reqBody, res.StatusCode, res.Header, body); err != nil {
		tr.t.Errorf("OpenAPI: %s %s -> %d: %v\n  request body: %s\n  answer: %s", req.Method, req.URL.RequestURI(),
			res.StatusCode, err, clip(reqBody), clip(body))
	}
	return res, nil
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// Checked reports whether path is one the document covers (everything but
// the console and River's dashboard under /ops/).
func Checked(path string) bool {
	return !strings.HasPrefix(path, "/ops")
}

// Check validates one exchange: the request (its body given separately,
// since the request's has been sent) and the answer's status, headers and
// body. It returns what does not match the document, or nil.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	if !Checked(req.URL.Path) || req.Method == http.MethodHead {
		return nil
	}
	ctx := context.Background()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		// Not a documented operation: the answer must say so, as a problem.
		var re *routers.RouteError
		if !errors.As(err, &re) {
			return fmt.Errorf("find route: %w", err)
		}
		if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%v, yet answered %d", err, status)
		}
		return v.checkProblem(header, body)
	}
	opts := &openapi3filter.Options{
		SkipSettingDefaults:   true,
		IncludeResponseStatus: true,
		AuthenticationFunc:    authenticated,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	res := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: opts}
	res.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, res); err != nil {
		return fmt.Errorf("the answer does not match the document: %w", err)
	}
	if reqErr != nil && status < 400 {
		return fmt.Errorf("the server accepted a request its document forbids: %w", reqErr)
	}
	return nil
}

// CheckRaw is Check for a request sent as raw bytes (tests that send what a
// client library would refuse to). A request net/http cannot parse either
// is answered by the server before any route: the answer must then be a
// problem+json 400.
func (v *Validator) CheckRaw(request []byte, status int, header http.Header, body []byte) error {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(request)))
	if err != nil {
		if status != http.StatusBadRequest {
			return fmt.Errorf("an unparsable request (%v) answered %d, want 400", err, status)
		}
		return v.checkProblem(header, body)
	}
	reqBody, err := io.ReadAll(req.Body)
	if err != nil {
		return fmt.Errorf("read the request's body: %w", err)
	}
	return v.Check(req, reqBody, status, header, body)
}

// checkProblem checks an answer is a problem+json the Problem schema takes.
func (v *Validator) checkProblem(header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("answer is %q, want application/problem+json", ct)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	if err := v.problem.VisitJSON(doc, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("answer is not a Problem: %w", err)
	}
	return nil
}

// authenticated passes a security requirement when the request carries the
// credential its scheme names (whether the server takes it is the server's
// business): a bearer token, Basic auth, or the console's session cookie.
func authenticated(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r := in.RequestValidationInput.Request
	s := in.SecurityScheme
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
			return nil
		}
	case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
		if _, _, ok := r.BasicAuth(); ok {
			return nil
		}
	case s.Type == "apiKey" && s.In == "cookie":
		if c, err := r.Cookie(s.Name); err == nil && c.Value != "" {
			return nil
		}
	case s.Type == "apiKey" && s.In == "header":
		if r.Header.Get(s.Name) != "" {
			return nil
		}
	}
	return in.NewError(nil)
}
