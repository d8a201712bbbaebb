// Package console is the operator console under /ops/: server-rendered
// pages (html/template, embedded templates and stylesheet, no script) that
// answer what an on-call person asks at 2 a.m. from a phone: how much is
// left, what is held, what is about to expire, what failed, who rolled what
// back and why; and the few actions they need (pause and resume a pool,
// release a hold, roll back after a dry run, end a campaign, acknowledge an
// alert, run a reconciliation), each through the domain services with the
// signed-in key's name as the actor.
//
// Operators sign in with an ops API key, which starts a session stored in
// ops_sessions (so it survives restarts and works on every instance) and
// kept in an HttpOnly, SameSite=Strict cookie. A bearer token or HTTP Basic
// auth (the ops token as password) works too. Every form carries the
// session's CSRF token and every state-changing request must come from this
// site; every page forbids framing and sets a strict Content-Security-Policy.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stockhold/stockhold/app/alerts"
	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/campaigns"
	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
	"github.com/stockhold/stockhold/app/logging"
	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/webhooks"
)

//go:embed templates/*.html static/*
var files embed.FS

// Deps are the services the console reads and acts through.
type Deps struct {
	Pool      *pgxpool.Pool
	Inventory *inventory.Service
	Campaigns *campaigns.Service
	Rollbacks *rollbacks.Service
	Alerts    *alerts.Service
	Reconcile *reconcile.Service
	// Webhooks, when set, lists the webhooks and their lag on the overview.
	Webhooks *webhooks.Service
	Auth     *auth.Authenticator
	// Failures is the failed-auth limit per client IP the API uses too: a
	// key guessed at the sign-in form, or with bearer or Basic auth, counts
	// against the same budget, and a client over it gets 429. nil means no
	// limit.
	Failures *auth.FailureLimiter
	Log      *slog.Logger
}

// Console serves /ops/ (but not /ops/jobs/, River's dashboard).
type Console struct {
	Deps
	mux   *http.ServeMux
	pages map[string]*template.Template
}

// Security headers of every console answer. The pages run no script and
// load nothing from elsewhere; forms post only to this site.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
		"frame-ancestors 'none'; base-uri 'none'",
	"X-Frame-Options":        "DENY",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "same-origin",
	"Cache-Control":          "no-store",
}

// New returns the console.
func New(d Deps) (*Console, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	c := &Console{Deps: d, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "templates/")
		if base == "layout.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(files, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("console template %s: %w", base, err)
		}
		c.pages[strings.TrimSuffix(base, ".html")] = t
	}
	static, err := fs.Sub(files, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /ops/static/", http.StripPrefix("/ops/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /ops/signin", c.signinPage)
	c.mux.HandleFunc("POST /ops/signin", c.signin)
	c.route("POST /ops/signout", c.signout)

	c.route("GET /ops/{$}", c.overview)
	c.route("GET /ops/skus", c.skus)
	c.route("GET /ops/skus/{sku}", c.sku)
	c.route("GET /ops/locations", c.locations)
	c.route("POST /ops/skus/{sku}/pause", c.pause)
	c.route("POST /ops/skus/{sku}/resume", c.resume)
	c.route("POST /ops/skus/{sku}/repair", c.repair)
	c.route("POST /ops/skus/{sku}/adjust", c.adjust)
	c.route("POST /ops/stop-sale", c.stopSale)
	c.route("GET /ops/holds", c.holds)
	c.route("GET /ops/holds/{id}", c.hold)
	c.route("POST /ops/holds/{id}/release", c.release)
	c.route("POST /ops/holds/{id}/reinstate", c.reinstate)
	c.route("GET /ops/campaigns", c.campaignList)
	c.route("GET /ops/campaigns/{id}", c.campaign)
	c.route("POST /ops/campaigns/{id}/end", c.endCampaign)
	c.route("POST /ops/campaigns/{id}/pause", c.switchCampaign(false))
	c.route("POST /ops/campaigns/{id}/resume", c.switchCampaign(true))
	c.route("GET /ops/rollbacks", c.rollbackList)
	c.route("POST /ops/rollbacks", c.dryRun)
	c.route("GET /ops/rollbacks/{id}", c.rollback)
	c.route("POST /ops/rollbacks/{id}/run", c.runRollback)
	c.route("GET /ops/alerts", c.alertList)
	c.route("POST /ops/alerts/{id}/ack", c.ack)
	c.route("POST /ops/alerts/{id}/take", c.takeAlert)
	c.route("GET /ops/reconciliations", c.reconciliationList)
	c.route("POST /ops/reconciliations", c.reconcileNow)
	c.route("GET /ops/reconciliations/{id}", c.reconciliation)
	c.route("GET /ops/archives", c.archives)
	c.route("GET /ops/archives/{partition}", c.archive)
	c.mux.HandleFunc("/ops/", c.notFound)
	return c, nil
}

