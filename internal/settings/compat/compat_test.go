package compat_test

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/settings/compat"
)

// The tests of this file load the settings of an environment as the server
// does, with settings.Load, which applies envoyproxy/ratelimit's variables
// through compat.Apply.

// lookupIn returns a lookup function that finds the variables of env.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// defaultSettings returns the Settings of an environment without
// variables.
func defaultSettings(t *testing.T) settings.Settings {
	t.Helper()
	s, err := settings.Load(lookupIn(nil))
	require.NoError(t, err)
	return s
}

// convert loads the settings of env, with envoyproxy/ratelimit's variables
// applied to the defaults, and returns what became of them.
func convert(t *testing.T, env map[string]string) (settings.Settings, *compat.Report, error) {
	t.Helper()
	s, err := settings.Load(lookupIn(env))
	return s, s.Compat(), err
}

// fields returns the fields of s that variables set, by name: all but what
// became of envoyproxy/ratelimit's variables, which Compat returns.
func fields(s settings.Settings) map[string]any {
	v := reflect.ValueOf(s)
	m := map[string]any{}
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() {
			m[f.Name] = v.Field(i).Interface()
		}
	}
	return m
}

// samplingRate returns the sampling rate that text sets.
func samplingRate(t *testing.T, text string) settings.SamplingRate {
	t.Helper()
	var r settings.SamplingRate
	require.NoError(t, r.UnmarshalText([]byte(text)))
	return r
}

// ignoredNames returns every variable the report says was ignored.
func ignoredNames(r *compat.Report) []string {
	var names []string
	for _, n := range r.Ignored {
		names = append(names, n.Theirs...)
	}
	return names
}

func builtInNames(r *compat.Report) []string {
	var names []string
	for _, n := range r.BuiltIn {
		names = append(names, n.Theirs...)
	}
	return names
}

func TestCompatEnvNothingSetChangesNothing(t *testing.T) {
	t.Parallel()
	s, report, err := convert(t, nil)
	require.NoError(t, err)
	assert.Equal(t, fields(settings.Default()), fields(s))
	assert.Equal(t, &compat.Report{}, report)
}

