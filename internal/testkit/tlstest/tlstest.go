// Package tlstest makes certificate authorities for tests of TLS: a CA of
// its own for each test, server and client certificates it signs, and the
// files a server reads them from, replaced as cert-manager replaces them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CA is a certificate authority made for one test, valid from an hour ago
// for an hour.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA's certificate in PEM.
	PEM []byte
}

// NewCA returns a CA whose common name is name.
func NewCA(t testing.TB, name string) *CA {
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
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool that holds the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Issue returns a PEM certificate and PEM key signed by ca: for a server
// on localhost and 127.0.0.1, or for a client, with names as its DNS
// subject alternative names.
func (ca *CA) Issue(t testing.TB, serial int64, server bool, names ...string) (certPEM, keyPEM []byte) {
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

// ClientCert returns a client certificate of serial, signed by ca, with
// names as its DNS names.
func (ca *CA) ClientCert(t testing.TB, serial int64, names ...string) tls.Certificate {
	t.Helper()
	c, k := ca.Issue(t, serial, false, names...)
	cert, err := tls.X509KeyPair(c, k)
	require.NoError(t, err)
	return cert
}

// ReplaceFile writes data to path through a temporary file renamed over
// it, as a Kubernetes Secret volume or cert-manager does.
func ReplaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// ServerFiles writes a server certificate of serial, its key and ca's PEM
// into dir, as tls.crt, tls.key and ca.crt, and returns their paths.
func ServerFiles(t testing.TB, dir string, ca *CA, serial int64) (cert, key, caFile string) {
	t.Helper()
	cert, key, caFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	c, k := ca.Issue(t, serial, true)
	ReplaceFile(t, cert, c)
	ReplaceFile(t, key, k)
	ReplaceFile(t, caFile, ca.PEM)
	return cert, key, caFile
}
