package settings

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Validate checks what the types of the settings cannot: ranges, and the
// settings that go together; the options they set of the service and the
// layers, by those packages' own Validate. Its errors name the variables at
// fault. Load returns only Settings that Validate accepts.
func (s Settings) Validate() error {
	if s.GRPCAddr == "" {
		return fmt.Errorf("server: RLS_GRPC_ADDR must not be empty")
	}
	if s.RedisPipelinesPerCPU < 1 {
		return fmt.Errorf("server: RLS_REDIS_PIPELINES_PER_CPU must be at least 1, not %d", s.RedisPipelinesPerCPU)
	}
	if s.Backend == BackendRedis {
		if err := s.RedisOptions().Validate(); err != nil {
			return fmt.Errorf("server: RLS_REDIS_*: %w", err)
		}
		if strings.ContainsAny(s.KeyPrefix, "{}") {
			return fmt.Errorf("server: RLS_KEY_PREFIX %q must not contain '{' or '}'", s.KeyPrefix)
		}
	}
	// The service takes a BackendTimeout of 0 for no deadline at all (the
	// memory backend's); the variable asks for one.
	if s.BackendTimeout <= 0 {
		return fmt.Errorf("server: RLS_BACKEND_TIMEOUT must be positive, not %s", s.BackendTimeout)
	}
	if s.BackendHealthInterval <= 0 || s.BackendHealthTimeout <= 0 {
		return fmt.Errorf("server: RLS_BACKEND_HEALTH_INTERVAL and RLS_BACKEND_HEALTH_TIMEOUT must be positive")
	}
	if s.ShutdownDelay < 0 || s.ShutdownTimeout < 0 {
		return fmt.Errorf("server: RLS_SHUTDOWN_DELAY and RLS_SHUTDOWN_TIMEOUT must not be negative")
	}
	if err := s.validateConnBounds(); err != nil {
		return err
	}
	if (s.HTTPTlsCertFile == "") != (s.HTTPTlsKeyFile == "") {
		return fmt.Errorf("server: RLS_HTTP_TLS_CERT_FILE and RLS_HTTP_TLS_KEY_FILE go together: set both or neither")
	}
	if s.HTTPTlsClientCaFile != "" && s.HTTPTlsCertFile == "" {
		return fmt.Errorf("server: RLS_HTTP_TLS_CLIENT_CA_FILE needs RLS_HTTP_TLS_CERT_FILE and RLS_HTTP_TLS_KEY_FILE")
	}
	// The loader takes 0 for no bound on the files and on their read, and
	// a negative poll interval for none; the variables ask for a bound, and
	// say 0s for no polling.
	if s.ConfigMaxBytes < 1 {
		return fmt.Errorf("server: RLS_CONFIG_MAX_BYTES must be at least 1, not %d", s.ConfigMaxBytes)
	}
	if s.ConfigReadTimeout <= 0 {
		return fmt.Errorf("server: RLS_CONFIG_READ_TIMEOUT must be positive, not %s", s.ConfigReadTimeout)
	}
	if s.ConfigPollInterval < 0 {
		return fmt.Errorf("server: RLS_CONFIG_POLL_INTERVAL must not be negative, not %s", s.ConfigPollInterval)
	}
	if err := s.validateXDS(); err != nil {
		return err
	}
	if err := s.validateOptions(); err != nil {
		return err
	}
	if (s.GRPCTlsCertFile == "") != (s.GRPCTlsKeyFile == "") {
		return fmt.Errorf("server: RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE go together: set both or neither")
	}
	if s.GRPCTlsClientCaFile != "" && s.GRPCTlsCertFile == "" {
		return fmt.Errorf("server: RLS_GRPC_TLS_CLIENT_CA_FILE needs RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE")
	}
	if s.GRPCTlsClientSan != "" && s.GRPCTlsClientCaFile == "" {
		return fmt.Errorf("server: RLS_GRPC_TLS_CLIENT_SAN needs RLS_GRPC_TLS_CLIENT_CA_FILE: without mutual TLS there is no client certificate to check")
	}
	if err := s.validateAdditions(); err != nil {
		return err
	}
	return nil
}