// TestCompatEnvVariables converts each of envoyproxy/ratelimit's variables.
func TestCompatEnvVariables(t *testing.T) {
	t.Parallel()
	half := samplingRate(t, "0.5")
	for _, c := range []struct {
		name    string
		env     map[string]string
		want    func(*settings.Settings)
		ignored []string
		builtIn []string
	}{
		{name: "PORT alone", env: map[string]string{"PORT": "9000"}, want: func(s *settings.Settings) { s.HTTPAddr = ":9000" }},
		{name: "HOST alone takes port 8080", env: map[string]string{"HOST": "::"}, want: func(s *settings.Settings) { s.HTTPAddr = "[::]:8080" }},
		{name: "HOST and PORT", env: map[string]string{"HOST": "0.0.0.0", "PORT": "80"}, want: func(s *settings.Settings) { s.HTTPAddr = "0.0.0.0:80" }},
		{name: "GRPC_HOST alone takes port 8081", env: map[string]string{"GRPC_HOST": "::"}, want: func(s *settings.Settings) { s.GRPCAddr = "[::]:8081" }},
		{name: "GRPC_PORT", env: map[string]string{"GRPC_PORT": "9081"}, want: func(s *settings.Settings) { s.GRPCAddr = ":9081" }},
		{name: "DEBUG_PORT", env: map[string]string{"DEBUG_PORT": "6071"}, want: func(s *settings.Settings) { s.DebugAddr = ":6071" }},
		{name: "DEBUG_HOST alone takes port 6070", env: map[string]string{"DEBUG_HOST": "127.0.0.1"}, want: func(s *settings.Settings) { s.DebugAddr = "127.0.0.1:6070" }},
		{
			name: "gRPC TLS",
			env:  map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key"},
			want: func(s *settings.Settings) { s.GRPCTlsCertFile, s.GRPCTlsKeyFile = "/certs/tls.crt", "/certs/tls.key" },
		},
		{
			name: "gRPC mutual TLS",
			env:  map[string]string{"GRPC_SERVER_USE_TLS": "1", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k", "GRPC_CLIENT_TLS_CACERT": "ca"},
			want: func(s *settings.Settings) {
				s.GRPCTlsCertFile, s.GRPCTlsKeyFile, s.GRPCTlsClientCaFile = "c", "k", "ca"
			},
		},
		{
			name: "gRPC mutual TLS with a client name",
			env:  map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k", "GRPC_CLIENT_TLS_CACERT": "ca", "GRPC_CLIENT_TLS_SAN": "envoy"},
			want: func(s *settings.Settings) {
				s.GRPCTlsCertFile, s.GRPCTlsKeyFile, s.GRPCTlsClientCaFile, s.GRPCTlsClientSan = "c", "k", "ca", "envoy"
			},
		},
		{
			name:    "a client name without a client CA",
			env:     map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k", "GRPC_CLIENT_TLS_SAN": "envoy"},
			want:    func(s *settings.Settings) { s.GRPCTlsCertFile, s.GRPCTlsKeyFile = "c", "k" },
			ignored: []string{"GRPC_CLIENT_TLS_SAN"},
		},
		{
			name:    "a client name without TLS",
			env:     map[string]string{"GRPC_CLIENT_TLS_SAN": "envoy"},
			ignored: []string{"GRPC_CLIENT_TLS_SAN"},
		},
		{
			name:    "gRPC TLS files without GRPC_SERVER_USE_TLS",
			env:     map[string]string{"GRPC_SERVER_TLS_CERT": "c", "GRPC_SERVER_TLS_KEY": "k"},
			ignored: []string{"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY"},
		},
		{name: "GRPC_MAX_CONNECTION_AGE", env: map[string]string{"GRPC_MAX_CONNECTION_AGE": "1h"}, ignored: []string{"GRPC_MAX_CONNECTION_AGE"}},
		{name: "LOG_LEVEL WARN", env: map[string]string{"LOG_LEVEL": "WARN"}, want: func(s *settings.Settings) { s.LogLevel = settings.LogLevel(slog.LevelWarn) }},
		{name: "LOG_LEVEL warning", env: map[string]string{"LOG_LEVEL": "warning"}, want: func(s *settings.Settings) { s.LogLevel = settings.LogLevel(slog.LevelWarn) }},
		{name: "LOG_LEVEL trace", env: map[string]string{"LOG_LEVEL": "trace"}, want: func(s *settings.Settings) { s.LogLevel = settings.LogLevel(slog.LevelDebug) }},
		{name: "LOG_LEVEL Fatal", env: map[string]string{"LOG_LEVEL": "Fatal"}, want: func(s *settings.Settings) { s.LogLevel = settings.LogLevel(slog.LevelError) }},
		{name: "LOG_LEVEL info", env: map[string]string{"LOG_LEVEL": "info"}, want: func(s *settings.Settings) { s.LogLevel = settings.LogLevel(slog.LevelInfo) }},
		{name: "LOG_FORMAT json", env: map[string]string{"LOG_FORMAT": "JSON"}, want: func(s *settings.Settings) { s.LogFormat = settings.LogJSON }},
		{name: "LOG_FORMAT other", env: map[string]string{"LOG_FORMAT": "logfmt"}, want: func(s *settings.Settings) { s.LogFormat = settings.LogText }},
		{
			name: "Istio's runtime directories",
			env:  map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_WATCH_ROOT": "false", "RUNTIME_IGNOREDOTFILES": "true"},
			want: func(s *settings.Settings) { s.ConfigPath, s.ConfigDotFiles = "/data/ratelimit/config", false }, builtIn: []string{"RUNTIME_WATCH_ROOT"},
		},
		{
			name: "RUNTIME_SUBDIRECTORY under the default root",
			env:  map[string]string{"RUNTIME_SUBDIRECTORY": "rl"},
			want: func(s *settings.Settings) { s.ConfigPath = "/srv/runtime_data/current/rl/config" },
		},
		{
			name: "RUNTIME_APPDIRECTORY",
			env:  map[string]string{"RUNTIME_ROOT": "/etc/rl", "RUNTIME_APPDIRECTORY": "limits"},
			want: func(s *settings.Settings) { s.ConfigPath = "/etc/rl/limits" },
		},
		{name: "dot files skipped", env: map[string]string{"RUNTIME_IGNOREDOTFILES": "true"}, want: func(s *settings.Settings) { s.ConfigDotFiles = false }},
		{name: "dot files asked for stay skipped", env: map[string]string{"RUNTIME_IGNOREDOTFILES": "false"}, ignored: []string{"RUNTIME_IGNOREDOTFILES"}},
		{name: "CONFIG_TYPE FILE", env: map[string]string{"CONFIG_TYPE": "FILE"}, want: func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromFiles }},
		{name: "CONFIG_TYPE GRPC_XDS_SOTW", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}, want: func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS }},
		{
			name: "xDS as Envoy Gateway sets it",
			env: map[string]string{
				"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
				"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt",
				"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt",
			},
			want: func(s *settings.Settings) {
				s.ConfigSource, s.XDSServerURL, s.XDSNodeID = settings.ConfigFromXDS, "envoy-gateway:18001", "envoy-ratelimit"
				s.XDSTls, s.XDSTlsCertFile, s.XDSTlsKeyFile, s.XDSTlsCaFile = true, "/certs/tls.crt", "/certs/tls.key", "/certs/ca.crt"
			},
		},
		{
			name: "xDS server name",
			env:  map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "1", "CONFIG_GRPC_XDS_SERVER_TLS_SAN": "envoy-gateway.envoy-gateway-system"},
			want: func(s *settings.Settings) {
				s.ConfigSource, s.XDSTls, s.XDSTlsServerName = settings.ConfigFromXDS, true, "envoy-gateway.envoy-gateway-system"
			},
		},
		{
			name:    "xDS TLS files without CONFIG_GRPC_XDS_SERVER_USE_TLS",
			env:     map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "c", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "ca"},
			want:    func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS },
			ignored: []string{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"},
		},
		{
			name: "xDS node metadata, parsed as envoyproxy/ratelimit parses it",
			env:  map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "cluster=eg,zone:us-east,,=x,role=rate=limit"},
			want: func(s *settings.Settings) {
				s.ConfigSource, s.XDSNodeMetadata = settings.ConfigFromXDS, settings.NodeMetadata{"cluster": "eg", "role": "rate=limit"}
			},
			ignored: []string{"CONFIG_GRPC_XDS_NODE_METADATA"},
		},
		{
			name: "xDS headers",
			env:  map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "authorization:Bearer t0k3n,x-team:edge"},
			want: func(s *settings.Settings) {
				s.ConfigSource, s.XDSHeaders = settings.ConfigFromXDS, map[string]string{"authorization": "Bearer t0k3n", "x-team": "edge"}
			},
		},
		{
			name: "xDS backoff",
			env: map[string]string{
				"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "10s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "1m",
				"XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "0.2", "XDS_CLIENT_BACKOFF_JITTER": "false",
			},
			want: func(s *settings.Settings) {
				s.ConfigSource, s.XDSBackoffInitialInterval, s.XDSBackoffMaxInterval = settings.ConfigFromXDS, 10*time.Second, time.Minute
				s.XDSBackoffRandomFactor, s.XDSBackoffJitter = 0.2, false
			},
		},
		{
			name:    "xDS backoff factor that multiplies",
			env:     map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "2"},
			want:    func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS },
			ignored: []string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR"},
		},
		{
			name: "xDS largest message",
			env:  map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "16777216"},
			want: func(s *settings.Settings) { s.ConfigSource, s.XDSMaxMessageBytes = settings.ConfigFromXDS, 16<<20 },
		},
		{
			name:    "xDS largest message 0 is gRPC's default",
			env:     map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "0"},
			want:    func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS },
			builtIn: []string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"},
		},
		{
			name:    "xDS connect retry interval",
			env:     map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "3s"},
			want:    func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS },
			ignored: []string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"},
		},
		{
			name:    "xDS settings with limits from files",
			env:     map[string]string{"CONFIG_GRPC_XDS_NODE_ID": "n", "XDS_CLIENT_BACKOFF_JITTER": "true", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "1"},
			ignored: []string{"CONFIG_GRPC_XDS_NODE_ID", "XDS_CLIENT_BACKOFF_JITTER", "CONFIG_GRPC_XDS_SERVER_USE_TLS", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"},
		},
		{
			name:    "FORCE_START_WITHOUT_INITIAL_CONFIG with xDS",
			env:     map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "FORCE_START_WITHOUT_INITIAL_CONFIG": "true"},
			want:    func(s *settings.Settings) { s.ConfigSource = settings.ConfigFromXDS },
			builtIn: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"},
		},
		{name: "FORCE_START_WITHOUT_INITIAL_CONFIG with files", env: map[string]string{"FORCE_START_WITHOUT_INITIAL_CONFIG": "true"}, builtIn: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}},
		{name: "FORCE_START_WITHOUT_INITIAL_CONFIG false", env: map[string]string{"FORCE_START_WITHOUT_INITIAL_CONFIG": "false"}, builtIn: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}},
		{name: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", env: map[string]string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true"}, builtIn: []string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}},
		{name: "MERGE_DOMAIN_CONFIG", env: map[string]string{"MERGE_DOMAIN_CONFIG": "true"}, want: func(s *settings.Settings) { s.ConfigMergeDomains = true }},
		{name: "QUOTA_MODE", env: map[string]string{"QUOTA_MODE": "true"}, want: func(s *settings.Settings) { s.QuotaMode = true }},
		{name: "QUOTA_MODE false", env: map[string]string{"QUOTA_MODE": "false"}, want: func(s *settings.Settings) { s.QuotaMode = false }},
		{name: "RESPONSE_DYNAMIC_METADATA", env: map[string]string{"RESPONSE_DYNAMIC_METADATA": "true"}, want: func(s *settings.Settings) { s.ResponseDynamicMetadata = true }},
		{name: "GRPC_SERVER_TLS_CA_CERT", env: map[string]string{"GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt"}, ignored: []string{"GRPC_SERVER_TLS_CA_CERT"}},
		{
			name: "Prometheus as Envoy Gateway sets it",
			env:  map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml"},
			want: func(s *settings.Settings) {
				s.MetricsNames, s.MetricsAddr, s.MetricsPath = metrics.NamesBoth, ":19001", "/metrics"
			},
			ignored: []string{"PROMETHEUS_MAPPER_YAML"},
		},
		{
			name: "Prometheus with its defaults",
			env:  map[string]string{"USE_PROMETHEUS": "true"},
			want: func(s *settings.Settings) {
				s.MetricsNames, s.MetricsAddr, s.MetricsPath = metrics.NamesBoth, ":9090", "/metrics"
			},
		},
		{
			name: "Prometheus path", env: map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "/prom"},
			want: func(s *settings.Settings) {
				s.MetricsNames, s.MetricsAddr, s.MetricsPath = metrics.NamesBoth, ":9090", "/prom"
			},
		},
		{name: "PROMETHEUS_ADDR without USE_PROMETHEUS", env: map[string]string{"PROMETHEUS_ADDR": ":9"}, ignored: []string{"PROMETHEUS_ADDR"}},
		{name: "USE_STATSD false", env: map[string]string{"USE_STATSD": "false"}, builtIn: []string{"USE_STATSD"}},
		{name: "USE_STATSD true", env: map[string]string{"USE_STATSD": "true", "STATSD_HOST": "statsd"}, ignored: []string{"USE_STATSD", "STATSD_HOST"}},
		{name: "DISABLE_STATS", env: map[string]string{"DISABLE_STATS": "true"}, ignored: []string{"DISABLE_STATS"}},
		{name: "BACKEND_TYPE redis", env: map[string]string{"BACKEND_TYPE": "redis"}, want: func(s *settings.Settings) { s.Backend = "redis" }},
		{name: "REDIS_SOCKET_TYPE tcp", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp"}, builtIn: []string{"REDIS_SOCKET_TYPE"}},
		{name: "REDIS_SOCKET_TYPE unix without a URL", env: map[string]string{"REDIS_SOCKET_TYPE": "unix"}, ignored: []string{"REDIS_SOCKET_TYPE"}},
		{
			name: "REDIS_URL makes the backend redis",
			env:  map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeStandalone, []string{"redis:6379"}
			},
			builtIn: []string{"REDIS_SOCKET_TYPE"},
		},
		{
			name: "cluster",
			env:  map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": "n1:7000, n2:7000,n3:7000"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeCluster, []string{"n1:7000", "n2:7000", "n3:7000"}
			},
		},
		{
			name: "sentinel",
			env:  map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_SENTINEL_AUTH": "sentinel-pw"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeSentinel, []string{"s1:26379", "s2:26379"}
				s.Redis.SentinelMaster, s.Redis.SentinelPassword = "mymaster", "sentinel-pw"
			},
		},
		{
			name: "a redis:// URL with user, password and database",
			env:  map[string]string{"REDIS_URL": "redis://app:s3cret@redis.example:6380/2"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeStandalone, []string{"redis.example:6380"}
				s.Redis.Username, s.Redis.Password, s.Redis.DB = "app", "s3cret", 2
			},
		},
		{
			name: "a rediss:// URL with a password alone",
			env:  map[string]string{"REDIS_URL": "rediss://:s3cret@redis.example:6380"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeStandalone, []string{"redis.example:6380"}
				s.Redis.Password, s.Redis.TLS = "s3cret", true
			},
		},
		{
			name: "REDIS_AUTH wins over the URL's password",
			env:  map[string]string{"REDIS_URL": "redis://:old@r:6379", "REDIS_AUTH": "user:new"},
			want: func(s *settings.Settings) {
				s.Backend, s.Redis.Mode, s.Redis.Addrs = "redis", redisx.ModeStandalone, []string{"r:6379"}
				s.Redis.Username, s.Redis.Password = "user", "new"
			},
		},
		{name: "REDIS_AUTH password", env: map[string]string{"REDIS_AUTH": "pw"}, want: func(s *settings.Settings) { s.Redis.Password = "pw" }},
		{name: "REDIS_AUTH user:password", env: map[string]string{"REDIS_AUTH": "u:p:w"}, want: func(s *settings.Settings) { s.Redis.Username, s.Redis.Password = "u", "p:w" }},
		{
			name: "REDIS_TLS with files",
			env:  map[string]string{"REDIS_TLS": "true", "REDIS_TLS_CACERT": "ca.pem", "REDIS_TLS_CLIENT_CERT": "c.pem", "REDIS_TLS_CLIENT_KEY": "k.pem"},
			want: func(s *settings.Settings) {
				s.Redis.TLS, s.Redis.TLSCaFile, s.Redis.TLSCertFile, s.Redis.TLSKeyFile = true, "ca.pem", "c.pem", "k.pem"
			},
		},
		{name: "REDIS_TLS files without REDIS_TLS", env: map[string]string{"REDIS_TLS_CACERT": "ca.pem"}, ignored: []string{"REDIS_TLS_CACERT"}},
		{
			name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", env: map[string]string{"REDIS_TLS": "true", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"},
			want: func(s *settings.Settings) { s.Redis.TLS, s.Redis.TLSSkipHostnameVerify = true, true },
		},
		{
			name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION without REDIS_TLS", env: map[string]string{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"},
			ignored: []string{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"},
		},
		{name: "REDIS_POOL_SIZE", env: map[string]string{"REDIS_POOL_SIZE": "20"}, want: func(s *settings.Settings) { s.Redis.PoolSize = 20 }},
		{name: "pipelining", env: map[string]string{"REDIS_PIPELINE_WINDOW": "150us", "REDIS_PIPELINE_LIMIT": "8"}, builtIn: []string{"REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT"}},
		{name: "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", env: map[string]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"}, builtIn: []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"}},
		{name: "REDIS_TIMEOUT", env: map[string]string{"REDIS_TIMEOUT": "1s"}, want: func(s *settings.Settings) { s.BackendTimeoutMax = time.Second }},
		{name: "REDIS_POOL_ON_EMPTY_BEHAVIOR", env: map[string]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR": "WAIT"}, ignored: []string{"REDIS_POOL_ON_EMPTY_BEHAVIOR"}},
		{name: "REDIS_PERSECOND", env: map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_URL": "r2:6379"}, ignored: []string{"REDIS_PERSECOND", "REDIS_PERSECOND_URL"}},
		{name: "CACHE_KEY_PREFIX", env: map[string]string{"CACHE_KEY_PREFIX": "rl_"}, want: func(s *settings.Settings) { s.KeyPrefix = "rl_" }},
		{name: "EXPIRATION_JITTER_MAX_SECONDS", env: map[string]string{"EXPIRATION_JITTER_MAX_SECONDS": "300"}, ignored: []string{"EXPIRATION_JITTER_MAX_SECONDS"}},
		{name: "no local cache", env: map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "0"}, want: func(s *settings.Settings) { s.DenyCache = false }},
		{
			name: "a local cache of 1 MiB", env: map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "1048576"},
			want: func(s *settings.Settings) { s.DenyCache, s.DenyCacheSize = true, 4096 },
		},
		{name: "a tiny local cache", env: map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "10"}, want: func(s *settings.Settings) { s.DenyCache, s.DenyCacheSize = true, 1 }},
		{name: "NEAR_LIMIT_RATIO", env: map[string]string{"NEAR_LIMIT_RATIO": "0.9"}, want: func(s *settings.Settings) { s.NearLimitRatio = 0.9 }},
		{name: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", env: map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"}, builtIn: []string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"}},
		{name: "SHADOW_MODE", env: map[string]string{"SHADOW_MODE": "true"}, want: func(s *settings.Settings) { s.ShadowMode = true }},
		{
			name: "limit headers",
			env:  map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-Left"},
			want: func(s *settings.Settings) { s.LimitHeaders, s.LimitHeaderRemaining = true, "X-Left" },
		},
		{
			name: "tracing as Envoy Gateway sets it",
			env: map[string]string{
				"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit", "TRACING_SERVICE_NAMESPACE": "envoy-gateway-system",
				"TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-5d9c7b-x2x4q", "TRACING_SAMPLING_RATE": "0.5", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
			},
			want: func(s *settings.Settings) {
				s.Tracing, s.TracingServiceName, s.TracingServiceNamespace = true, "envoy-ratelimit", "envoy-gateway-system"
				s.TracingServiceInstanceID, s.TracingSamplingRate = "envoy-ratelimit-5d9c7b-x2x4q", half
			},
		},
		{name: "tracing over gRPC", env: map[string]string{"TRACING_EXPORTER_PROTOCOL": "grpc"}, want: func(s *settings.Settings) { s.TracingProtocol = "grpc" }},
		{name: "tracing over HTTP", env: map[string]string{"TRACING_EXPORTER_PROTOCOL": "http"}, want: func(s *settings.Settings) { s.TracingProtocol = "http/protobuf" }},
		{name: "memcache settings", env: map[string]string{"MEMCACHE_HOST_PORT": "m:11211"}, ignored: []string{"MEMCACHE_HOST_PORT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, report, err := convert(t, c.env)
			require.NoError(t, err)
			want := defaultSettings(t)
			if c.want != nil {
				c.want(&want)
			}
			assert.Equal(t, fields(want), fields(got))
			assert.ElementsMatch(t, c.ignored, ignoredNames(report), "ignored")
			assert.ElementsMatch(t, c.builtIn, builtInNames(report), "built in")
			for _, n := range report.Applied {
				for _, theirs := range n.Theirs {
					assert.Contains(t, c.env, theirs)
				}
			}
		})
	}
}

func TestCompatEnvRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GRPC_UDS": "/tmp/rl.sock"}, "GRPC_UDS"},
		{map[string]string{"GRPC_SERVER_USE_TLS": "true"}, "GRPC_SERVER_TLS_CERT"},
		{map[string]string{"CONFIG_TYPE": "CONSUL"}, `CONFIG_TYPE "CONSUL"`},
		{map[string]string{"QUOTA_MODE": "sometimes"}, "QUOTA_MODE"},
		{map[string]string{"MERGE_DOMAIN_CONFIG": "yes"}, "MERGE_DOMAIN_CONFIG"},
		{map[string]string{"RUNTIME_IGNOREDOTFILES": "yes"}, "RUNTIME_IGNOREDOTFILES"},
		{map[string]string{"FORCE_START_WITHOUT_INITIAL_CONFIG": "yes"}, "FORCE_START_WITHOUT_INITIAL_CONFIG"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "a:b,token:s3:cret"}, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: entry 2 is not key:value"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "on"}, "CONFIG_GRPC_XDS_SERVER_USE_TLS"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "10"}, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "half"}, "XDS_CLIENT_BACKOFF_RANDOM_FACTOR"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_JITTER": "maybe"}, "XDS_CLIENT_BACKOFF_JITTER"},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "-1"}, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"},
		{map[string]string{"BACKEND_TYPE": "memcache"}, "memcache"},
		{map[string]string{"BACKEND_TYPE": "etcd"}, `BACKEND_TYPE "etcd"`},
		{map[string]string{"REDIS_SOCKET_TYPE": "unix", "REDIS_URL": "/var/run/redis.sock"}, "REDIS_SOCKET_TYPE is unix"},
		{map[string]string{"REDIS_TYPE": "ring", "REDIS_URL": "r:1"}, `REDIS_TYPE "ring"`},
		{map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster"}, "master's name and the Sentinels"},
		{map[string]string{"REDIS_URL": "redis://:pw@r:6379/zero"}, "database"},
		{map[string]string{"REDIS_POOL_SIZE": "ten"}, "REDIS_POOL_SIZE"},
		{map[string]string{"PORT": "http"}, "PORT"},
		{map[string]string{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{map[string]string{"SHADOW_MODE": "yes please"}, "SHADOW_MODE"},
		{map[string]string{"NEAR_LIMIT_RATIO": "most"}, "NEAR_LIMIT_RATIO"},
		{map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "-1"}, "LOCAL_CACHE_SIZE_IN_BYTES"},
		{map[string]string{"TRACING_EXPORTER_PROTOCOL": "zipkin"}, "TRACING_EXPORTER_PROTOCOL"},
	} {
		_, _, err := convert(t, c.env)
		if assert.Error(t, err, "%v", c.env) {
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), "server: "), err.Error())
		}
	}
}

