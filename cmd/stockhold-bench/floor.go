package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// The floor of the soldout scenario: the least any server on this stack
// does for a refused hold. It is this binary run again with floorEnv set
// to the address to serve and floorBodyEnv to the answer: Go's net/http,
// reading each request (headers and body) and writing that answer with a
// 409, nothing else. It runs as a process of its own with the same CPUs
// as the server, so that its refusals per second beside the server's, in
// the same run, show what the machine leaves for everything the server
// does beyond HTTP (routing, authentication, the body's JSON, the
// in-memory refusal, metrics). With -profile, it also serves
// net/http/pprof on floorPprofEnv's address, a side port as the server's.
const (
	floorEnv      = "STOCKHOLD_BENCH_FLOOR_ADDR"
	floorBodyEnv  = "STOCKHOLD_BENCH_FLOOR_BODY"
	floorPprofEnv = "STOCKHOLD_BENCH_FLOOR_PPROF"
)

// serveFloor is the floor server's main.
func serveFloor(addr, body string) error {
	if side := os.Getenv(floorPprofEnv); side != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() { _ = http.ListenAndServe(side, mux) }()
	}
	return http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, body)
	}))
}

// floor is a running floor server.
type floor struct {
	addr   string
	pprof  string // its profiler's address, with -profile
	cmd    *exec.Cmd
	exited chan error
}

// startFloor runs the floor server, answering body (and serving its
// profiler when profiled), and waits until it takes connections.
func startFloor(ctx context.Context, body []byte, profiled bool) (*floor, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f := &floor{exited: make(chan error, 1)}
	if f.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	env := append(os.Environ(), floorEnv+"="+f.addr, floorBodyEnv+"="+string(body))
	if profiled {
		if f.pprof, err = freeAddr(); err != nil {
			return nil, err
		}
		env = append(env, floorPprofEnv+"="+f.pprof)
	}
	f.cmd = exec.Command(self)
	f.cmd.Env = env
	f.cmd.Stderr = os.Stderr
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the floor server: %w", err)
	}
	go func() { f.exited <- f.cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", f.addr); err == nil {
			c.Close()
			return f, nil
		}
		select {
		case err := <-f.exited:
			return nil, fmt.Errorf("the floor server exited: %v", err)
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, errors.New("the floor server did not listen in 10 s")
		}
	}
}

// freeAddr is a loopback address with a port free to listen on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// cpu is the CPU time the floor server has used so far.
func (f *floor) cpu() time.Duration { return readCPU(f.cmd.Process.Pid) }

func (f *floor) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGKILL)
	<-f.exited
}

// floor runs the floor server answering refusal, and sends it the
// soldout scenario's requests (body, keyed as for sku) as the refusals
// were sent: its figures, with ServerCPU its own CPU a request.
func (b *bench) floor(ctx context.Context, sku string, body, refusal []byte, check func(answer) (bool, error)) (*result, error) {
	f, err := startFloor(ctx, refusal, b.pprof != "")
	if err != nil {
		return nil, err
	}
	defer f.stop()
	if f.pprof != "" {
		// The phase's CPU profile is the floor's.
		server := b.pprof
		b.pprof = f.pprof
		defer func() { b.pprof = server }()
	}
	r, t := &result{Scenario: "soldout (floor)", Clients: b.o.clients}, &tally{}
	cpu := f.cpu()
	el, err := b.rawLoop(ctx, r.Scenario, f.addr, b.o.clients, soldoutHammer, t, "POST", "/v1/reservations", b.shop, sku+"-floor", body, check)
	if err != nil {
		return nil, err
	}
	t.fill(r, el)
	// The floor's CPU, not the server's that rawLoop measured.
	r.ServerCPU = float64((f.cpu() - cpu).Microseconds()) / float64(max(r.Holds, 1))
	return r, nil
}
