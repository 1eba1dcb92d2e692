package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/tap"

	"github.com/ratewarden/ratewarden/internal/rls"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

// dialIdle opens n TCP connections to addr that send nothing, closed when
// the test ends.
func dialIdle(t *testing.T, addr string, n int) {
	t.Helper()
	for range n {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
}

// slowJSON opens a connection that posts to /json a body of 1000 bytes it
// sends one byte every interval, and returns it; it is closed when the test
// ends.
func slowJSON(t *testing.T, addr string, interval time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(stop)
		c.Close()
		wg.Wait()
	})
	_, err = fmt.Fprint(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	require.NoError(t, err)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(interval):
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	})
	return c
}

func TestHTTPSlowBodyIsCutOff(t *testing.T) {
	s := start(t, map[string]string{"RLS_HTTP_READ_TIMEOUT": "300ms"})
	// One byte every 50ms: the body would take 50s.
	c := slowJSON(t, s.srv.HTTPAddr().String(), 50*time.Millisecond)
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	// Whatever the server answers, then the close, or a reset when it
	// closed while the client still wrote.
	_, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		require.NoError(t, err, "the server should close the connection, not wait for the body")
	}
	t.Logf("closed after %v", time.Since(start).Round(time.Millisecond))
}

func TestHTTPHeaderSizeIsBounded(t *testing.T) {
	s := start(t, map[string]string{"RLS_HTTP_MAX_HEADER_BYTES": "4096"})
	req, err := http.NewRequest(http.MethodGet, s.http+"/healthcheck", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("x", 32<<10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	resp, err = http.Get(s.http + "/healthcheck")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestConnectionLimits: on either port, connections past the limit (for
// HTTP, and the connections reserved for the probes) cost the server no file
// descriptor, and a well-behaved client is answered once the idle ones time
// out (for gRPC, connections that never finish their handshake are closed
// after RLS_GRPC_READ_TIMEOUT).
func TestConnectionLimits(t *testing.T) {
	const limit, reserved, idle = 8, 4, 32
	for _, tc := range []struct {
		name string
		env  map[string]string
		addr func(*started) string
		call func(t *testing.T, s *started)
	}{
		{
			name: "http",
			env:  map[string]string{"RLS_HTTP_MAX_CONNECTIONS": fmt.Sprint(limit), "RLS_HTTP_PROBE_CONNECTIONS": fmt.Sprint(reserved), "RLS_HTTP_READ_TIMEOUT": "200ms"},
			addr: func(s *started) string { return s.srv.HTTPAddr().String() },
			call: func(t *testing.T, s *started) {
				client := http.Client{Timeout: 10 * time.Second}
				resp, err := client.Get(s.http + "/healthcheck")
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
			},
		},
		{
			name: "grpc",
			env:  map[string]string{"RLS_GRPC_MAX_CONNECTIONS": fmt.Sprint(limit), "RLS_GRPC_READ_TIMEOUT": "200ms"},
			addr: func(s *started) string { return s.srv.GRPCAddr().String() },
			call: func(t *testing.T, s *started) {
				conn, err := grpc.NewClient(s.srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				require.NoError(t, err)
				defer conn.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, loginRequest("192.0.2.90"), grpc.WaitForReady(true))
				require.NoError(t, err)
				assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.env)
			before := openFDs(t)
			dialIdle(t, tc.addr(s), idle)
			time.Sleep(100 * time.Millisecond) // the server accepts what it will
			// The client's own sockets, and at most the limit and the
			// reserved ones on the server's side.
			assert.LessOrEqual(t, openFDs(t)-before, idle+limit+reserved+4)
			tc.call(t, s)
		})
	}
}

// TestGRPCStreamsWithoutARequestAreClosed: calls that send their headers
// and never their request hold the server only until RLS_GRPC_READ_TIMEOUT:
// then they end, and every goroutine they held with them. The connection,
// and the others, are served all the while.
func TestGRPCStreamsWithoutARequestAreClosed(t *testing.T) {
	const streams = 50
	s := start(t, map[string]string{"RLS_GRPC_READ_TIMEOUT": "300ms", "RLS_GRPC_MAX_CONCURRENT_STREAMS": fmt.Sprint(streams)})
	ctx := context.Background()
	_, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.91"))
	require.NoError(t, err)
	baseline := runtime.NumGoroutine()

	bad, err := grpc.NewClient(s.srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer bad.Close()
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	ended := make(chan error, streams)
	for range streams {
		st, err := bad.NewStream(ctx, desc, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
		require.NoError(t, err)
		go func() { ended <- st.RecvMsg(new(rlsv3.RateLimitResponse)) }()
	}
	// While they hang, a well-behaved client is answered.
	_, err = s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.92"))
	require.NoError(t, err)

	deadline := time.After(5 * time.Second)
	for i := range streams {
		select {
		case err := <-ended:
			require.Error(t, err)
		case <-deadline:
			t.Fatalf("%d of %d streams without a request still open after 5s", streams-i, streams)
		}
	}
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseline+10 }, 5*time.Second, 10*time.Millisecond,
		"goroutines: %d, before the streams %d", runtime.NumGoroutine(), baseline)
	// The same connection still serves a call that sends its request.
	_, err = rlsv3.NewRateLimitServiceClient(bad).ShouldRateLimit(ctx, loginRequest("192.0.2.94"))
	require.NoError(t, err)
	_, err = s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.93"))
	require.NoError(t, err)
}

// h2Client is a bare HTTP/2 connection, for what gRPC clients do not do:
// ping too often, or not answer pings.
type h2Client struct {
	conn net.Conn
	fr   *http2.Framer
}

func dialH2(t *testing.T, addr string) *h2Client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, bufio.NewReader(c))
	require.NoError(t, fr.WriteSettings())
	return &h2Client{conn: c, fr: fr}
}

// errClosed is what read reports when the server closed the connection.
var errClosed = errors.New("connection closed")

// read reads frames until the deadline, acknowledging settings and, when
// answerPings is set, pings. It returns the GOAWAY's error code, or
// errClosed, or the deadline's error.
func (h *h2Client) read(deadline time.Time, answerPings bool) (http2.ErrCode, error) {
	h.conn.SetReadDeadline(deadline)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "connection reset") {
				return 0, errClosed
			}
			return 0, err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() && answerPings {
				h.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			return f.ErrCode, nil
		}
	}
}

