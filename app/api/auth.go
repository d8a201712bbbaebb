package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/auth"
	"github.com/stockhold/stockhold/app/domain"
	"github.com/stockhold/stockhold/app/inventory"
)

const keyContext = "stockhold.key"

// authenticate lets a request through if its bearer token belongs to a key
// with one of roles: no or unknown token is 401, another role 403.
func (s *server) authenticate(roles ...auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token, ok := bearer(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				return newProblem(http.StatusUnauthorized, "unauthorized", "send an API key as `Authorization: Bearer <token>`")
			}
			return s.admit(c, next, token, roles)
		}
	}
}

// authenticateOps guards browser pages: an ops bearer token, HTTP Basic
// auth with the ops token as the password (any user name), or a console
// session (Deps.OpsSession).
func (s *server) authenticateOps() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token, ok := bearer(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				_, password, basic := c.Request().BasicAuth()
				if !basic && s.OpsSession != nil {
					// The console's session cookie (HttpOnly, SameSite=Strict).
					key, ok, err := s.OpsSession(c.Request())
					if err != nil {
						return err
					}
					if ok {
						c.Set(keyContext, key)
						return next(c)
					}
				}
				if !basic {
					c.Response().Header().Set("WWW-Authenticate", `Basic realm="stockhold ops"`)
					return newProblem(http.StatusUnauthorized, "unauthorized", "sign in with the ops API key as the password")
				}
				token = password
			}
			return s.admit(c, next, token, []auth.Role{auth.RoleOps})
		}
	}
}

func (s *server) admit(c echo.Context, next echo.HandlerFunc, token string, roles []auth.Role) error {
	ip := c.RealIP()
	if wait := s.Failures.Wait(ip); wait > 0 {
		p := newProblem(http.StatusTooManyRequests, "too_many_requests",
			fmt.Sprintf("too many failed authentications from %s; try again in %s", ip, wait.Round(time.Second)))
		p.RetryAfter = int(math.Ceil(wait.Seconds()))
		return p
	}
	key, err := s.Auth.Authenticate(c.Request().Context(), token)
	if errors.Is(err, auth.ErrUnknownKey) {
		s.Failures.Fail(ip)
		return newProblem(http.StatusUnauthorized, "unauthorized", "the API key is unknown or revoked")
	}
	if err != nil {
		return err
	}
	if !slices.Contains(roles, key.Role) {
		return newProblem(http.StatusForbidden, "forbidden", "this route needs an "+string(roles[len(roles)-1])+" key")
	}
	c.Set(keyContext, key)
	// The services record the key beside any operator the body claims.
	c.SetRequest(c.Request().WithContext(domain.WithKeyName(c.Request().Context(), key.Name)))
	return next(c)
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// caller is the authenticated key of the request.
func caller(c echo.Context) auth.Key {
	k, _ := c.Get(keyContext).(auth.Key)
	return k
}

// asCaller is the key as the inventory sees it: ops act on any client's
// holds, shops only on their own, and a bound key's new holds (reinstated
// ones included) only at its locations.
func asCaller(c echo.Context) inventory.Caller {
	k := caller(c)
	return inventory.Caller{Name: k.Name, Ops: k.Role == auth.RoleOps, Locations: k.Locations}
}
