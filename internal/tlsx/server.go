// Package tlsx is the TLS of ratewarden's servers and of its xDS client:
// certificates and CAs read from the files the settings name (ServerFiles,
// ClientFiles)
// (RLS_GRPC_TLS_*, RLS_HTTP_TLS_*, RLS_XDS_TLS_*) and read again when the
// files change, so that a rotated certificate is used from the next
// handshake on without a restart; and the checks of client certificates
// beyond the handshake's: a name (RLS_GRPC_TLS_CLIENT_SAN), and a
// certificate for every HTTP path but the probes'.
//
// Its errors name the variable at fault and begin with "server: ", as the
// settings' do: it is the name operators know these messages by.
package tlsx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"time"
)

// Server is the TLS of a server, gRPC's or HTTP's: its certificate and,
// for mutual TLS, the CAs that client certificates must chain to. Both are
// read from their files again when the files change, so a rotated
// certificate (by cert-manager, say) is served from the next handshake on
// without a restart. It is safe for concurrent use; a nil Server is no
// TLS.
type Server struct {
	cert       *reloading[*tls.Certificate]
	clientCAs  *reloading[*x509.CertPool] // nil without mutual TLS
	nextProtos []string
	// clientAuth is how client certificates are asked for with mutual TLS.
	clientAuth tls.ClientAuthType
}

// ServerFiles names the files of a server's TLS: its certificate and key,
// and for mutual TLS the CAs client certificates must chain to. No
// certificate is no TLS.
type ServerFiles struct{ Cert, Key, ClientCA File }

// tlsSettings names the files of one server's TLS and how it is served.
type tlsSettings struct {
	what       string // "gRPC" or "HTTP"
	files      ServerFiles
	nextProtos []string
	clientAuth tls.ClientAuthType
}

// GRPC reads the gRPC server's TLS files at now, or returns nil when they
// name no certificate. With mutual TLS every client must present a
// certificate. Its errors name the variable at fault.
func GRPC(files ServerFiles, logger *slog.Logger, now time.Time) (*Server, error) {
	return newServer(tlsSettings{what: "gRPC", files: files, nextProtos: []string{"h2"},
		clientAuth: tls.RequireAndVerifyClientCert}, logger, now)
}

// HTTP reads the HTTP server's TLS files at now, or returns nil when they
// name no certificate. With mutual TLS a client certificate is verified
// when one is presented, and the handler decides which paths need one
// (RequireClientCert): the probes cannot present any.
func HTTP(files ServerFiles, logger *slog.Logger, now time.Time) (*Server, error) {
	return newServer(tlsSettings{what: "HTTP", files: files, nextProtos: []string{"h2", "http/1.1"},
		clientAuth: tls.VerifyClientCertIfGiven}, logger, now)
}

// newServer reads the files ts names, or returns nil when it names no
// certificate.
func newServer(ts tlsSettings, logger *slog.Logger, now time.Time) (*Server, error) {
	f := ts.files
	if f.Cert.Path == "" {
		return nil, nil
	}
	t := Server{nextProtos: ts.nextProtos, clientAuth: ts.clientAuth}
	var err error
	t.cert, err = newReloading(ts.what+" TLS certificate", []File{f.Cert, f.Key}, parseKeyPair, describeCert, logger, now)
	if err != nil {
		return nil, err
	}
	if f.ClientCA.Path != "" {
		t.clientCAs, err = newReloading(ts.what+" TLS client CA", []File{f.ClientCA}, parseCAs, nil, logger, now)
		if err != nil {
			return nil, err
		}
	}
	leaf := t.cert.get(now).Leaf
	logger.Info(ts.what+" serves TLS", "cert_file", f.Cert.Path, "client_ca_file", f.ClientCA.Path,
		"subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(), "not_after", leaf.NotAfter)
	return &t, nil
}

// Mutual reports whether client certificates are verified: false for a nil
// Server.
func (t *Server) Mutual() bool { return t != nil && t.clientCAs != nil }

// Config returns the server's tls.Config: TLS 1.2 or later, with the
// current certificate and, for mutual TLS, client certificates asked for
// and verified against the current CAs. Each call returns a new Config.
func (t *Server) Config() *tls.Config {
	getCertificate := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return t.cert.get(time.Now()), nil
	}
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     t.nextProtos,
		GetCertificate: getCertificate,
	}
	if t.clientCAs != nil {
		c.ClientAuth = t.clientAuth
		c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				MinVersion:     tls.VersionTLS12,
				NextProtos:     t.nextProtos,
				GetCertificate: getCertificate,
				ClientAuth:     t.clientAuth,
				ClientCAs:      t.clientCAs.get(time.Now()),
			}, nil
		}
	}
	return c
}

// parseKeyPair parses a PEM certificate chain and its private key.
func parseKeyPair(data [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

func describeCert(c *tls.Certificate) []any {
	return []any{"subject", c.Leaf.Subject.String(), "serial", c.Leaf.SerialNumber.String(), "not_after", c.Leaf.NotAfter}
}

// parseCAs parses PEM CA certificates.
func parseCAs(data [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[0]) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}
