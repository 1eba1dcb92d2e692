package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs names the PEM files of a throwaway public key infrastructure: a CA,
// a server certificate for 127.0.0.1 and localhost, a client certificate,
// and a peer certificate, all signed by the CA.
type Certs struct {
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
	// PeerCertFile and PeerKeyFile hold a certificate for 127.0.0.1 and
	// localhost without extended key usages, so good for either end of a
	// connection, as Envoy Gateway's certgen makes the one its rate limit
	// service serves gRPC with and shows the xDS server.
	PeerCertFile, PeerKeyFile string
}

// NewCerts generates a CA, a server, a client and a peer certificate (ECDSA
// P-256, valid for a day) in a temporary directory removed when the test
// ends.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	write := func(name, kind string, der []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		t.Helper()
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		t.Helper()
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return der
	}

	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	// leaf makes a certificate for the given usages, none meaning any.
	leaf := func(serial int64, name string, key *ecdsa.PrivateKey, usages ...x509.ExtKeyUsage) []byte {
		t.Helper()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usages,
		}
		if len(usages) == 0 || usages[0] == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		return der
	}
	serverKey, clientKey, peerKey := newKey(), newKey(), newKey()
	return Certs{
		CAFile:         write("ca.pem", "CERTIFICATE", caDER),
		ServerCertFile: write("server.pem", "CERTIFICATE", leaf(2, "redistest server", serverKey, x509.ExtKeyUsageServerAuth)),
		ServerKeyFile:  write("server-key.pem", "PRIVATE KEY", keyDER(serverKey)),
		ClientCertFile: write("client.pem", "CERTIFICATE", leaf(3, "redistest client", clientKey, x509.ExtKeyUsageClientAuth)),
		ClientKeyFile:  write("client-key.pem", "PRIVATE KEY", keyDER(clientKey)),
		PeerCertFile:   write("peer.pem", "CERTIFICATE", leaf(4, "redistest peer", peerKey)),
		PeerKeyFile:    write("peer-key.pem", "PRIVATE KEY", keyDER(peerKey)),
	}
}

// Server returns the files a redis-server needs to serve TLS with the
// server certificate; with authClients it demands client certificates
// signed by the CA.
func (c Certs) Server(authClients bool) TLSFiles {
	return TLSFiles{CertFile: c.ServerCertFile, KeyFile: c.ServerKeyFile, CAFile: c.CAFile, AuthClients: authClients}
}