func TestCompatEnvExplicitRLSWins(t *testing.T) {
	t.Parallel()
	s, err := settings.Load(lookupIn(map[string]string{
		"RLS_HTTP_ADDR":      "127.0.0.1:7000",
		"RLS_REDIS_PASSWORD": "mine",
		"PORT":               "9000",
		"REDIS_URL":          "redis://:theirs@r:6379",
		"RLS_CONFIG_PATH":    "../../../config",
	}))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7000", s.HTTPAddr)
	assert.Equal(t, "mine", s.Redis.Password)
	assert.Equal(t, []string{"r:6379"}, s.Redis.Addrs, "what RLS_ does not set still comes from theirs")
	assert.Equal(t, settings.BackendRedis, s.Backend)
	var overridden []string
	for _, n := range s.Compat().Overridden {
		overridden = append(overridden, n.Ours)
	}
	assert.ElementsMatch(t, []string{"RLS_HTTP_ADDR", "RLS_REDIS_PASSWORD"}, overridden)
}

func TestCompatEnvErrorsNameTheirVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RLS_CONFIG_PATH": "../../../config", "REDIS_URL": "redis:http"}
	_, err := settings.Load(lookupIn(env))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_REDIS_*")
	assert.Contains(t, err.Error(), "RLS_REDIS_ADDRS from REDIS_URL")

	env["REDIS_URL"] = "redis:6379"
	env["CACHE_KEY_PREFIX"] = "{rl}"
	_, err = settings.Load(lookupIn(env))
	assert.ErrorContains(t, err, "RLS_KEY_PREFIX from CACHE_KEY_PREFIX")

	env["CACHE_KEY_PREFIX"] = "rl_"
	env["CONFIG_TYPE"] = "GRPC_XDS_SOTW"
	env["CONFIG_GRPC_XDS_SERVER_USE_TLS"] = "true"
	env["CONFIG_GRPC_XDS_CLIENT_TLS_CERT"] = "/certs/tls.crt"
	_, err = settings.Load(lookupIn(env))
	assert.ErrorContains(t, err, "RLS_XDS_TLS_CERT_FILE and RLS_XDS_TLS_KEY_FILE go together")
	assert.ErrorContains(t, err, "RLS_XDS_TLS_CERT_FILE from CONFIG_GRPC_XDS_CLIENT_TLS_CERT")

	env["CONFIG_GRPC_XDS_CLIENT_TLS_KEY"] = "/certs/tls.key"
	env["CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"] = "Grpc-Timeout:1s"
	_, err = settings.Load(lookupIn(env))
	assert.ErrorContains(t, err, "RLS_XDS_HEADERS from CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS")

	env["CONFIG_TYPE"] = "FILE"
	env["REDIS_TIMEOUT"] = "soon"
	_, err = settings.Load(lookupIn(env))
	assert.ErrorContains(t, err, `REDIS_TIMEOUT "soon" is not a duration`)
}

func TestCompatEnvCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	s, err := settings.Load(lookupIn(map[string]string{"RLS_COMPAT_ENV": "false", "PORT": "9000", "GRPC_UDS": "/tmp/refused.sock"}))
	require.NoError(t, err)
	assert.Equal(t, ":8080", s.HTTPAddr)
	assert.Nil(t, s.Compat())
}

// TestCompatEnvIstioSample converts the environment of Istio's sample
// Deployment of envoyproxy/ratelimit (samples/ratelimit/rate-limit-service.yaml)
// and logs what became of it.
func TestCompatEnvIstioSample(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"LOG_LEVEL": "debug", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "USE_STATSD": "false",
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_WATCH_ROOT": "false",
		"RUNTIME_IGNOREDOTFILES": "true", "HOST": "::", "GRPC_HOST": "::",
	}
	s, report, err := convert(t, env)
	require.NoError(t, err, "Load validates what it converted")
	assert.Equal(t, settings.BackendRedis, s.Backend)
	assert.Equal(t, []string{"redis:6379"}, s.Redis.Addrs)
	assert.Equal(t, "/data/ratelimit/config", s.ConfigPath)
	assert.Equal(t, "[::]:8080", s.HTTPAddr)
	assert.Equal(t, "[::]:8081", s.GRPCAddr)
	assert.Equal(t, settings.LogLevel(slog.LevelDebug), s.LogLevel)
	assert.Empty(t, report.Ignored)

	var buf bytes.Buffer
	report.Log(s.NewLogger(&buf))
	out := buf.String()
	assert.Contains(t, out, `level=INFO msg="read envoyproxy/ratelimit variable" from=REDIS_URL setting=RLS_REDIS_ADDRS value=redis:6379`)
	assert.Contains(t, out, `setting=RLS_CONFIG_PATH value=/data/ratelimit/config`)
	assert.Contains(t, out, `level=DEBUG msg="envoyproxy/ratelimit variable needs no setting" variables=USE_STATSD`)
	assert.NotContains(t, out, "level=WARN")
}

