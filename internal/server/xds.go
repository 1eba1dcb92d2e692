package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratewarden/ratewarden/internal/xds"
)

// configFromXDS reports whether RLS_CONFIG_SOURCE asks for limits from an
// xDS server.
func (s Settings) configFromXDS() bool {
	src := strings.ToLower(s.ConfigSource)
	return src == "xds" || src == "grpc_xds_sotw"
}

// headerName is what gRPC accepts as a metadata key (lower-cased first).
var headerName = regexp.MustCompile(`^[0-9a-z_.-]+$`)

// validateXDS checks RLS_CONFIG_SOURCE and the RLS_XDS_* settings.
func (s Settings) validateXDS() error {
	switch strings.ToLower(s.ConfigSource) {
	case "file", "xds", "grpc_xds_sotw":
	default:
		return fmt.Errorf("server: RLS_CONFIG_SOURCE %q is not file or xds", s.ConfigSource)
	}
	if s.configFromXDS() {
		if s.XDSServerURL == "" {
			return fmt.Errorf("server: RLS_XDS_SERVER_URL must not be empty with RLS_CONFIG_SOURCE=xds")
		}
		if s.XDSNodeID == "" {
			return fmt.Errorf("server: RLS_XDS_NODE_ID must not be empty with RLS_CONFIG_SOURCE=xds")
		}
	}
	if _, err := parseNodeMetadata(s.XDSNodeMetadata); err != nil {
		return err
	}
	for k, v := range s.XDSHeaders {
		name := strings.ToLower(k)
		if !headerName.MatchString(name) || strings.HasPrefix(name, "grpc-") {
			return fmt.Errorf("server: RLS_XDS_HEADERS: %q is not a header name gRPC can send", k)
		}
		if strings.HasSuffix(name, "-bin") {
			continue
		}
		for _, c := range v {
			if c < 0x20 || c > 0x7e {
				return fmt.Errorf("server: RLS_XDS_HEADERS: the value of %q must be printable ASCII", k)
			}
		}
	}
	if (s.XDSTlsCertFile == "") != (s.XDSTlsKeyFile == "") {
		return fmt.Errorf("server: RLS_XDS_TLS_CERT_FILE and RLS_XDS_TLS_KEY_FILE go together: set both or neither")
	}
	if !s.XDSTls && (s.XDSTlsCertFile != "" || s.XDSTlsCaFile != "" || s.XDSTlsServerName != "") {
		return fmt.Errorf("server: RLS_XDS_TLS_CERT_FILE, RLS_XDS_TLS_CA_FILE and RLS_XDS_TLS_SERVER_NAME need RLS_XDS_TLS=true")
	}
	if err := s.xdsBackoff().Validate(); err != nil {
		return fmt.Errorf("server: RLS_XDS_BACKOFF_*: %w", err)
	}
	if s.XDSMaxMessageBytes <= 0 {
		return fmt.Errorf("server: RLS_XDS_MAX_MESSAGE_BYTES must be positive, not %d", s.XDSMaxMessageBytes)
	}
	return nil
}

func (s Settings) xdsBackoff() xds.Backoff {
	return xds.Backoff{
		Initial:      s.XDSBackoffInitialInterval,
		Max:          s.XDSBackoffMaxInterval,
		RandomFactor: s.XDSBackoffRandomFactor,
		Jitter:       s.XDSBackoffJitter,
	}
}

// parseNodeMetadata reads RLS_XDS_NODE_METADATA: key=value pairs separated
// by commas, as envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_METADATA.
func parseNodeMetadata(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	m := make(map[string]string)
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("server: RLS_XDS_NODE_METADATA: %q is not key=value", pair)
		}
		m[k] = v
	}
	return m, nil
}

// newXDSClient returns the xDS client the RLS_XDS_* settings ask for. The
// TLS files are read now, so that a missing or invalid one stops the server
// with the variable that names it.
func newXDSClient(s Settings, logger *slog.Logger, now time.Time) (*xds.Client, error) {
	tlsConfig, err := newXDSTLS(s, logger, now)
	if err != nil {
		return nil, err
	}
	metadata, _ := parseNodeMetadata(s.XDSNodeMetadata)
	cfg := s.ConfigOptions()
	cfg.DefaultAlgorithm = s.XDSDefaultAlgorithm
	c, err := xds.New(xds.Options{
		ServerURL:       s.XDSServerURL,
		NodeID:          s.XDSNodeID,
		NodeMetadata:    metadata,
		Headers:         s.XDSHeaders,
		TLS:             tlsConfig,
		Backoff:         s.xdsBackoff(),
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
func newXDSTLS(s Settings, logger *slog.Logger, now time.Time) (func() (*tls.Config, error), error) {
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

// xdsConnected is the gauge that tells whether c is connected to the xDS
// server.
func xdsConnected(c *xds.Client) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ratewarden_xds_connected",
		Help: "1 while the stream to the xDS management server is open and has answered, else 0.",
	}, func() float64 {
		if c.Connected() {
			return 1
		}
		return 0
	})
}
