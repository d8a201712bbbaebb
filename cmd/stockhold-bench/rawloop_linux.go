package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// rawLoop is closedLoop for a request to server (host:port) that differs
// only by its Idempotency-Key (keyPrefix-worker-i), sent by clients
// connections of their own, each with one request in flight at a time,
// like closedLoop's goroutines. What differs is who waits: closedLoop
// parks a goroutine per client in Go's network poller (a read that fails
// with EAGAIN, then the scheduler and its spinning threads on every
// answer); here one thread waits on all of them in epoll, reads an answer
// once it has arrived and sends the next request at once, as wrk does.
// The server sees the same requests either way; the load generator, which
// shares the machine with it, spends less. check says whether an answer
// counts as made (false with an error for one that is wrong).
func (b *bench) rawLoop(ctx context.Context, name, server string, clients int, d time.Duration, t *tally,
	method, path, token, keyPrefix string, body []byte, check func(a answer) (bool, error)) (time.Duration, error) {
	addr, err := net.ResolveTCPAddr("tcp4", server)
	if err != nil {
		return 0, err
	}
	// The request, split where the key goes.
	req := appendRequest(nil, server, method, path, token, "\x00", body)
	at := bytes.IndexByte(req, 0)
	head, tail := req[:at], req[at+1:]

	// One loop: it spends about 15 µs of CPU a request, which is one
	// thread's worth at 65,000 a second.
	loops := 1
	conns := make([][]*rawConn, loops)
	defer func() {
		for _, cs := range conns {
			for _, c := range cs {
				syscall.Close(c.fd)
			}
		}
	}()
	for w := range clients {
		c, err := dialRaw(addr)
		if err != nil {
			return 0, err
		}
		c.prefix = fmt.Appendf(bytes.Clone(head), "%s-%d-", keyPrefix, w)
		conns[w%loops] = append(conns[w%loops], c)
	}

	ctx, end := b.timed(ctx, name, d, t)
	defer end()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	errs := make([]error, loops)
	for l, cs := range conns {
		wg.Go(func() { errs[l] = runRaw(ctx, deadline, cs, tail, t, check) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// rawConn is one client's connection: a non-blocking socket.
type rawConn struct {
	fd     int
	i      int
	prefix []byte // the request up to the key's count
	out    []byte
	in     []byte
	sent   time.Time
}

func dialRaw(addr *net.TCPAddr) (*rawConn, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := syscall.Connect(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// As Go's net.Dial does.
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &rawConn{fd: fd, in: make([]byte, 0, 16<<10)}, nil
}

// send writes the connection's next request.
func (c *rawConn) send(tail []byte) error {
	c.out = strconv.AppendInt(append(c.out[:0], c.prefix...), int64(c.i), 10)
	c.out = append(c.out, tail...)
	c.sent = time.Now()
	n, err := syscall.Write(c.fd, c.out)
	if err == nil && n < len(c.out) {
		err = fmt.Errorf("short write of a request (%d of %d bytes)", n, len(c.out))
	}
	return err
}

// runRaw drives conns until deadline: one thread, one epoll set.
func runRaw(ctx context.Context, deadline time.Time, conns []*rawConn, tail []byte, t *tally,
	check func(a answer) (bool, error)) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer syscall.Close(ep)
	byFD := map[int32]*rawConn{}
	for _, c := range conns {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(c.fd)}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
			return err
		}
		byFD[int32(c.fd)] = c
		if err := c.send(tail); err != nil {
			return err
		}
	}
	var lats []time.Duration
	defer func() { t.add(lats) }()
	events := make([]syscall.EpollEvent, len(conns))
	inFlight := len(conns)
	for inFlight > 0 {
		n, err := epollWait(ep, events, 10)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		stopping := ctx.Err() != nil || !time.Now().Before(deadline)
		for _, ev := range events[:n] {
			c := byFD[ev.Fd]
			m, err := syscall.Read(c.fd, c.in[len(c.in):cap(c.in)])
			if errors.Is(err, syscall.EAGAIN) {
				continue
			}
			if err == nil && m == 0 {
				err = errors.New("the server closed a connection")
			}
			if err != nil {
				return err
			}
			c.in = c.in[:len(c.in)+m]
			a, used, err := parseAnswer(c.in)
			if err != nil {
				return err
			}
			if used == 0 {
				if len(c.in) == cap(c.in) {
					return errors.New("an answer larger than the read buffer")
				}
				continue // not all of it yet
			}
			lats = append(lats, time.Since(c.sent))
			switch made, err := check(a); {
			case err != nil:
				t.fail(err)
			case made:
				t.ok.Add(1)
			}
			c.in = c.in[:copy(c.in, c.in[used:])]
			c.i++
			if stopping {
				inFlight--
				continue
			}
			if err := c.send(tail); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseAnswer parses the HTTP answer at the start of buf: used is 0 until
// all of it is there. The server answers these requests with a
// Content-Length.
func parseAnswer(buf []byte) (a answer, used int, err error) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return answer{}, 0, nil
	}
	first, rest, _ := bytes.Cut(buf[:end], []byte("\r\n"))
	if len(first) < 12 || !bytes.HasPrefix(first, []byte("HTTP/1.")) {
		return answer{}, 0, errBadAnswer
	}
	if a.status, err = strconv.Atoi(string(first[9:12])); err != nil {
		return answer{}, 0, errBadAnswer
	}
	length := -1
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return answer{}, 0, errBadAnswer
		}
		if bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return answer{}, 0, errBadAnswer
			}
		}
	}
	if length < 0 {
		return answer{}, 0, fmt.Errorf("%w: no Content-Length", errBadAnswer)
	}
	if len(buf) < end+4+length {
		return answer{}, 0, nil
	}
	a.body = buf[end+4 : end+4+length]
	return a, end + 4 + length, nil
}

// epollWait is syscall.EpollWait without telling the scheduler (a raw
// system call): the loop's thread keeps its P while it waits, instead of
// handing it off and taking one back on every wake-up (with the
// scheduler's call, on two threads, one run with perf attached made
// 14,797 refusals a second; this made 22,000 to 32,000). The bench's other goroutines run on the other
// P; a stop of the world for the collector waits at most the timeout.
// It calls epoll_pwait with no signal mask, which is epoll_wait and, unlike
// it, exists on every Linux architecture (arm64 has no epoll_wait).
func epollWait(ep int, events []syscall.EpollEvent, msec int) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