// TestCompatEnvKeepsPasswordsOutOfTheLog: no password of theirs, in a
// REDIS_URL, REDIS_SENTINEL_AUTH or an xDS header, reaches the log. With
// REDIS_SENTINEL_AUTH, Redis is a Sentinel's, as Load accepts only then.
func TestCompatEnvKeepsPasswordsOutOfTheLog(t *testing.T) {
	t.Parallel()
	_, report, err := convert(t, map[string]string{
		"REDIS_URL": "mymaster,redis://app:url-secret@r:6379", "REDIS_SENTINEL_AUTH": "sentinel-secret", "REDIS_TYPE": "sentinel",
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "authorization:Bearer secret-token",
	})
	require.NoError(t, err)
	var buf bytes.Buffer
	report.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	out := buf.String()
	assert.NotContains(t, out, "secret")
	assert.Contains(t, out, "setting=RLS_REDIS_PASSWORD value=[redacted]")
	assert.Contains(t, out, "setting=RLS_REDIS_SENTINEL_PASSWORD value=[redacted]")
	assert.Contains(t, out, "setting=RLS_REDIS_ADDRS value=r:6379")
	assert.Contains(t, out, "setting=RLS_REDIS_USERNAME value=app")
	assert.Contains(t, out, `setting=RLS_XDS_HEADERS value=authorization:[redacted]`)
}

