package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// instance is one `stockhold serve` process and its address.
type instance struct {
	name   string
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	log    string
	exited chan error
}

// startInstance starts a stockhold instance on url with env, and waits
// until its /readyz answers 200.
func startInstance(ctx context.Context, o Options, name, url string, env []string) (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := o.Command()
	cmd.Env = append(append(cmd.Env, env...), "DATABASE_URL="+url, "STOCKHOLD_ADDR="+addr)
	logPath := filepath.Join(o.LogDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	in := &instance{name: name, cmd: cmd, base: "http://" + addr, log: logPath, exited: make(chan error, 1)}
	go func() { in.exited <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, _, err := in.get(ctx, "/readyz", "")
		if err == nil && status == http.StatusOK {
			return in, nil
		}
		select {
		case err := <-in.exited:
			return nil, fmt.Errorf("%s exited: %v (log: %s)", name, err, logPath)
		case <-ctx.Done():
			in.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			in.stop()
			return nil, fmt.Errorf("%s was not ready within 60 s (log: %s)", name, logPath)
		}
	}
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 30 s).
func (in *instance) stop() {
	if in.cmd.Process == nil {
		return
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.exited
	}
}

// httpClient is shared by every drill client: keep-alive connections to
// the two instances, and a timeout well past the server's own request
// timeout.
var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
}

// answer is an HTTP answer.
type answer struct {
	status     int
	body       []byte
	retryAfter string
}

func (in *instance) do(ctx context.Context, method, path, token, key string, body any) (answer, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, in.base+path, r)
	if err != nil {
		return answer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, body: b, retryAfter: resp.Header.Get("Retry-After")}, nil
}

func (in *instance) get(ctx context.Context, path, token string) (int, []byte, error) {
	a, err := in.do(ctx, http.MethodGet, path, token, "", nil)
	return a.status, a.body, err
}

// must sends a request that has to succeed with want, retrying 503s and
// connection errors for up to a minute, and decodes the answer into out.
func (in *instance) must(ctx context.Context, method, path, token, key string, body any, want int, out any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := in.do(ctx, method, path, token, key, body)
		if err == nil && a.status == want {
			if out != nil {
				return json.Unmarshal(a.body, out)
			}
			return nil
		}
		if err == nil && a.status != http.StatusServiceUnavailable {
			return fmt.Errorf("%s %s: %d %s", method, path, a.status, a.body)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New(strconv.Itoa(a.status) + " " + string(a.body))
			}
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
