package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/tlsx"
	"github.com/ratewarden/ratewarden/internal/xds"
)

// newXDSClient returns the xDS client the settings ask for, or nil when the
// limits come from files. The TLS files are read now, so that a missing or
// invalid one stops the server with the variable that names it.
func newXDSClient(s settings.Settings, logger *slog.Logger, now time.Time) (*xds.Client, error) {
	if s.ConfigSource != settings.ConfigFromXDS {
		return nil, nil
	}
	tlsConfig, err := tlsx.XDSClient(s.XDSTLS(), logger, now)
	if err != nil {
		return nil, err
	}
	cfg := s.XDSConfigOptions()
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
