// Package tlsx is the TLS of ratewarden's servers and of its xDS client:
// certificates and CAs read from the files the settings name
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

	"github.com/ratewarden/ratewarden/internal/settings"
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

// tlsSettings names the files of one server's TLS, each with its variable.
type tlsSettings struct {
	what                string // "gRPC" or "HTTP"
	cert, key, clientCA envFile
	nextProtos          []string
	clientAuth          tls.ClientAuthType
}

// GRPC reads the gRPC TLS files the settings name at now, or returns nil
// when they name none. With mutual TLS every client must present a
// certificate. Its errors name the variable at fault.
func GRPC(s settings.Settings, logger *slog.Logger, now time.Time) (*Server, error) {
	return newServer(tlsSettings{
		what:       "gRPC",
		cert:       envFile{"RLS_GRPC_TLS_CERT_FILE", s.GRPCTlsCertFile},
		key:        envFile{"RLS_GRPC_TLS_KEY_FILE", s.GRPCTlsKeyFile},
		clientCA:   envFile{"RLS_GRPC_TLS_CLIENT_CA_FILE", s.GRPCTlsClientCaFile},
		nextProtos: []string{"h2"},
		clientAuth: tls.RequireAndVerifyClientCert,
	}, logger, now)
}

// HTTP reads the HTTP TLS files the settings name at now, or returns nil
// when they name none. With mutual TLS a client certificate is verified
// when one is presented, and the handler decides which paths need one
// (RequireClientCert): the probes cannot present any.
func HTTP(s settings.Settings, logger *slog.Logger, now time.Time) (*Server, error) {
	return newServer(tlsSettings{
		what:       "HTTP",
		cert:       envFile{"RLS_HTTP_TLS_CERT_FILE", s.HTTPTlsCertFile},
		key:        envFile{"RLS_HTTP_TLS_KEY_FILE", s.HTTPTlsKeyFile},
		clientCA:   envFile{"RLS_HTTP_TLS_CLIENT_CA_FILE", s.HTTPTlsClientCaFile},
		nextProtos: []string{"h2", "http/1.1"},
		clientAuth: tls.VerifyClientCertIfGiven,
	}, logger, now)
}

// newServer reads the files ts names, or returns nil when it names no
// certificate.
func newServer(ts tlsSettings, logger *slog.Logger, now time.Time) (*Server, error) {
	if ts.cert.path == "" {
		return nil, nil
	}
	t := Server{nextProtos: ts.nextProtos, clientAuth: ts.clientAuth}
	var err error
	t.cert, err = newReloading(ts.what+" TLS certificate", []envFile{ts.cert, ts.key}, parseKeyPair, describeCert, logger, now)
	if err != nil {
		return nil, err
	}
	if ts.clientCA.path != "" {
		t.clientCAs, err = newReloading(ts.what+" TLS client CA", []envFile{ts.clientCA}, parseCAs, nil, logger, now)
		if err != nil {
			return nil, err
		}
	}
	leaf := t.cert.get(now).Leaf
	logger.Info(ts.what+" serves TLS", "cert_file", ts.cert.path, "client_ca_file", ts.clientCA.path,
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