// TestCompatEnvEnvoyGateway converts the environment of Envoy Gateway's
// generated Deployment (internal/infrastructure/kubernetes/ratelimit/
// resource.go), with Prometheus on and Redis over TLS: limits from Envoy
// Gateway's xDS server over mutual TLS, gRPC over TLS.
func TestCompatEnvEnvoyGateway(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true",
		"RUNTIME_WATCH_ROOT": "false", "LOG_LEVEL": "info", "USE_STATSD": "false",
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key",
		"GRPC_SERVER_TLS_CA_CERT":        "/certs/ca.crt", // Envoy Gateway's own name, which envoyproxy/ratelimit does not read
		"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt",
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt",
		"FORCE_START_WITHOUT_INITIAL_CONFIG": "true", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.redis.svc:6379",
		"REDIS_TLS": "true", "REDIS_TLS_CLIENT_CERT": "/redis-certs/tls.crt", "REDIS_TLS_CLIENT_KEY": "/redis-certs/tls.key",
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
	}
	s, report, err := convert(t, env)
	require.NoError(t, err, "Load validates what it converted")
	assert.Equal(t, settings.ConfigFromXDS, s.ConfigSource)
	assert.Equal(t, "envoy-gateway:18001", s.XDSServerURL)
	assert.Equal(t, "envoy-ratelimit", s.XDSNodeID)
	assert.True(t, s.XDSTls)
	assert.Equal(t, []string{"/certs/tls.crt", "/certs/tls.key", "/certs/ca.crt"}, []string{s.XDSTlsCertFile, s.XDSTlsKeyFile, s.XDSTlsCaFile})
	assert.Equal(t, "/certs/tls.crt", s.GRPCTlsCertFile)
	assert.Empty(t, s.GRPCTlsClientCaFile, "GRPC_SERVER_TLS_CA_CERT is none of envoyproxy/ratelimit's names: TLS, not mutual TLS, as there")
	assert.True(t, s.Redis.TLS)
	assert.Equal(t, "/redis-certs/tls.crt", s.Redis.TLSCertFile)
	assert.Equal(t, []string{"redis.redis.svc:6379"}, s.Redis.Addrs)
	assert.Equal(t, ":19001", s.MetricsAddr)
	assert.Equal(t, metrics.NamesBoth, s.MetricsNames)
	assert.ElementsMatch(t, []string{"PROMETHEUS_MAPPER_YAML", "GRPC_SERVER_TLS_CA_CERT"}, ignoredNames(report))
	assert.Subset(t, builtInNames(report), []string{"FORCE_START_WITHOUT_INITIAL_CONFIG", "RUNTIME_WATCH_ROOT", "USE_STATSD", "REDIS_SOCKET_TYPE"})
}

