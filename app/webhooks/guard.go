package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"github.com/stockhold/stockhold/app/domain"
)

// notPublic are address ranges a webhook may not reach unless AllowPrivate,
// besides what netip already classifies (loopback, private, link-local,
// multicast, unspecified): "this network", carrier-grade NAT, IETF
// protocol assignments, benchmarking, reserved, broadcast, and NAT64 (which
// can embed any IPv4 address).
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// private reports whether a webhook must not reach ip.
func private(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// guard refuses, at connect time, a connection to an address a webhook may
// not reach: it sees the address the name resolved to for this very
// connection, so a name that resolved to a public address when it was
// registered and to a private one now (DNS rebinding) is refused too.
func guard(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("webhook connection to %q: %w", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("webhook connection to %q: not an IP address", address)
	}
	if private(ip) {
		return fmt.Errorf("webhook connection to %s refused: a loopback or private address (STOCKHOLD_WEBHOOK_ALLOW_PRIVATE is off)", ip)
	}
	return nil
}

// Timeout bounds one delivery: connecting, sending, and the receiver's
// answer.
const Timeout = 10 * time.Second

// newClient returns the HTTP client deliveries use: a 10 s timeout, no
// redirects followed (a 3xx is a failed delivery), no proxy from the
// environment (it would connect for us, past the guard), and, unless
// allowPrivate, the guard on every connection.
func newClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if !allowPrivate {
		dialer.Control = guard
	}
	return &http.Client{
		Timeout: Timeout,
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: Timeout,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       time.Minute,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkURL checks a webhook's URL when it is registered: absolute http or
// https, with a host, without credentials or a fragment, at most
// MaxURLLength bytes; and unless AllowPrivate, a host that is (or resolves
// only to) public addresses.
func (s *Service) checkURL(ctx context.Context, raw string) error {
	if raw == "" || len(raw) > MaxURLLength {
		return domain.Invalid("url must be 1 to %d bytes", MaxURLLength)
	}
	if err := domain.ValidText("url", raw, MaxURLLength); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return domain.Invalid("url is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return domain.Invalid("url must be an absolute http:// or https:// URL")
	case u.User != nil:
		return domain.Invalid("url must not carry credentials")
	case u.Fragment != "" || u.RawFragment != "":
		return domain.Invalid("url must not have a fragment")
	}
	if s.cfg.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if private(ip) {
			return domain.Invalid("url's address %s is loopback or private: refused (STOCKHOLD_WEBHOOK_ALLOW_PRIVATE is off)", ip)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := s.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return domain.Invalid("url's host %q does not resolve: %v", host, err)
	}
	for _, ip := range addrs {
		if private(ip) {
			return domain.Invalid("url's host %q resolves to %s, a loopback or private address: refused (STOCKHOLD_WEBHOOK_ALLOW_PRIVATE is off)", host, ip)
		}
	}
	return nil
}