// validateConnBounds checks the bounds on connections, streams and reads.
func (s Settings) validateConnBounds() error {
	for _, d := range []struct {
		env string
		v   time.Duration
	}{
		{"RLS_HTTP_READ_TIMEOUT", s.HTTPReadTimeout},
		{"RLS_HTTP_WRITE_TIMEOUT", s.HTTPWriteTimeout},
		{"RLS_HTTP_IDLE_TIMEOUT", s.HTTPIdleTimeout},
		{"RLS_GRPC_READ_TIMEOUT", s.GRPCReadTimeout},
		{"RLS_GRPC_KEEPALIVE_MIN_TIME", s.GRPCKeepaliveMinTime},
		{"RLS_GRPC_KEEPALIVE_TIME", s.GRPCKeepaliveTime},
		{"RLS_GRPC_KEEPALIVE_TIMEOUT", s.GRPCKeepaliveTimeout},
	} {
		if d.v <= 0 {
			return fmt.Errorf("server: %s must be positive, not %s", d.env, d.v)
		}
	}
	if s.GRPCMaxConnectionIdle < 0 || s.GRPCMaxConnectionAge < 0 {
		return fmt.Errorf("server: RLS_GRPC_MAX_CONNECTION_IDLE and RLS_GRPC_MAX_CONNECTION_AGE must not be negative")
	}
	if s.HTTPMaxHeaderBytes < 1024 {
		return fmt.Errorf("server: RLS_HTTP_MAX_HEADER_BYTES must be at least 1024, not %d", s.HTTPMaxHeaderBytes)
	}
	if s.HTTPMaxConnections < 1 {
		return fmt.Errorf("server: RLS_HTTP_MAX_CONNECTIONS must be at least 1, not %d", s.HTTPMaxConnections)
	}
	if s.HTTPProbeConnections < 0 {
		return fmt.Errorf("server: RLS_HTTP_PROBE_CONNECTIONS must not be negative, not %d", s.HTTPProbeConnections)
	}
	if s.GRPCMaxConnections < 1 {
		return fmt.Errorf("server: RLS_GRPC_MAX_CONNECTIONS must be at least 1, not %d", s.GRPCMaxConnections)
	}
	if s.GRPCMaxCalls < 1 {
		return fmt.Errorf("server: RLS_GRPC_MAX_CALLS must be at least 1, not %d", s.GRPCMaxCalls)
	}
	if s.GRPCMaxConcurrentStreams < 1 {
		return fmt.Errorf("server: RLS_GRPC_MAX_CONCURRENT_STREAMS must be at least 1, not %d", s.GRPCMaxConcurrentStreams)
	}
	return nil
}

// headerName is what gRPC accepts as a metadata key (lower-cased first).
var headerName = regexp.MustCompile(`^[0-9a-z_.-]+$`)

// validateXDS checks the RLS_XDS_* settings.
func (s Settings) validateXDS() error {
	if s.ConfigSource == ConfigFromXDS {
		if s.XDSServerURL == "" {
			return fmt.Errorf("server: RLS_XDS_SERVER_URL must not be empty with RLS_CONFIG_SOURCE=xds")
		}
		if s.XDSNodeID == "" {
			return fmt.Errorf("server: RLS_XDS_NODE_ID must not be empty with RLS_CONFIG_SOURCE=xds")
		}
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
	if s.XDSMaxMessageBytes <= 0 {
		return fmt.Errorf("server: RLS_XDS_MAX_MESSAGE_BYTES must be positive, not %d", s.XDSMaxMessageBytes)
	}
	return nil
}

// validateAdditions checks the settings of the limit headers and the
// metrics listener.
func (s Settings) validateAdditions() error {
	if s.LimitHeaders {
		for _, h := range []struct{ env, name string }{
			{"RLS_LIMIT_HEADER_LIMIT", s.LimitHeaderLimit},
			{"RLS_LIMIT_HEADER_REMAINING", s.LimitHeaderRemaining},
			{"RLS_LIMIT_HEADER_RESET", s.LimitHeaderReset},
		} {
			if !httpguts.ValidHeaderFieldName(h.name) {
				return fmt.Errorf("server: %s %q is not a valid header name", h.env, h.name)
			}
		}
	}
	if s.MetricsAddr != "" && !strings.HasPrefix(s.MetricsPath, "/") {
		return fmt.Errorf("server: RLS_METRICS_PATH %q must start with /", s.MetricsPath)
	}
	return nil
}
