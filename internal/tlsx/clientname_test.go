package tlsx

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

func TestRequireClientName(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	leaf := func(names ...string) *x509.Certificate {
		t.Helper()
		c, err := x509.ParseCertificate(ca.ClientCert(t, 42, names...).Certificate[0])
		require.NoError(t, err)
		return c
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	plain := &tls.Config{}
	assert.Same(t, plain, RequireClientName(plain, "", logger), "no name, no change")
	assert.Nil(t, plain.VerifyConnection)

	inner := &tls.Config{}
	c := RequireClientName(&tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return inner, nil }}, "envoy.example", logger)
	forClient, err := c.GetConfigForClient(nil)
	require.NoError(t, err)
	for _, verify := range []func(tls.ConnectionState) error{c.VerifyConnection, forClient.VerifyConnection} {
		require.NotNil(t, verify)
		assert.NoError(t, verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf("envoy.example")}}))
		assert.Error(t, verify(tls.ConnectionState{}))
		logs.Reset()
		err := verify(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf("other.example")}})
		assert.ErrorContains(t, err, `server: client certificate not valid for "envoy.example"`)
		assert.Contains(t, logs.String(), `level=WARN msg="client certificate refused: not valid for RLS_GRPC_TLS_CLIENT_SAN" san=envoy.example subject="CN=client" serial=42 dns_names=[other.example]`)
	}
}
