package api

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"
)

// pageCSP is the Content-Security-Policy of every answer. It fits River
// UI's pages, checked in a real browser: scripts, styles, fonts and API
// calls from this origin only; inline styles, which its toast library
// injects; data: images, which its stylesheet uses for form controls; and
// never inside a frame.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// browserHeaders sets the headers that keep pages from being framed,
// sniffed or scripted from elsewhere on every answer (JSON answers ignore
// them; HTML pages under /ops/ need them).
func browserHeaders() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Response().Header()
			for _, ph := range pageHeaders {
				h[ph.name] = ph.value
			}
			return next(c)
		}
	}
}

// pageHeaders are browserHeaders' headers, their names in canonical form
// and their values shared by every answer (Header.Set would allocate each
// anew on every request): a one-element slice at full capacity, which
// Header.Set replaces and Header.Add copies before appending, so no answer
// can change another's.
var pageHeaders = []struct {
	name  string
	value []string
}{
	{"X-Frame-Options", sharedValue("DENY")},
	{"Content-Security-Policy", sharedValue(pageCSP)},
	{"X-Content-Type-Options", sharedValue("nosniff")},
	{"Referrer-Policy", sharedValue("same-origin")},
}

// sharedValue is a header value to assign to many answers' headers (see
// pageHeaders).
func sharedValue(v string) []string { return []string{v}[:1:1] }

// sameOrigin refuses, with 403, a state-changing request (any method but
// GET, HEAD and OPTIONS) that a page on another site could have made a
// browser send with the credentials it holds for this one (Basic auth, a
// session cookie): one whose Origin is not this site, or whose
// Sec-Fetch-Site says it came from another site. Browsers send at least one
// of the two on every such request, so a request with neither is not from a
// browser and must carry a bearer token, which no browser adds on its own.
// Put it in front of anything a browser signs in to.
func sameOrigin() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if reason := crossSite(c.Request()); reason != "" {
				return newProblem(http.StatusForbidden, "forbidden", "cross-site request refused: "+reason)
			}
			return next(c)
		}
	}
}

// crossSite says why r may come from another site, or "" if it cannot.
func crossSite(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ""
	}
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
	default:
		return "Sec-Fetch-Site is " + site
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host != r.Host {
			return "Origin " + origin + " is not this site"
		}
		return ""
	}
	if site == "" {
		if _, ok := bearer(r.Header.Get(echo.HeaderAuthorization)); !ok {
			return "a request without Origin or Sec-Fetch-Site must authenticate with a bearer token"
		}
	}
	return ""
}