func TestGRPCKeepaliveEnforcement(t *testing.T) {
	s := start(t, map[string]string{"RLS_GRPC_KEEPALIVE_MIN_TIME": "100ms"})
	addr := s.srv.GRPCAddr().String()

	t.Run("a client pinging at the allowed rate stays", func(t *testing.T) {
		h := dialH2(t, addr)
		for i := range 5 {
			time.Sleep(300 * time.Millisecond) // three times the minimum: room for a slow reader
			require.NoError(t, h.fr.WritePing(false, [8]byte{byte(i)}))
		}
		_, err := h.read(time.Now().Add(300*time.Millisecond), true)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no GOAWAY, no close")
	})
	t.Run("a client pinging too often is closed", func(t *testing.T) {
		h := dialH2(t, addr)
		for i := range 10 {
			if h.fr.WritePing(false, [8]byte{byte(i)}) != nil {
				break
			}
		}
		code, err := h.read(time.Now().Add(5*time.Second), true)
		require.NoError(t, err)
		assert.Equal(t, http2.ErrCodeEnhanceYourCalm, code)
	})
}

func TestGRPCDeadAndIdlePeersAreClosed(t *testing.T) {
	t.Run("a peer that answers no ping", func(t *testing.T) {
		s := start(t, map[string]string{"RLS_GRPC_KEEPALIVE_TIME": "1s", "RLS_GRPC_KEEPALIVE_TIMEOUT": "300ms"})
		h := dialH2(t, s.srv.GRPCAddr().String())
		_, err := h.read(time.Now().Add(10*time.Second), false)
		require.ErrorIs(t, err, errClosed)
	})
	t.Run("an idle connection", func(t *testing.T) {
		s := start(t, map[string]string{"RLS_GRPC_MAX_CONNECTION_IDLE": "500ms"})
		h := dialH2(t, s.srv.GRPCAddr().String())
		code, err := h.read(time.Now().Add(10*time.Second), true)
		require.NoError(t, err)
		assert.Equal(t, http2.ErrCodeNo, code, "a graceful GOAWAY")
	})
}

// TestGRPCStuckCallsPastTheCap: past RLS_GRPC_MAX_CALLS open calls, a call
// that does not send its request at once is cancelled at once, so such
// calls cannot pile up within RLS_GRPC_READ_TIMEOUT; calls that do send
// their request are answered.
func TestGRPCStuckCallsPastTheCap(t *testing.T) {
	const maxCalls, extra = 20, 200
	s := start(t, map[string]string{"RLS_GRPC_MAX_CALLS": fmt.Sprint(maxCalls), "RLS_GRPC_READ_TIMEOUT": "1m"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bad, err := grpc.NewClient(s.srv.GRPCAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer bad.Close()
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	stuck := func(n int) chan error {
		ended := make(chan error, n)
		for range n {
			st, err := bad.NewStream(ctx, desc, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
			require.NoError(t, err)
			go func() { ended <- st.RecvMsg(new(rlsv3.RateLimitResponse)) }()
		}
		return ended
	}
	held := stuck(maxCalls)
	time.Sleep(100 * time.Millisecond) // the server has them all
	baseline := runtime.NumGoroutine()

	ended := stuck(extra)
	deadline := time.After(5 * time.Second)
	for i := range extra {
		select {
		case err := <-ended:
			require.Error(t, err)
		case <-deadline:
			t.Fatalf("%d of %d calls past the cap still open after 5s", extra-i, extra)
		}
	}
	// The server's goroutines for the cancelled calls are ending as the
	// client sees the errors; none may stay for RLS_GRPC_READ_TIMEOUT.
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseline+10 },
		2*time.Second, 10*time.Millisecond, "goroutines: %d, baseline %d", runtime.NumGoroutine(), baseline)
	select {
	case err := <-held:
		t.Fatalf("a call within the cap ended: %v", err)
	default:
	}
	resp, err := s.client.ShouldRateLimit(context.Background(), loginRequest("192.0.2.95"))
	require.NoError(t, err, "a call that sends its request is answered past the cap")
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
}

// TestTapMarksArrival: the tap, which runs as soon as a call's headers are
// read, marks the call's arrival for the service (see rls.WithArrival).
func TestTapMarksArrival(t *testing.T) {
	g := &requestGuard{timeout: time.Second, maxCalls: 10}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := time.Now()
	got, err := g.tap(ctx, &tap.Info{})
	require.NoError(t, err)
	at, ok := rls.Arrival(got)
	require.True(t, ok, "the tap marks the arrival")
	assert.False(t, at.Before(before))
	assert.False(t, at.After(time.Now()))
}
