package server

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

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

// TestProbesAnswerWhileSlowBodiesHoldTheConnections: slow /json bodies
// holding every one of RLS_HTTP_MAX_CONNECTIONS leave /healthcheck and
// /ready answering at once, on the connections reserved for them; /json
// beyond the cap is refused at once, so the cap still bounds it, and its
// slow bodies hold the two reserved connections no longer than it takes to
// refuse them.
func TestProbesAnswerWhileSlowBodiesHoldTheConnections(t *testing.T) {
	const maxConns, slow = 8, 20
	s := start(t, map[string]string{"RLS_HTTP_MAX_CONNECTIONS": fmt.Sprint(maxConns), "RLS_HTTP_PROBE_CONNECTIONS": "2"})
	addr := s.srv.HTTPAddr().String()
	conns := make([]net.Conn, slow)
	for i := range conns {
		conns[i] = slowJSON(t, addr, 100*time.Millisecond)
	}

	// The connections past the cap are answered 503 at once, the others
	// not at all while their bodies trickle in.
	refused := 0
	for _, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Contains(t, string(body), "RLS_HTTP_MAX_CONNECTIONS")
		refused++
	}
	assert.Equal(t, slow-maxConns, refused, "the slow /json bodies served are the cap's")

	client := http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 10 {
		for _, path := range []string{"/healthcheck", "/ready"} {
			began := time.Now()
			resp, err := client.Get(s.http + path)
			require.NoError(t, err, path)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, path)
			assert.Less(t, time.Since(began), 500*time.Millisecond, path)
		}
	}
	resp, err := client.Post(s.http+"/json", "application/json", strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"api_key","value":"k"}]}]}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "/json past the cap")
	assert.Contains(t, string(body), "RLS_HTTP_MAX_CONNECTIONS")
}

// TestProbesAnswerOverTLSWhileTheConnectionsAreHeld: over HTTPS too, with
// every one of RLS_HTTP_MAX_CONNECTIONS held by connections that never
// finish their handshake, the probes are answered on a reserved connection,
// and /json is refused there.
func TestProbesAnswerOverTLSWhileTheConnectionsAreHeld(t *testing.T) {
	const maxConns = 4
	ca := tlstest.NewCA(t, "test CA")
	cert, key, _ := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{"RLS_HTTP_MAX_CONNECTIONS": fmt.Sprint(maxConns), "RLS_HTTP_TLS_CERT_FILE": cert, "RLS_HTTP_TLS_KEY_FILE": key})
	addr := s.srv.HTTPAddr().String()
	dialIdle(t, addr, maxConns)
	time.Sleep(100 * time.Millisecond) // the server accepts them

	client := httpsClient(ca.Pool())
	client.Timeout = time.Second
	client.Transport.(*http.Transport).DisableKeepAlives = true
	base := "https://" + addr
	for _, path := range []string{"/healthcheck", "/ready"} {
		code, _ := do(t, client, http.MethodGet, base+path, "")
		assert.Equal(t, http.StatusOK, code, path)
	}
	code, body := do(t, client, http.MethodPost, base+"/json", loginJSON(t, "192.0.2.61"))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "RLS_HTTP_MAX_CONNECTIONS")
}