// ServeHTTP sets the security headers and routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	if r.URL.Path == "/ops" {
		http.Redirect(w, r, "/ops/", http.StatusMovedPermanently)
		return
	}
	if !cleanRequest(r) {
		c.status(w, r, who{}, http.StatusBadRequest,
			"This address holds characters that no SKU, reference or id can have (bytes that are not UTF-8, or control characters).")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// cleanRequest reports whether r's path and query parameters are valid
// UTF-8 without control characters, as the API requires of its path
// parameters: PostgreSQL refuses text that is not UTF-8 (22021), which
// would otherwise surface as a 500.
func cleanRequest(r *http.Request) bool {
	if !cleanText(r.URL.Path) {
		return false
	}
	for k, vs := range r.URL.Query() {
		if !cleanText(k) {
			return false
		}
		for _, v := range vs {
			if !cleanText(v) {
				return false
			}
		}
	}
	return true
}

func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0
}

// handler is a console page or action: it has the signed-in operator.
type handler func(w http.ResponseWriter, r *http.Request, op who) error

// route registers h behind authentication and, for a state-changing
// method, the same-origin and CSRF checks.
func (c *Console) route(pattern string, h handler) {
	c.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		op, ok, err := c.authenticate(w, r)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if !ok {
			return // answered
		}
		logging.Add(r.Context(), slog.String("operator", op.Key.Name))
		// The services record the signed-in key beside the operator.
		r = r.WithContext(domain.WithKeyName(r.Context(), op.Key.Name))
		if !safeMethod(r.Method) {
			if err := r.ParseForm(); err != nil {
				c.status(w, r, op, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !sameOrigin(r) {
				c.status(w, r, op, http.StatusForbidden, "This form was sent from another site, so it was refused.")
				return
			}
			if op.Via != viaBearer && !validCSRF(r.PostForm.Get("csrf"), op.CSRF) {
				c.status(w, r, op, http.StatusForbidden, "This form's security token is missing or stale. Reload the page and try again.")
				return
			}
		}
		if err := h(w, r, op); err != nil {
			c.fail(w, r, err)
		}
	})
}

// authenticate finds the operator of r: a bearer token, HTTP Basic auth
// with the token as password, or the session cookie. A browser's GET
// without any is sent to sign in; a Basic-authenticated browser gets a
// session, so its forms carry a CSRF token like everyone's. ok is false
// when the answer has been written.
func (c *Console) authenticate(w http.ResponseWriter, r *http.Request) (op who, ok bool, err error) {
	token, via := "", ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			token, via = strings.TrimSpace(rest), viaBearer
		} else if _, pw, basic := r.BasicAuth(); basic {
			token, via = pw, viaBasic
		}
	}
	if via == "" {
		op, ok, err = c.session(r)
		if err != nil {
			return who{}, false, err
		}
		if !ok {
			if safeMethod(r.Method) {
				http.Redirect(w, r, "/ops/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			} else {
				c.status(w, r, who{}, http.StatusUnauthorized, "Sign in first.")
			}
			return who{}, false, nil
		}
	} else {
		ip := auth.ClientIP(r)
		if wait := c.Failures.Wait(ip); wait > 0 {
			c.tooMany(w, r, ip, wait)
			return who{}, false, nil
		}
		key, err := c.Auth.Authenticate(r.Context(), token)
		if errors.Is(err, auth.ErrUnknownKey) {
			c.Failures.Fail(ip)
			w.Header().Set("WWW-Authenticate", `Basic realm="stockhold ops"`)
			c.status(w, r, who{}, http.StatusUnauthorized, "That API key is unknown or revoked.")
			return who{}, false, nil
		}
		if err != nil {
			return who{}, false, err
		}
		op = who{Key: key, Via: via}
		if via == viaBasic {
			if s, ok, err := c.session(r); err != nil {
				return who{}, false, err
			} else if ok && s.Key.ID == key.ID {
				op.CSRF = s.CSRF
			} else if key.Role == auth.RoleOps && safeMethod(r.Method) {
				tok, csrf, err := c.newSession(r.Context(), key)
				if err != nil {
					return who{}, false, err
				}
				c.setCookie(w, r, sessionCookie, tok, SessionTTL)
				op.CSRF = csrf
			}
		}
	}
	if op.Key.Role != auth.RoleOps {
		c.status(w, r, who{}, http.StatusForbidden, "The console needs an ops key; this one is a "+string(op.Key.Role)+" key.")
		return who{}, false, nil
	}
	return op, true, nil
}

