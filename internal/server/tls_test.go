package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
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

	"github.com/ratewarden/ratewarden/internal/settings"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue returns a PEM certificate and PEM key signed by ca: for a server
// on localhost and 127.0.0.1, or for a client, with names as its DNS
// subject alternative names.
func (ca *testCA) issue(t *testing.T, serial int64, server bool, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     names,
	}
	if server {
		tmpl.Subject.CommonName = "ratewarden"
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

func (ca *testCA) clientCert(t *testing.T, serial int64, names ...string) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, serial, false, names...)
	cert, err := tls.X509KeyPair(c, k)
	require.NoError(t, err)
	return cert
}

// replaceFile writes data to path through a temporary file renamed over it.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// tlsFiles writes a server certificate of serial, its key and ca's PEM
// into dir and returns their paths.
func tlsFiles(t *testing.T, dir string, ca *testCA, serial int64) (cert, key, caFile string) {
	t.Helper()
	cert, key, caFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	c, k := ca.issue(t, serial, true)
	replaceFile(t, cert, c)
	replaceFile(t, key, k)
	replaceFile(t, caFile, ca.pem)
	return cert, key, caFile
}

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
	ca := newTestCA(t, "test CA")
	cert, key, _ := tlsFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key})
	addr := s.srv.GRPCAddr().String()

	var p peer.Peer
	require.NoError(t, call(tlsClient(t, addr, ca.pool()), grpc.Peer(&p)))
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	require.True(t, ok, "%T", p.AuthInfo)
	assert.GreaterOrEqual(t, info.State.Version, uint16(tls.VersionTLS12))
	assert.EqualValues(t, 100, info.State.PeerCertificates[0].SerialNumber.Int64())

	// A plaintext client is refused.
	err := call(s.client)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	// So is a client that does not trust the CA.
	err = call(tlsClient(t, addr, newTestCA(t, "other CA").pool()))
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	// And one that offers only TLS 1.1.
	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11})
	assert.Error(t, err)
}

func TestGRPCMutualTLS(t *testing.T) {
	ca := newTestCA(t, "test CA")
	cert, key, caFile := tlsFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile})
	addr := s.srv.GRPCAddr().String()

	var p peer.Peer
	require.NoError(t, call(tlsClient(t, addr, ca.pool(), ca.clientCert(t, 7)), grpc.Peer(&p)))
	assert.EqualValues(t, 100, p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0].SerialNumber.Int64())

	err := call(tlsClient(t, addr, ca.pool()))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client without a certificate: %v", err)
	err = call(tlsClient(t, addr, ca.pool(), newTestCA(t, "other CA").clientCert(t, 8)))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client certificate from another CA: %v", err)
	err = call(s.client)
	assert.Equal(t, codes.Unavailable, status.Code(err), "plaintext: %v", err)
}

// TestGRPCMutualTLSClientName: with RLS_GRPC_TLS_CLIENT_SAN, a client
// certificate of the CA must also be valid for that name.
func TestGRPCMutualTLSClientName(t *testing.T) {
	ca := newTestCA(t, "test CA")
	cert, key, caFile := tlsFiles(t, t.TempDir(), ca, 100)
	s := start(t, map[string]string{
		"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile,
		"RLS_GRPC_TLS_CLIENT_SAN": "envoy.example",
	})
	addr := s.srv.GRPCAddr().String()

	assert.NoError(t, call(tlsClient(t, addr, ca.pool(), ca.clientCert(t, 7, "envoy.example"))))
	assert.NoError(t, call(tlsClient(t, addr, ca.pool(), ca.clientCert(t, 8, "other.example", "envoy.example"))), "one of its names")
	assert.NoError(t, call(tlsClient(t, addr, ca.pool(), ca.clientCert(t, 9, "*.example"))), "a wildcard name, as x509 matches host names")

	for _, c := range []struct {
		what string
		cert tls.Certificate
	}{
		{"another name", ca.clientCert(t, 10, "other.example")},
		{"no name", ca.clientCert(t, 11)},
		{"the name, from another CA", newTestCA(t, "other CA").clientCert(t, 12, "envoy.example")},
	} {
		err := call(tlsClient(t, addr, ca.pool(), c.cert))
		assert.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", c.what, err)
	}
	assert.Equal(t, codes.Unavailable, status.Code(call(tlsClient(t, addr, ca.pool()))), "no certificate")
}

