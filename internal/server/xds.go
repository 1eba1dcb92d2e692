package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/xds"
)

// newXDSClient returns the xDS client the settings ask for, or nil when the
// limits come from files. The TLS files are read now, so that a missing or
// invalid one stops the server with the variable that names it.
func newXDSClient(s settings.Settings, logger *slog.Logger, now time.Time) (*xds.Client, error) {
	if s.ConfigSource != settings.ConfigFromXDS {
		return nil, nil
	}
	tlsConfig, err := newXDSTLS(s, logger, now)
	if err != nil {
		return nil, err
	}
	cfg := s.ConfigOptions()
	cfg.DefaultAlgorithm = s.XDSDefaultAlgorithm
	c, err := xds.New(xds.Options{
		ServerURL:       s.XDSServerURL,
		NodeID:          s.XDSNodeID,
		NodeMetadata:    s.XDSNodeMetadata,
		Headers:         s.XDSHeaders,
		TLS:             tlsConfig,
		Backoff:         s.XDSBackoff(),
		MaxMessageBytes: s.XDSMaxMessageBytes,
		Config:          cfg,
		Logger:          logger,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return c, nil
}

// newXDSTLS returns what builds the TLS configuration of each connection to
// the xDS server, or nil without RLS_XDS_TLS. The client certificate and the
// CAs are read from their files again when the files change, as the gRPC
// server's are.
func newXDSTLS(s settings.Settings, logger *slog.Logger, now time.Time) (func() (*tls.Config, error), error) {
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
