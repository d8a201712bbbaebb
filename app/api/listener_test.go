package api

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListenerShedsLongestIdle: at its cap the Listener closes the
// connection idle longest, never a busy one, to accept the next.
func TestListenerShedsLongestIdle(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := NewListener(ln, 3)
	defer l.Close()
	var clients []net.Conn
	accept := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
		s, err := l.Accept()
		require.NoError(t, err)
		return s
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	first, second, busy := accept(), accept(), accept()
	l.ConnState(first, http.StateIdle)
	l.ConnState(second, http.StateIdle)
	l.ConnState(busy, http.StateActive)
	l.ConnState(first, http.StateActive) // a request on first...
	l.ConnState(first, http.StateIdle)   // ...answered: second is idle longest
	accept()
	require.Equal(t, 3, l.Open())

	closedByServer := func(c net.Conn) bool {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		require.ErrorIs(t, err, io.EOF)
		return true
	}
	require.True(t, closedByServer(clients[1]), "the longest idle is closed")
	require.False(t, closedByServer(clients[0]))
	require.False(t, closedByServer(clients[2]), "a busy connection is not")
}
