package api

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// consoleLink is the way back from River's dashboard to the console: a
// link fixed in a corner of every dashboard page, above River UI's own
// layout (which has no slot for one). It is plain HTML with an inline
// style, which the pages' Content-Security-Policy allows (pageCSP).
const consoleLink = `<a href="/ops/" id="stockhold-console" title="Back to stockhold's operator console" ` +
	`style="position:fixed;right:12px;bottom:12px;z-index:2147483647;padding:10px 14px;border-radius:8px;` +
	`background:#0f172a;color:#fff;font:600 15px/1.2 system-ui,sans-serif;text-decoration:none;` +
	`box-shadow:0 2px 6px rgba(0,0,0,.35)">&larr; Console</a>`

// withConsoleLink serves h (River's dashboard) with consoleLink written
// right after the opening body tag of each HTML page it answers; anything
// else (its scripts, stylesheets, JSON API, a 304) passes through as is.
func withConsoleLink(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lw := &linkWriter{ResponseWriter: w}
		h.ServeHTTP(lw, r)
		lw.finish()
	})
}

// linkWriter holds back an HTML page's body until it is complete, to put
// the link in it; every other answer goes straight through.
type linkWriter struct {
	http.ResponseWriter
	wrote bool // WriteHeader was called
	html  bool // the answer is an HTML page, held back in body
	code  int
	body  bytes.Buffer
}

func (w *linkWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote, w.code = true, code
	ct := w.Header().Get("Content-Type")
	w.html = code == http.StatusOK && strings.HasPrefix(ct, "text/html")
	if w.html {
		// The length changes; the page is written whole in finish.
		w.Header().Del("Content-Length")
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *linkWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.html {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// finish writes a held-back page with the link after its <body ...> tag
// (at its start, when it has none).
func (w *linkWriter) finish() {
	if !w.html {
		return
	}
	page := w.body.Bytes()
	at := 0
	if i := bytes.Index(bytes.ToLower(page), []byte("<body")); i >= 0 {
		if j := bytes.IndexByte(page[i:], '>'); j >= 0 {
			at = i + j + 1
		}
	}
	out := make([]byte, 0, len(page)+len(consoleLink))
	out = append(append(append(out, page[:at]...), consoleLink...), page[at:]...)
	if len(page) > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	}
	w.ResponseWriter.WriteHeader(w.code)
	if len(page) > 0 {
		_, _ = w.ResponseWriter.Write(out)
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *linkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
