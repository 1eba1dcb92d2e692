package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"maps"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/testkit/tlstest"
)

// tlsClient returns a RateLimitService client over TLS that trusts roots
// and presents certs.
func tlsClient(t *testing.T, addr string, roots *x509.CertPool, certs ...tls.Certificate) rlsv3.RateLimitServiceClient {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func call(c rlsv3.RateLimitServiceClient, opts ...grpc.CallOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.ShouldRateLimit(ctx, loginRequest("192.0.2.50"), opts...)
	return err
}

// servedSerial connects with TLS and returns the serial number of the
// certificate the server presents.
func servedSerial(addr string, roots *x509.CertPool, certs ...tls.Certificate) (int64, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, Certificates: certs, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func TestGRPCTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key, _ := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key})
	addr := s.srv.GRPCAddr().String()

	var p peer.Peer
	require.NoError(t, call(tlsClient(t, addr, ca.Pool()), grpc.Peer(&p)))
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	require.True(t, ok, "%T", p.AuthInfo)
	assert.GreaterOrEqual(t, info.State.Version, uint16(tls.VersionTLS12))
	assert.EqualValues(t, 100, info.State.PeerCertificates[0].SerialNumber.Int64())

	// A plaintext client is refused.
	err := call(s.client)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	// So is a client that does not trust the CA.
	err = call(tlsClient(t, addr, tlstest.NewCA(t, "other CA").Pool()))
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	// And one that offers only TLS 1.1.
	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11})
	assert.Error(t, err)
}

func TestGRPCMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key, caFile := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile})
	addr := s.srv.GRPCAddr().String()

	var p peer.Peer
	require.NoError(t, call(tlsClient(t, addr, ca.Pool(), ca.ClientCert(t, 7)), grpc.Peer(&p)))
	assert.EqualValues(t, 100, p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.Int64())

	err := call(tlsClient(t, addr, ca.Pool()))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client without a certificate: %v", err)
	err = call(tlsClient(t, addr, ca.Pool(), tlstest.NewCA(t, "other CA").ClientCert(t, 8)))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client certificate from another CA: %v", err)
	err = call(s.client)
	assert.Equal(t, codes.Unavailable, status.Code(err), "plaintext: %v", err)
}

// TestGRPCMutualTLSClientName: with RLS_GRPC_TLS_CLIENT_SAN, a client
// certificate of the CA must also be valid for that name.
func TestGRPCMutualTLSClientName(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	cert, key, caFile := tlstest.ServerFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{
		"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile,
		"RLS_GRPC_TLS_CLIENT_SAN": "envoy.example",
	})
	addr := s.srv.GRPCAddr().String()

	assert.NoError(t, call(tlsClient(t, addr, ca.Pool(), ca.ClientCert(t, 7, "envoy.example"))))
	assert.NoError(t, call(tlsClient(t, addr, ca.Pool(), ca.ClientCert(t, 8, "other.example", "envoy.example"))), "one of its names")
	assert.NoError(t, call(tlsClient(t, addr, ca.Pool(), ca.ClientCert(t, 9, "*.example"))), "a wildcard name, as x509 matches host names")

	for _, c := range []struct {
		what string
		cert tls.Certificate
	}{
		{"another name", ca.ClientCert(t, 10, "other.example")},
		{"no name", ca.ClientCert(t, 11)},
		{"the name, from another CA", tlstest.NewCA(t, "other CA").ClientCert(t, 12, "envoy.example")},
	} {
		err := call(tlsClient(t, addr, ca.Pool(), c.cert))
		assert.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", c.what, err)
	}
	assert.Equal(t, codes.Unavailable, status.Code(call(tlsClient(t, addr, ca.Pool()))), "no certificate")
}

func TestGRPCTLSCertificateRotation(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlstest.ServerFiles(t, dir, ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile})
	addr := s.srv.GRPCAddr().String()
	client := ca.ClientCert(t, 7)
	serial, err := servedSerial(addr, ca.Pool(), client)
	require.NoError(t, err)
	require.EqualValues(t, 100, serial)

	// A new certificate and key from the same CA, as cert-manager renews.
	tlstest.ServerFiles(t, dir, ca, 200)
	require.Eventually(t, func() bool {
		serial, err := servedSerial(addr, ca.Pool(), client)
		return err == nil && serial == 200
	}, 5*time.Second, 20*time.Millisecond, "the renewed certificate is not served")
	require.NoError(t, call(tlsClient(t, addr, ca.Pool(), client)))

	// The CA moves: a new server certificate and a new client CA.
	ca2 := tlstest.NewCA(t, "next CA")
	tlstest.ServerFiles(t, dir, ca2, 300)
	client2 := ca2.ClientCert(t, 9)
	require.Eventually(t, func() bool {
		serial, err := servedSerial(addr, ca2.Pool(), client2)
		return err == nil && serial == 300
	}, 5*time.Second, 20*time.Millisecond, "the new CA's certificates are not accepted")
	// The client CA file is looked at on its own schedule: the server may
	// serve the new certificate a moment before it trusts the new CA.
	require.Eventually(t, func() bool { return call(tlsClient(t, addr, ca2.Pool(), client2)) == nil },
		5*time.Second, 20*time.Millisecond, "a client of the new CA is refused")
	err = call(tlsClient(t, addr, ca2.Pool(), client))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client of the old CA: %v", err)
}

func TestTLSStartupErrorsNameTheVariable(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlstest.ServerFiles(t, dir, ca, 100)
	otherKey := filepath.Join(dir, "other.key")
	_, k := ca.Issue(t, 101, true)
	tlstest.ReplaceFile(t, otherKey, k)
	garbage := filepath.Join(dir, "garbage.pem")
	tlstest.ReplaceFile(t, garbage, []byte("not PEM\n"))
	missing := filepath.Join(dir, "missing.pem")

	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"cert without key", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert}, []string{"RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE go together"}},
		{"key without cert", map[string]string{"RLS_GRPC_TLS_KEY_FILE": key}, []string{"RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE go together"}},
		{"client CA without cert", map[string]string{"RLS_GRPC_TLS_CLIENT_CA_FILE": caFile}, []string{"RLS_GRPC_TLS_CLIENT_CA_FILE needs"}},
		{"client name without client CA", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_SAN": "envoy"}, []string{"RLS_GRPC_TLS_CLIENT_SAN needs RLS_GRPC_TLS_CLIENT_CA_FILE"}},
		{"missing cert", map[string]string{"RLS_GRPC_TLS_CERT_FILE": missing, "RLS_GRPC_TLS_KEY_FILE": key}, []string{"RLS_GRPC_TLS_CERT_FILE: ", missing, "no such file"}},
		{"missing key", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": missing}, []string{"RLS_GRPC_TLS_KEY_FILE: ", missing}},
		{"key of another certificate", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": otherKey}, []string{"RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE: ", "does not match"}},
		{"cert not PEM", map[string]string{"RLS_GRPC_TLS_CERT_FILE": garbage, "RLS_GRPC_TLS_KEY_FILE": key}, []string{"RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE: ", garbage}},
		{"client CA not PEM", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": garbage}, []string{"RLS_GRPC_TLS_CLIENT_CA_FILE: ", "no PEM certificate"}},
		{"missing client CA", map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": missing}, []string{"RLS_GRPC_TLS_CLIENT_CA_FILE: ", missing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": "", "RLS_CONFIG_PATH": "../../config"}
			maps.Copy(vars, tc.env)
			set, err := loadSettings(vars)
			if err == nil {
				_, err = New(context.Background(), set, slog.New(slog.DiscardHandler))
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
