package listen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serveReserving serves h, behind ProbesOnly, on a Reserving listener of
// max connections and reserve more, and returns its address.
func serveReserving(t *testing.T, max, reserve int, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: ProbesOnly(h, "/healthcheck", "/ready"), ConnContext: MarkReserved}
	go srv.Serve(Reserving(l, max, reserve))
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// send writes raw on a new connection to addr and returns the connection.
func send(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	return c
}

// answer reads the response to a request of method on c.
func answer(t *testing.T, c net.Conn, method string) (*http.Response, string) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(body)
}

// TestReservingServesTheProbesPastTheCap: with every one of the max
// connections held by a body that never ends, a connection past them is
// reserved: it answers a probe and closes, and anything else gets 503 at
// once, saying why.
func TestReservingServesTheProbesPastTheCap(t *testing.T) {
	const max = 2
	held := make(chan struct{}, max)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK\n") })
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		io.Copy(io.Discard, r.Body)
	})
	addr := serveReserving(t, max, 1, mux)
	for range max {
		send(t, addr, "POST /json HTTP/1.1\r\nHost: rls\r\nContent-Length: 100\r\n\r\n{")
		select {
		case <-held:
		case <-time.After(5 * time.Second):
			t.Fatal("a connection within the cap was not served")
		}
	}

	for range 3 {
		c := send(t, addr, "GET /healthcheck HTTP/1.1\r\nHost: rls\r\n\r\n")
		resp, body := answer(t, c, http.MethodGet)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "OK\n", body)
		assert.True(t, resp.Close, "a reserved connection serves one request")
	}
	c := send(t, addr, "POST /json HTTP/1.1\r\nHost: rls\r\nContent-Length: 100\r\n\r\n{")
	resp, body := answer(t, c, http.MethodPost)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "rls: all RLS_HTTP_MAX_CONNECTIONS connections are in use; the connections beyond them serve only /healthcheck and /ready\n", body)
}

// TestReservingServesEverythingWithinTheCap: below the cap, no connection
// is reserved, and every path is served.
func TestReservingServesEverythingWithinTheCap(t *testing.T) {
	addr := serveReserving(t, 2, 1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, r.URL.Path)
	}))
	c := send(t, addr, "GET /json HTTP/1.1\r\nHost: rls\r\n\r\n")
	resp, body := answer(t, c, http.MethodGet)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/json\n", body)
	assert.False(t, resp.Close)
}

// TestReservedDeadlines: every deadline set on a reserved connection is
// brought forward to the end of its life.
func TestReservedDeadlines(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	c := &reservedConn{until: t0.Add(reservedConnLife)}
	assert.Equal(t, t0.Add(time.Second), c.by(time.Time{}), "no deadline")
	assert.Equal(t, t0.Add(time.Second), c.by(t0.Add(time.Minute)))
	assert.Equal(t, t0.Add(250*time.Millisecond), c.by(t0.Add(250*time.Millisecond)))
}

func TestBusyNamesTheProbes(t *testing.T) {
	assert.True(t, strings.HasSuffix(busy([]string{"/a", "/b", "/c"}), "serve only /a and /b and /c\n"))
}
