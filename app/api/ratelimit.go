package api

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxTracked bounds how many client IPs the failed-auth limiter remembers.
const maxTracked = 10_000

// failureLimiter limits failed authentications per client IP with a token
// bucket: perMinute failures at once, refilled at perMinute a minute. A
// client over its budget gets 429 before its key is even looked up, so
// guessing keys costs the database nothing. Successes cost no token.
type failureLimiter struct {
	limit rate.Limit
	burst int

	mu   sync.Mutex
	byIP map[string]*rate.Limiter
}

// newFailureLimiter returns a limiter, or nil (no limit) for perMinute 0.
func newFailureLimiter(perMinute int) *failureLimiter {
	if perMinute <= 0 {
		return nil
	}
	return &failureLimiter{limit: rate.Limit(float64(perMinute) / 60), burst: perMinute, byIP: map[string]*rate.Limiter{}}
}

// wait returns how long ip must wait before its next attempt; 0 means go.
func (l *failureLimiter) wait(ip string) time.Duration {
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

// fail spends one of ip's tokens.
func (l *failureLimiter) fail(ip string) {
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
