package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/db"
)

// Cookies the console sets, all HttpOnly and SameSite=Strict on /ops/.
const (
	sessionCookie = "stockhold_session"
	// signinCookie carries the sign-in form's CSRF token (double submit):
	// before signing in there is no session to hold one.
	signinCookie = "stockhold_signin"
	flashCookie  = "stockhold_flash"
)

// SessionTTL is how long a console session lasts after signing in.
const SessionTTL = 12 * time.Hour

// How a request was authenticated.
const (
	viaSession = "session"
	viaBasic   = "basic"
	viaBearer  = "bearer"
)

// who is the signed-in operator of a request.
type who struct {
	Key auth.Key
	// Via is how the request proved it: viaSession, viaBasic or viaBearer.
	Via string
	// CSRF is the session's form token; empty without a session.
	CSRF string
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// newSession stores a session for key and returns its cookie token and
// CSRF token. Expired sessions are swept on the way.
func (c *Console) newSession(ctx context.Context, key auth.Key) (token, csrf string, err error) {
	token, csrf = randomToken(), randomToken()
	q := db.New(c.Pool)
	if err := q.OpsSessionsDeleteExpired(ctx); err != nil {
		return "", "", fmt.Errorf("sweep expired sessions: %w", err)
	}
	err = q.OpsSessionCreate(ctx, db.OpsSessionCreateParams{
		TokenSha256: tokenHash(token), ApiKeyID: key.ID, CsrfToken: csrf, TtlSeconds: int64(SessionTTL / time.Second),
	})
	if err != nil {
		return "", "", fmt.Errorf("store session: %w", err)
	}
	return token, csrf, nil
}

// session returns the live session of r's cookie; ok is false when there is
// none (no cookie, expired, signed out, key revoked).
func (c *Console) session(r *http.Request) (w who, ok bool, err error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return who{}, false, nil
	}
	row, err := db.New(c.Pool).OpsSessionGet(r.Context(), tokenHash(ck.Value))
	if errors.Is(err, pgx.ErrNoRows) {
		return who{}, false, nil
	}
	if err != nil {
		return who{}, false, fmt.Errorf("look up session: %w", err)
	}
	key := auth.Key{ID: row.ApiKeyID, Name: row.Name, Role: auth.Role(row.Role)}
	return who{Key: key, Via: viaSession, CSRF: row.CsrfToken}, true, nil
}

// SessionKey returns the ops key signed in with r's session cookie, so
// River's dashboard under /ops/jobs/ takes the console's session: ok is
// false without a live session. A state-changing request must also come
// from this site (its Origin, when sent, names this host).
func (c *Console) SessionKey(r *http.Request) (auth.Key, bool, error) {
	w, ok, err := c.session(r)
	if err != nil || !ok {
		return auth.Key{}, false, err
	}
	if !safeMethod(r.Method) && !sameOrigin(r) {
		return auth.Key{}, false, nil
	}
	return w.Key, w.Key.Role == auth.RoleOps, nil
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	ck := &http.Cookie{
		Name: name, Value: value, Path: "/ops/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: isHTTPS(r), MaxAge: int(maxAge / time.Second),
	}
	if maxAge < 0 {
		ck.MaxAge = -1
	}
	http.SetCookie(w, ck)
}

func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a state-changing request came from a page of
// this site: its Origin header (or, without one, its Referer) names this
// scheme and host. Browsers send Origin with every cross-site POST, so a
// foreign or "null" origin is refused; a request with neither header
// (curl, a script) is not a browser's cross-site request and passes, and
// must still carry the CSRF token unless it uses a bearer token.
func sameOrigin(r *http.Request) bool {
	self := "http://" + r.Host
	if isHTTPS(r) {
		self = "https://" + r.Host
	}
	if o := r.Header.Get("Origin"); o != "" {
		return o == self
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Scheme+"://"+u.Host == self
	}
	return true
}

// validCSRF compares a form's token with the expected one in constant time.
func validCSRF(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
