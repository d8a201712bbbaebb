package console

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/db"
)

type signinData struct {
	Next  string
	CSRF  string
	Error string
}

// signinPage shows the sign-in form with a fresh double-submit token.
func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	c.showSignin(w, r, http.StatusOK, "")
}

func (c *Console) showSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := randomToken()
	c.setCookie(w, r, signinCookie, csrf, SessionTTL)
	_ = c.render(w, r, who{}, "signin", view{
		Title: "Sign in", Status: status,
		Data: signinData{Next: localNext(r.FormValue("next")), CSRF: csrf, Error: msg},
	})
}

// signin checks an ops key and starts a session.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.showSignin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ck, err := r.Cookie(signinCookie)
	if !sameOrigin(r) || err != nil || !validCSRF(r.PostForm.Get("csrf"), ck.Value) {
		c.showSignin(w, r, http.StatusForbidden, "This form's security token is missing or stale; try again.")
		return
	}
	ip := auth.ClientIP(r)
	if wait := c.Failures.Wait(ip); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		c.showSignin(w, r, http.StatusTooManyRequests,
			fmt.Sprintf("Too many failed sign-ins from %s; try again in %s.", ip, wait.Round(time.Second)))
		return
	}
	key, err := c.Auth.Authenticate(r.Context(), strings.TrimSpace(r.PostForm.Get("key")))
	if errors.Is(err, auth.ErrUnknownKey) {
		c.Failures.Fail(ip)
		c.showSignin(w, r, http.StatusUnauthorized, "That key is unknown or revoked.")
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if key.Role != auth.RoleOps {
		c.showSignin(w, r, http.StatusForbidden, "The console needs an ops key; that one is a "+string(key.Role)+" key.")
		return
	}
	token, _, err := c.newSession(r.Context(), key)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.setCookie(w, r, signinCookie, "", -1)
	c.setCookie(w, r, sessionCookie, token, SessionTTL)
	c.Log.InfoContext(r.Context(), "console sign-in", "operator", key.Name)
	http.Redirect(w, r, localNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// signout ends the session.
func (c *Console) signout(w http.ResponseWriter, r *http.Request, op who) error {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if err := db.New(c.Pool).OpsSessionDelete(r.Context(), tokenHash(ck.Value)); err != nil {
			return err
		}
	}
	c.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/ops/signin", http.StatusSeeOther)
	return nil
}

// localNext keeps a post-sign-in destination on the console: anything else
// (another site, a scheme, //host) goes to the overview.
func localNext(next string) string {
	if strings.HasPrefix(next, "/ops/") && !strings.HasPrefix(next, "/ops/signin") &&
		!strings.ContainsAny(next, "\\\r\n") && !strings.HasPrefix(next, "//") {
		return next
	}
	return "/ops/"
}
