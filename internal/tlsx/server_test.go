package tlsx

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

func TestReloadingCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key, _ := tlstest.ServerFiles(t, dir, ca, 100)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	g, err := GRPC(ServerFiles{Cert: File{"RLS_GRPC_TLS_CERT_FILE", cert}, Key: File{"RLS_GRPC_TLS_KEY_FILE", key}}, logger, t0)
	require.NoError(t, err)
	require.NotNil(t, g)
	assert.Nil(t, g.clientCAs)
	serial := func(now time.Time) int64 { return g.cert.get(now).Leaf.SerialNumber.Int64() }
	assert.EqualValues(t, 100, serial(t0))

	// Within a second of the last look, the files are not looked at.
	tlstest.ServerFiles(t, dir, ca, 200)
	assert.EqualValues(t, 100, serial(t0.Add(999*time.Millisecond)))
	assert.EqualValues(t, 200, serial(t0.Add(time.Second)))
	assert.Contains(t, logs.String(), "reloaded gRPC TLS certificate")

	// A broken certificate is logged once, and the one in use stays.
	logs.Reset()
	tlstest.ReplaceFile(t, cert, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
	assert.EqualValues(t, 200, serial(t0.Add(2*time.Second)))
	assert.EqualValues(t, 200, serial(t0.Add(3*time.Second)))
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE")

	// So is a missing key.
	logs.Reset()
	require.NoError(t, os.Remove(key))
	assert.EqualValues(t, 200, serial(t0.Add(4*time.Second)))
	assert.EqualValues(t, 200, serial(t0.Add(5*time.Second)))
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "RLS_GRPC_TLS_KEY_FILE")

	// A certificate whose key is not there yet (the files are written one
	// after the other) is not taken, and is once the key follows.
	c, k := ca.Issue(t, 300, true)
	tlstest.ReplaceFile(t, cert, c)
	assert.EqualValues(t, 200, serial(t0.Add(6*time.Second)))
	tlstest.ReplaceFile(t, key, k)
	assert.EqualValues(t, 300, serial(t0.Add(7*time.Second)))

	// Rewritten in place rather than renamed, however soon after, the
	// files are still seen to change.
	c, k = ca.Issue(t, 400, true)
	require.NoError(t, os.WriteFile(key, k, 0o600))
	require.NoError(t, os.WriteFile(cert, c, 0o600))
	assert.EqualValues(t, 400, serial(t0.Add(8*time.Second)))
}

func TestTLSLogsNoKeyMaterial(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlstest.ServerFiles(t, dir, ca, 100)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t0 := time.Now()
	g, err := GRPC(ServerFiles{Cert: File{"RLS_GRPC_TLS_CERT_FILE", cert}, Key: File{"RLS_GRPC_TLS_KEY_FILE", key},
		ClientCA: File{"RLS_GRPC_TLS_CLIENT_CA_FILE", caFile}}, logger, t0)
	require.NoError(t, err)
	tlstest.ServerFiles(t, dir, ca, 200)
	g.cert.get(t0.Add(time.Second))
	keyPEM, err := os.ReadFile(key)
	require.NoError(t, err)
	tlstest.ReplaceFile(t, key, append([]byte("garbage "), keyPEM...))
	g.cert.get(t0.Add(2 * time.Second))

	require.Contains(t, logs.String(), "serial=200")
	assert.NotContains(t, logs.String(), "PRIVATE KEY")
	for _, line := range strings.Split(string(keyPEM), "\n")[1:3] {
		assert.NotContains(t, logs.String(), line)
	}
}

// TestRequireClientCert: a request over TLS with a verified chain is
// served, and so is an open path without one; anything else is 403.
func TestRequireClientCert(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := RequireClientCert(ok, "/healthcheck", "/ready")
	verified := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{}}}
	for _, tc := range []struct {
		path string
		tls  *tls.ConnectionState
		code int
	}{
		{"/healthcheck", nil, http.StatusNoContent},
		{"/ready", &tls.ConnectionState{}, http.StatusNoContent},
		{"/json", verified, http.StatusNoContent},
		{"/json", &tls.ConnectionState{}, http.StatusForbidden},
		{"/json", nil, http.StatusForbidden},
		{"/healthcheck/", nil, http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.TLS = tc.tls
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.code, rec.Code, "%s %v", tc.path, tc.tls)
		if tc.code == http.StatusForbidden {
			assert.Equal(t, "rls: a client certificate is required (RLS_HTTP_TLS_CLIENT_CA_FILE)\n", rec.Body.String())
		}
	}
}
