package api

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// Listener caps the connections a server holds open, so idle keep-alive
// sockets cannot exhaust the process's file descriptors. At the cap it
// closes the connection idle longest to make room (a client treats a
// closed idle connection as routine and reconnects); when none is idle,
// Accept waits and new clients queue in the kernel's backlog. Pass
// ConnState to the http.Server so the Listener knows which are idle.
//
// It also turns the few answers net/http writes itself, before any handler
// runs (a request line it cannot parse, such as GET /v1/skus/%ZZ, a bad
// header), from text/plain into application/problem+json like every other
// answer.
type Listener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	close sync.Once

	mu   sync.Mutex
	open map[*conn]struct{}
	// idled counts connections going idle: the count a connection went
	// idle at (conn.idleAt) orders them, without a clock or a lock on
	// every request.
	idled atomic.Uint64
}

// NewListener wraps ln, holding at most max connections open (4096 when
// max is not above zero).
func NewListener(ln net.Listener, max int) *Listener {
	if max <= 0 {
		max = 4096
	}
	return &Listener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{}), open: map[*conn]struct{}{}}
}

// Accept waits for a free slot, closing the longest-idle connection when
// there is none, then accepts.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.shedIdle()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	nc, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	c := &conn{Conn: nc, l: l}
	l.mu.Lock()
	l.open[c] = struct{}{}
	l.mu.Unlock()
	return c, nil
}

// Close stops accepting; open connections stay with the server.
func (l *Listener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Open is how many connections are open.
func (l *Listener) Open() int { return len(l.slots) }

// ConnState tracks which connections are idle; set it as the
// http.Server's ConnState.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	if state == http.StateIdle {
		c.idleAt.Store(l.idled.Add(1))
	} else {
		c.idleAt.Store(0)
	}
}

func (l *Listener) shedIdle() {
	l.mu.Lock()
	var (
		oldest *conn
		since  uint64
	)
	for c := range l.open {
		if at := c.idleAt.Load(); at != 0 && (oldest == nil || at < since) {
			oldest, since = c, at
		}
	}
	if oldest != nil {
		oldest.idleAt.Store(0) // not chosen again meanwhile
	}
	l.mu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
	}
}

// conn frees its slot once, when closed.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
	// idleAt is the Listener's count of connections gone idle when this
	// one last did, 0 while it is not idle.
	idleAt atomic.Uint64
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.open, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// serverErrorHeaders is what net/http puts after the status line of the
// answers it writes itself, straight on the connection and in one write
// (see net/http's conn.serve); answers from handlers always carry a Date.
var serverErrorHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// Write passes answers through, except net/http's own plain-text errors,
// which it rewrites as problem+json.
func (c *conn) Write(b []byte) (int, error) {
	if p := serverError(b); p != nil {
		if _, err := c.Conn.Write(p); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// serverError returns b rewritten as a problem+json answer if it is one of
// net/http's own error answers ("HTTP/1.1 400 Bad Request: why..."), or nil.
func serverError(b []byte) []byte {
	const prefix = "HTTP/1.1 "
	if len(b) < len(prefix)+3 || string(b[:len(prefix)]) != prefix || (b[len(prefix)] != '4' && b[len(prefix)] != '5') {
		return nil
	}
	end := bytes.Index(b, serverErrorHeaders)
	if end < 0 || bytes.IndexByte(b[:end], '\n') >= 0 {
		return nil
	}
	status, err := strconv.Atoi(string(b[len(prefix) : len(prefix)+3]))
	if err != nil {
		return nil
	}
	detail := "the request line or its headers cannot be parsed (a path with a bad %-escape such as %ZZ, a malformed header)"
	if _, why, ok := bytes.Cut(b[len(prefix)+3:end], []byte(": ")); ok {
		detail = "the request cannot be parsed: " + string(why)
	}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		detail = "the request headers are too large"
	}
	body := problemBody(&problem{Status: status, Code: "invalid_request", Title: title("invalid_request"), Detail: detail})
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}
