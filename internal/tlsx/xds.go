package tlsx

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/settings"
)

// XDSClient returns what builds the TLS configuration of each connection
// to the xDS server, reading the files the settings name at now, or nil
// without RLS_XDS_TLS. The client certificate and the CAs are read from
// their files again when the files change, as the gRPC server's are.
func XDSClient(s settings.Settings, logger *slog.Logger, now time.Time) (func() (*tls.Config, error), error) {
	if !s.XDSTls {
		return nil, nil
	}
	var cert *reloading[*tls.Certificate]
	var roots *reloading[*x509.CertPool]
	var err error
	if s.XDSTlsCertFile != "" {
		cert, err = newReloading("xDS client TLS certificate", []envFile{
			{"RLS_XDS_TLS_CERT_FILE", s.XDSTlsCertFile},
			{"RLS_XDS_TLS_KEY_FILE", s.XDSTlsKeyFile},
		}, parseKeyPair, describeCert, logger, now)
		if err != nil {
			return nil, err
		}
	}
	if s.XDSTlsCaFile != "" {
		roots, err = newReloading("xDS server CA", []envFile{{"RLS_XDS_TLS_CA_FILE", s.XDSTlsCaFile}}, parseCAs, nil, logger, now)
		if err != nil {
			return nil, err
		}
	}
	return func() (*tls.Config, error) {
		now := time.Now()
		c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.XDSTlsServerName}
		if cert != nil {
			c.Certificates = []tls.Certificate{*cert.get(now)}
		}
		if roots != nil {
			c.RootCAs = roots.get(now)
		}
		return c, nil
	}, nil
}
