package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

// do sends a request with client and returns the status and body.
func do(t *testing.T, client *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(out)
}

// httpsClient trusts roots and presents certs.
func httpsClient(roots *x509.CertPool, certs ...tls.Certificate) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs, ServerName: "localhost", MinVersion: tls.VersionTLS12},
	}}
}

func loginJSON(t *testing.T, addr string) string {
	t.Helper()
	b, err := protojson.Marshal(loginRequest(addr))
	require.NoError(t, err)
	return string(b)
}

// TestJSONIsOffWhenOnlyGRPCRequiresClientCerts: with mutual TLS on gRPC and
// plain HTTP, /json takes and gives back nothing; the probes still answer.
func TestJSONIsOffWhenOnlyGRPCRequiresClientCerts(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key, caFile := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	env := map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile}
	s := start(t, env)
	plain := &http.Client{Timeout: 5 * time.Second}

	for range 10 {
		code, body := do(t, plain, http.MethodPost, s.http+"/json", loginJSON(t, "192.0.2.60"))
		require.Equal(t, http.StatusForbidden, code)
		assert.Contains(t, body, "RLS_HTTP_TLS_CLIENT_CA_FILE")
	}
	// Nothing was taken: the 5 logins a minute are all there over gRPC.
	client := tlsClient(t, s.srv.GRPCAddr().String(), ca.Pool(), ca.ClientCert(t, 7))
	for i := range 5 {
		resp, err := client.ShouldRateLimit(t.Context(), loginRequest("192.0.2.60"))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "call %d", i)
	}
	for _, path := range []string{"/healthcheck", "/ready"} {
		code, _ := do(t, plain, http.MethodGet, s.http+path, "")
		assert.Equal(t, http.StatusOK, code, path)
	}

	// Asked for explicitly, /json is served without certificates.
	env["RLS_HTTP_JSON"] = "on"
	s = start(t, env)
	code, body := do(t, plain, http.MethodPost, s.http+"/json", loginJSON(t, "192.0.2.61"))
	assert.Equal(t, http.StatusOK, code, body)
}

// TestHTTPMutualTLS: HTTP over TLS with client certificates: every endpoint
// but the probes needs one.
func TestHTTPMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key, caFile := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{
		"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile,
		"RLS_HTTP_TLS_CERT_FILE": cert, "RLS_HTTP_TLS_KEY_FILE": key, "RLS_HTTP_TLS_CLIENT_CA_FILE": caFile,
	})
	base := "https://" + s.srv.HTTPAddr().String()
	anonymous := httpsClient(ca.Pool())
	trusted := httpsClient(ca.Pool(), ca.ClientCert(t, 7))

	// A probe presents no certificate (kubelet cannot), and is answered.
	for _, path := range []string{"/healthcheck", "/ready"} {
		code, body := do(t, anonymous, http.MethodGet, base+path, "")
		assert.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	// Everything else needs a certificate.
	for _, path := range []string{"/json", "/explain", "/rlconfig", "/metrics"} {
		code, body := do(t, anonymous, http.MethodPost, base+path, loginJSON(t, "192.0.2.70"))
		assert.Equal(t, http.StatusForbidden, code, path)
		assert.Contains(t, body, "client certificate is required")
	}
	for i := range 5 {
		code, body := do(t, trusted, http.MethodPost, base+"/json", loginJSON(t, "192.0.2.70"))
		require.Equal(t, http.StatusOK, code, "call %d: %s", i, body)
	}
	code, _ := do(t, trusted, http.MethodPost, base+"/json", loginJSON(t, "192.0.2.70"))
	assert.Equal(t, http.StatusTooManyRequests, code, "only the certified calls counted: 5 of 5")
	code, _ = do(t, trusted, http.MethodGet, base+"/rlconfig", "")
	assert.Equal(t, http.StatusOK, code)
	code, body := do(t, trusted, http.MethodPost, base+"/explain", loginJSON(t, "192.0.2.70"))
	assert.Equal(t, http.StatusOK, code, body)

	// A certificate from another CA is not the CA's: no certificate.
	code, _ = do(t, httpsClient(ca.Pool(), tlstest.NewCA(t, "other CA").ClientCert(t, 8)), http.MethodPost, base+"/json", loginJSON(t, "192.0.2.71"))
	assert.Equal(t, http.StatusForbidden, code)
	// Plain HTTP gets no answer from the handler.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.srv.HTTPAddr().String() + "/json")
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go answers plain HTTP on a TLS port with 400")
	}
}

func TestHTTPTLSSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RLS_HTTP_TLS_CERT_FILE": "c.pem"}, "RLS_HTTP_TLS_KEY_FILE"},
		{map[string]string{"RLS_HTTP_TLS_CLIENT_CA_FILE": "ca.PEM"}, "RLS_HTTP_TLS_CLIENT_CA_FILE"},
		{map[string]string{"RLS_HTTP_JSON": "maybe"}, "RLS_HTTP_JSON"},
		{map[string]string{"RLS_HTTP_TLS_CERT_FILE": "/nonexistent/c.pem", "RLS_HTTP_TLS_KEY_FILE": "/nonexistent/k.pem"}, "RLS_HTTP_TLS_CERT_FILE"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			tc.env["RLS_CONFIG_PATH"] = "../../config"
			s, err := loadSettings(tc.env)
			if err == nil {
				_, err = New(t.Context(), s, slog.New(slog.NewTextHandler(io.Discard, nil)))
			}
			require.Error(t, err, "%v", tc.env)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
