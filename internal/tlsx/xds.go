package tlsx

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"time"
)

// ClientFiles names the files of the xDS client's TLS: its certificate and
// key (none for a client that presents none), and the CAs the server's
// certificate must chain to (none for the host's), with the name to verify
// it by (none for the server's address).
type ClientFiles struct {
	Cert, Key, CA File
	ServerName    string
}

// XDSClient returns what builds the TLS configuration of each connection
// to the xDS server, reading the files f names at now, or nil when f is
// nil (no TLS). The client certificate and the CAs are read from their
// files again when the files change, as the gRPC server's are.
func XDSClient(f *ClientFiles, logger *slog.Logger, now time.Time) (func() (*tls.Config, error), error) {
	if f == nil {
		return nil, nil
	}
	var cert *reloading[*tls.Certificate]
	var roots *reloading[*x509.CertPool]
	var err error
	if f.Cert.Path != "" {
		cert, err = newReloading("xDS client TLS certificate", []File{f.Cert, f.Key}, parseKeyPair, describeCert, logger, now)
		if err != nil {
			return nil, err
		}
	}
	if f.CA.Path != "" {
		roots, err = newReloading("xDS server CA", []File{f.CA}, parseCAs, nil, logger, now)
		if err != nil {
			return nil, err
		}
	}
	return func() (*tls.Config, error) {
		now := time.Now()
		c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
		if cert != nil {
			c.Certificates = []tls.Certificate{*cert.get(now)}
		}
		if roots != nil {
			c.RootCAs = roots.get(now)
		}
		return c, nil
	}, nil
}
