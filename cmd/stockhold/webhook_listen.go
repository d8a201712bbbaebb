package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxSkew is how far a signature's t may be from now: older deliveries
// are refused as replays.
const maxSkew = 5 * time.Minute

// webhookListen is a webhook receiver for trying stockhold: it verifies
// each delivery's Stockhold-Signature the way any receiver should, answers
// 204 (acknowledged) or 401, and prints one line per event of a verified
// delivery. It is also the reference for writing a receiver: see verify.
func webhookListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhook-listen", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18192", "listen on this `host:port`")
	secret := fs.String("secret", "", "the webhook's `secret` (whsec_..., shown once when it was registered; required)")
	count := fs.Int("count", 0, "exit 0 after this many `events` (default: run until interrupted)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *secret == "" {
		return fmt.Errorf("%w: --secret is required: the webhook's secret, shown when it was registered", errUsage)
	}
	if *count < 0 {
		return fmt.Errorf("%w: --count must not be negative", errUsage)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", *addr, err)
	}
	fmt.Fprintf(stderr, "listening on http://%s/ for stockhold's webhooks\n", ln.Addr())

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu   sync.Mutex
		seen int
	)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 8<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		t, err := verify(*secret, r.Header.Get("Stockhold-Signature"), body, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "refused a POST from %s: %v\n", r.RemoteAddr, err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var batch struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(body, &batch); err != nil {
			http.Error(w, "not a batch of events", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range batch.Events {
			if *count > 0 && seen == *count {
				break
			}
			fmt.Fprintf(stdout, "verified t=%d %s\n", t, e)
			seen++
		}
		w.WriteHeader(http.StatusNoContent)
		if *count > 0 && seen >= *count {
			stop()
		}
	})}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// verify checks a Stockhold-Signature header ("t=<unix seconds>,v1=<hex>")
// against the body: v1 must be the hex HMAC-SHA256, keyed with the
// webhook's secret, of t, a dot and the raw body, compared in constant
// time; and t must be within maxSkew of now. It returns t.
func verify(secret, header string, body []byte, now time.Time) (int64, error) {
	var ts, v1 string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	if ts == "" || v1 == "" {
		return 0, errors.New("no Stockhold-Signature header with t and v1")
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("signature t %q is not unix seconds", ts)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	if !hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(v1)) {
		return 0, errors.New("signature does not match (wrong secret, or the body was changed)")
	}
	if skew := now.Sub(time.Unix(t, 0)); skew > maxSkew || skew < -maxSkew {
		return 0, fmt.Errorf("signature is %s from now: too old or too new (a replay?)", skew.Round(time.Second))
	}
	return t, nil
}
