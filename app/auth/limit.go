package auth

import (
	"context"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxTracked bounds how many client IPs the failed-auth limiter remembers.
const maxTracked = 10_000

// FailureLimiter limits failed authentications per client IP with a token
// bucket: perMinute failures at once, refilled at perMinute a minute. A
// client over its budget gets 429 before its key is even looked up, so
// guessing keys costs the database nothing. Successes cost no token. One
// limiter serves every door a key is tried at (the API's bearer token,
// the console's sign-in form, bearer and Basic auth), so a guesser cannot
// spread its guesses over them. A nil *FailureLimiter limits nothing.
type FailureLimiter struct {
	limit rate.Limit
	burst int

	mu   sync.Mutex
	byIP map[string]*rate.Limiter
}

// NewFailureLimiter returns a limiter, or nil (no limit) for perMinute 0.
func NewFailureLimiter(perMinute int) *FailureLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &FailureLimiter{limit: rate.Limit(float64(perMinute) / 60), burst: perMinute, byIP: map[string]*rate.Limiter{}}
}

// Wait returns how long ip must wait before its next attempt; 0 means go.
func (l *FailureLimiter) Wait(ip string) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	lim := l.byIP[ip]
	l.mu.Unlock()
	if lim == nil {
		return 0
	}
	tokens := lim.Tokens()
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) / float64(l.limit) * float64(time.Second)))
}

// Fail spends one of ip's tokens.
func (l *FailureLimiter) Fail(ip string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.byIP[ip]
	if lim == nil {
		if len(l.byIP) >= maxTracked {
			// Forget the clients whose budget has refilled; if every one is
			// still limited, the newcomer goes untracked rather than
			// evicting one that is.
			for k, v := range l.byIP {
				if v.Tokens() >= float64(l.burst) {
					delete(l.byIP, k)
				}
			}
			if len(l.byIP) >= maxTracked {
				return
			}
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.byIP[ip] = lim
	}
	lim.Allow()
}

type clientIPKey struct{}

// WithClientIP returns ctx carrying the client's IP as the HTTP layer
// found it (X-Forwarded-For from a trusted proxy, else the peer), for
// handlers outside it (the console) that count failures by client.
func WithClientIP(ctx context.Context, ip string) context.Context {
	return context.WithValue(ctx, clientIPKey{}, ip)
}

// ClientIP returns the client IP r's context carries, or else the host of
// its peer address.
func ClientIP(r *http.Request) string {
	if ip, ok := r.Context().Value(clientIPKey{}).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