// TestCompatEnvForceStartWithoutWatch: with files read once, the server
// starts only with its limits, so FORCE_START_WITHOUT_INITIAL_CONFIG=true is
// not followed.
func TestCompatEnvForceStartWithoutWatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value            string
		ignored, builtIn []string
	}{
		{"true", []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}, nil},
		{"false", nil, []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}},
	} {
		_, report, err := convert(t, map[string]string{"RLS_CONFIG_WATCH": "false", "FORCE_START_WITHOUT_INITIAL_CONFIG": c.value})
		require.NoError(t, err)
		assert.ElementsMatch(t, c.ignored, ignoredNames(report), c.value)
		assert.ElementsMatch(t, c.builtIn, builtInNames(report), c.value)
	}
}

// TestCompatTableNamesOnlySettings checks that every RLS_ variable a row of
// the table names is a setting.
func TestCompatTableNamesOnlySettings(t *testing.T) {
	t.Parallel()
	var usage bytes.Buffer
	require.NoError(t, settings.PrintUsage(&usage))
	for _, ours := range compat.Ours() {
		assert.Contains(t, usage.String(), "\n"+ours+" ", "%s is a setting", ours)
	}
}

// TestCompatEnvValuesParsedByTheSettings: a value of theirs that reaches an
// RLS_ variable as it is, is parsed by the setting's type, and an error
// names both variables.
func TestCompatEnvValuesParsedByTheSettings(t *testing.T) {
	t.Parallel()
	_, _, err := convert(t, map[string]string{"TRACING_SAMPLING_RATE": "1.5"})
	assert.EqualError(t, err, `server: RLS_TRACING_SAMPLING_RATE: tracing: sampling rate "1.5" is not a number in [0, 1] `+
		`(envoyproxy/ratelimit's variables set RLS_TRACING_SAMPLING_RATE from TRACING_SAMPLING_RATE)`)

	s, report, err := convert(t, map[string]string{"REDIS_POOL_SIZE": "020", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "010", "CONFIG_TYPE": "GRPC_XDS_SOTW"})
	require.NoError(t, err)
	assert.Equal(t, 20, s.Redis.PoolSize, "their whole numbers are decimal")
	assert.Equal(t, 10, s.XDSMaxMessageBytes)
	for _, n := range report.Applied {
		if n.Ours == "RLS_REDIS_POOL_SIZE" {
			assert.Equal(t, "020", n.Value, "the report shows their value")
		}
	}
}
