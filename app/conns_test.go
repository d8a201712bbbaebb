package app_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdleConnectionsCapped opens five times as many keep-alive
// connections as the cap, each after one unauthenticated GET /healthz, as
// in a load that once exhausted the file descriptors with 20,000 of
// them. Every one is answered; the server keeps at most the cap
// open, closing the longest idle to make room; and a new client is still
// served.
func TestIdleConnectionsCapped(t *testing.T) {
	t.Parallel()
	const limit = 20
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_HTTP_MAX_CONNS": fmt.Sprint(limit)}})
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range 5 * limit {
		c, err := net.Dial("tcp", in.addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Empty(t, res.Header.Get("Connection"), "kept alive")
		res.Body.Close()
	}

	open := 0
	for _, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		_, err := c.Read(make([]byte, 1))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			open++ // the server still holds it
		case errors.Is(err, io.EOF), err != nil && strings.Contains(err.Error(), "reset"):
		default:
			t.Fatalf("unexpected read on an idle connection: %v", err)
		}
	}
	require.LessOrEqual(t, open, limit, "the server holds at most the cap")
	require.GreaterOrEqual(t, open, limit-2, "and sheds only what it must")

	a := in.must("GET", "/healthz", "", "")
	require.Equal(t, http.StatusOK, a.status, "a new client is served")
}

// TestDribblingBodyCutOff sends a body one byte at a time, slower than the
// read timeout allows: the server stops waiting and closes the connection
// long before the body would have arrived.
func TestDribblingBodyCutOff(t *testing.T) {
	t.Parallel()
	in := start(t, &instanceOpts{env: map[string]string{"STOCKHOLD_HTTP_READ_TIMEOUT": "1s"}})
	c, err := net.Dial("tcp", in.addr)
	require.NoError(t, err)
	defer c.Close()
	const size = 100
	_, err = fmt.Fprintf(c, "POST /v1/reservations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: drip\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", in.shop, size)
	require.NoError(t, err)

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c) // until the server closes
	}()
	sent := 0
	for ; sent < size; sent++ {
		select {
		case <-closed:
		case <-time.After(200 * time.Millisecond):
			if _, err := c.Write([]byte(" ")); err == nil {
				continue
			}
		}
		break
	}
	require.Less(t, sent, size, "the connection was cut before the whole body arrived")
	t.Logf("cut after %d of %d bytes, one per 200 ms", sent, size)
}