func TestGRPCTLSCertificateRotation(t *testing.T) {
	ca := newTestCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlsFiles(t, dir, ca, 100)
	s := start(t, map[string]string{"RLS_GRPC_TLS_CERT_FILE": cert, "RLS_GRPC_TLS_KEY_FILE": key, "RLS_GRPC_TLS_CLIENT_CA_FILE": caFile})
	addr := s.srv.GRPCAddr().String()
	client := ca.clientCert(t, 7)
	serial, err := servedSerial(addr, ca.pool(), client)
	require.NoError(t, err)
	require.EqualValues(t, 100, serial)

	// A new certificate and key from the same CA, as cert-manager renews.
	tlsFiles(t, dir, ca, 200)
	require.Eventually(t, func() bool {
		serial, err := servedSerial(addr, ca.pool(), client)
		return err == nil && serial == 200
	}, 5*time.Second, 20*time.Millisecond, "the renewed certificate is not served")
	require.NoError(t, call(tlsClient(t, addr, ca.pool(), client)))

	// The CA moves: a new server certificate and a new client CA.
	ca2 := newTestCA(t, "next CA")
	tlsFiles(t, dir, ca2, 300)
	client2 := ca2.clientCert(t, 9)
	require.Eventually(t, func() bool {
		serial, err := servedSerial(addr, ca2.pool(), client2)
		return err == nil && serial == 300
	}, 5*time.Second, 20*time.Millisecond, "the new CA's certificates are not accepted")
	// The client CA file is looked at on its own schedule: the server may
	// serve the new certificate a moment before it trusts the new CA.
	require.Eventually(t, func() bool { return call(tlsClient(t, addr, ca2.pool(), client2)) == nil },
		5*time.Second, 20*time.Millisecond, "a client of the new CA is refused")
	err = call(tlsClient(t, addr, ca2.pool(), client))
	assert.Equal(t, codes.Unavailable, status.Code(err), "a client of the old CA: %v", err)
}

func TestReloadingCertificate(t *testing.T) {
	ca := newTestCA(t, "test CA")
	dir := t.TempDir()
	cert, key, _ := tlsFiles(t, dir, ca, 100)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	g, err := newGRPCTLS(settings.Settings{GRPCTlsCertFile: cert, GRPCTlsKeyFile: key}, logger, t0)
	require.NoError(t, err)
	require.NotNil(t, g)
	assert.Nil(t, g.clientCAs)
	serial := func(now time.Time) int64 { return g.cert.get(now).Leaf.SerialNumber.Int64() }
	assert.EqualValues(t, 100, serial(t0))

	// Within a second of the last look, the files are not looked at.
	tlsFiles(t, dir, ca, 200)
	assert.EqualValues(t, 100, serial(t0.Add(999*time.Millisecond)))
	assert.EqualValues(t, 200, serial(t0.Add(time.Second)))
	assert.Contains(t, logs.String(), "reloaded gRPC TLS certificate")

	// A broken certificate is logged once, and the one in use stays.
	logs.Reset()
	replaceFile(t, cert, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
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
	c, k := ca.issue(t, 300, true)
	replaceFile(t, cert, c)
	assert.EqualValues(t, 200, serial(t0.Add(6*time.Second)))
	replaceFile(t, key, k)
	assert.EqualValues(t, 300, serial(t0.Add(7*time.Second)))

	// Rewritten in place rather than renamed, however soon after, the
	// files are still seen to change.
	c, k = ca.issue(t, 400, true)
	require.NoError(t, os.WriteFile(key, k, 0o600))
	require.NoError(t, os.WriteFile(cert, c, 0o600))
	assert.EqualValues(t, 400, serial(t0.Add(8*time.Second)))
}

func TestTLSLogsNoKeyMaterial(t *testing.T) {
	ca := newTestCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlsFiles(t, dir, ca, 100)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t0 := time.Now()
	g, err := newGRPCTLS(settings.Settings{GRPCTlsCertFile: cert, GRPCTlsKeyFile: key, GRPCTlsClientCaFile: caFile}, logger, t0)
	require.NoError(t, err)
	tlsFiles(t, dir, ca, 200)
	g.cert.get(t0.Add(time.Second))
	keyPEM, err := os.ReadFile(key)
	require.NoError(t, err)
	replaceFile(t, key, append([]byte("garbage "), keyPEM...))
	g.cert.get(t0.Add(2 * time.Second))

	require.Contains(t, logs.String(), "serial=200")
	assert.NotContains(t, logs.String(), "PRIVATE KEY")
	for _, line := range strings.Split(string(keyPEM), "\n")[1:3] {
		assert.NotContains(t, logs.String(), line)
	}
}

func TestTLSStartupErrorsNameTheVariable(t *testing.T) {
	ca := newTestCA(t, "test CA")
	dir := t.TempDir()
	cert, key, caFile := tlsFiles(t, dir, ca, 100)
	otherKey := filepath.Join(dir, "other.key")
	_, k := ca.issue(t, 101, true)
	replaceFile(t, otherKey, k)
	garbage := filepath.Join(dir, "garbage.pem")
	replaceFile(t, garbage, []byte("not PEM\n"))
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