// view is what every page template gets.
type view struct {
	Title  string
	Nav    string
	Op     who
	Flash  *flash
	Status int
	// Refresh, when set, reloads the page after that many seconds (a dry
	// run being counted, a rollback in progress).
	Refresh int
	Data    any
}

type flash struct {
	Error   bool
	Message string
}

// render writes page with data, taking the flash message the previous
// action left.
func (c *Console) render(w http.ResponseWriter, r *http.Request, op who, page string, v view) error {
	t, ok := c.pages[page]
	if !ok {
		return fmt.Errorf("no console page %q", page)
	}
	v.Op = op
	if ck, err := r.Cookie(flashCookie); err == nil {
		if msg, err := url.QueryUnescape(ck.Value); err == nil && len(msg) > 2 {
			v.Flash = &flash{Error: msg[0] == 'e', Message: msg[2:]}
		}
		c.setCookie(w, r, flashCookie, "", -1)
	}
	status := v.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	if err := t.ExecuteTemplate(w, "layout", v); err != nil {
		c.Log.ErrorContext(r.Context(), "render console page", "page", page, "err", err)
	}
	return nil
}

// done ends an action: it leaves a message for the next page and sends the
// browser there (POST, redirect, GET).
func (c *Console) done(w http.ResponseWriter, r *http.Request, to string, failed bool, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 600 {
		msg = msg[:600]
	}
	prefix := "o:"
	if failed {
		prefix = "e:"
	}
	c.setCookie(w, r, flashCookie, url.QueryEscape(prefix+msg), time.Minute)
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// refused ends an action the domain refused (bad input, wrong state): the
// operator sees why on the page they came from.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, to string, err error) error {
	var de *domain.Error
	if errors.As(err, &de) {
		return c.done(w, r, to, true, "%s", de.Detail)
	}
	return err
}

// status answers a plain page with an HTTP status and a message.
func (c *Console) status(w http.ResponseWriter, r *http.Request, op who, code int, msg string) {
	_ = c.render(w, r, op, "status", view{Title: http.StatusText(code), Status: code, Data: msg})
}

// tooMany answers a client over its failed-auth budget, as the API does:
// 429 with Retry-After, before any key is looked up.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, ip string, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	c.status(w, r, who{}, http.StatusTooManyRequests,
		fmt.Sprintf("Too many failed sign-ins from %s; try again in %s.", ip, wait.Round(time.Second)))
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.status(w, r, who{}, http.StatusNotFound, "There is no such page.")
}

// fail answers an error a handler returned: a domain "not found" is a 404,
// bad input a 400, anything else a 500 that is logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var de *domain.Error
	if errors.As(err, &de) {
		switch de.Code {
		case domain.CodeNotFound, domain.CodeUnknownSKU, domain.CodeUnknownCampaign:
			c.status(w, r, who{}, http.StatusNotFound, de.Detail)
		case domain.CodeArchived:
			c.status(w, r, who{}, http.StatusGone, de.Detail+" (Archives lists what was archived, and where.)")
		default:
			c.status(w, r, who{}, http.StatusBadRequest, de.Detail)
		}
		return
	}
	if dberr.Unstorable(err) {
		c.status(w, r, who{}, http.StatusBadRequest, "A value holds a character that cannot be stored (a NUL); nothing changed.")
		return
	}
	c.Log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	c.status(w, r, who{}, http.StatusInternalServerError, "Something went wrong on our side; it has been logged.")
}
