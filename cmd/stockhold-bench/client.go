package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
)

// client is a lean HTTP/1.1 keep-alive client: one request at a time per
// connection, connections pooled. The load generator shares the machine
// with the server and PostgreSQL, so it spends as little as it can (what
// wrk does in C): no goroutines per connection, no header maps, one write
// and usually one read per request.
type client struct {
	addr string
	mu   sync.Mutex
	idle []*conn
}

type conn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func newClient(addr string) *client { return &client{addr: addr} }

func (cl *client) get() (*conn, error) {
	cl.mu.Lock()
	if n := len(cl.idle); n > 0 {
		c := cl.idle[n-1]
		cl.idle = cl.idle[:n-1]
		cl.mu.Unlock()
		return c, nil
	}
	cl.mu.Unlock()
	nc, err := net.Dial("tcp", cl.addr)
	if err != nil {
		return nil, err
	}
	return &conn{c: nc, r: bufio.NewReaderSize(nc, 16<<10)}, nil
}

func (cl *client) put(c *conn) {
	cl.mu.Lock()
	cl.idle = append(cl.idle, c)
	cl.mu.Unlock()
}

// do sends one request and reads the whole answer. A connection that fails
// is dropped (and the request fails: the caller counts it as an error).
func (cl *client) do(method, path, token, key string, body []byte) (answer, error) {
	c, err := cl.get()
	if err != nil {
		return answer{}, err
	}
	a, err := c.roundTrip(cl.addr, method, path, token, key, body)
	if err != nil {
		c.c.Close()
		return a, err
	}
	cl.put(c)
	return a, nil
}

func (c *conn) roundTrip(host, method, path, token, key string, body []byte) (answer, error) {
	c.buf = appendRequest(c.buf[:0], host, method, path, token, key, body)
	if _, err := c.c.Write(c.buf); err != nil {
		return answer{}, err
	}
	return c.readAnswer()
}

// appendRequest appends an HTTP/1.1 request to b.
func appendRequest(b []byte, host, method, path, token, key string, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nAuthorization: Bearer "...)
	b = append(b, token...)
	if key != "" {
		b = append(b, "\r\nIdempotency-Key: "...)
		b = append(b, key...)
	}
	if body != nil {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

var errBadAnswer = errors.New("malformed HTTP answer")

func (c *conn) readAnswer() (answer, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return answer{}, err
	}
	// HTTP/1.1 201 Created
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return answer{}, errBadAnswer
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return answer{}, errBadAnswer
	}
	length, chunked := -1, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return answer{}, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return answer{}, errBadAnswer
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return answer{}, errBadAnswer
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		}
	}
	var body []byte
	switch {
	case chunked:
		for {
			line, err := c.r.ReadSlice('\n')
			if err != nil {
				return answer{}, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.SplitN(line, []byte(";"), 2)[0])), 16, 64)
			if err != nil {
				return answer{}, errBadAnswer
			}
			if n == 0 {
				if _, err := c.r.ReadSlice('\n'); err != nil { // the final CRLF
					return answer{}, err
				}
				break
			}
			chunk := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, chunk); err != nil {
				return answer{}, err
			}
			body = append(body, chunk[:n]...)
		}
	case length >= 0:
		body = make([]byte, length)
		if _, err := io.ReadFull(c.r, body); err != nil {
			return answer{}, err
		}
	default:
		return answer{}, fmt.Errorf("%w: no length", errBadAnswer)
	}
	return answer{status, body}, nil
}
