package settings

import (
	"bytes"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// lookupIn looks variables up in env, and in nothing else.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// loadErr returns the error of loading the variables env.
func loadErr(t *testing.T, env map[string]string) error {
	t.Helper()
	_, err := Load(lookupIn(env))
	require.Error(t, err, "%v", env)
	return err
}

// TestReadParsesEveryKind: read gives the fields the values their types
// parse, as envconfig, whose naming and rules the variables keep, parses
// them: a value of every kind of field Settings has (numbers in any base,
// booleans as strconv reads them, lists and maps split on commas, and the
// types that parse themselves), and the defaults of the others. A value a
// field refuses is an error naming its variable.
func TestReadParsesEveryKind(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RLS_GRPC_ADDR":                   "127.0.0.1:1",
		"RLS_HTTP_ADDR":                   "",
		"RLS_BACKEND":                     "redis",
		"RLS_DEFAULT_ALGORITHM":           "token_bucket",
		"RLS_FAILURE_MODE":                "deny",
		"RLS_BACKEND_TIMEOUT":             "250ms",
		"RLS_SHADOW_MODE":                 "1",
		"RLS_MAX_DESCRIPTORS":             "010",
		"RLS_MAX_HITS":                    "0x10",
		"RLS_NEAR_LIMIT_RATIO":            "0.5",
		"RLS_GRPC_MAX_CONCURRENT_STREAMS": "7",
		"RLS_CONFIG_MAX_BYTES":            "123",
		"RLS_XDS_HEADERS":                 "a:b,c:d",
		"RLS_REDIS_ADDRS":                 "r1:1,r2:2",
		"RLS_REDIS_MODE":                  "cluster",
		"RLS_REDIS_DB":                    "3",
		"RLS_REDIS_PIPELINES_PER_CPU":     "4",
		"RLS_XDS_DEFAULT_ALGORITHM":       "sliding_window_log",
		"RLS_LOG_LEVEL":                   "WARN",
		"RLS_LOG_FORMAT":                  "json",
		"RLS_XDS_NODE_METADATA":           "zone=a,cluster=edge=1",
		"RLS_TRACING_PROTOCOL":            "http",
		"RLS_TRACING_SAMPLING_RATE":       "0.25",
		"RLS_WILDCARD_PRECEDENCE":         "most_specific",
		"RLS_METRICS_NAMES":               "both",
		"RLS_CONFIG_SOURCE":               "GRPC_XDS_SOTW",
		"RLS_HTTP_JSON":                   "off",
		"RLS_XDS_CALENDAR":                "month,day",
	}
	s := Default()
	require.NoError(t, read(Prefix, &s, lookupIn(env)))
	want := Default()
	want.GRPCAddr, want.HTTPAddr, want.Backend = "127.0.0.1:1", "", BackendRedis
	want.DefaultAlgorithm, want.FailureMode, want.BackendTimeout = algorithms.TokenBucket, rls.FailDeny, 250*time.Millisecond
	want.ShadowMode, want.MaxDescriptors, want.MaxHits, want.NearLimitRatio = true, 8, 16, 0.5
	want.GRPCMaxConcurrentStreams, want.ConfigMaxBytes = 7, 123
	want.XDSHeaders = map[string]string{"a": "b", "c": "d"}
	want.Redis.Addrs, want.Redis.Mode, want.Redis.DB, want.RedisPipelinesPerCPU = []string{"r1:1", "r2:2"}, "cluster", 3, 4
	want.XDSDefaultAlgorithm, want.LogLevel, want.LogFormat = algorithms.SlidingWindowLog, LogLevel(slog.LevelWarn), "json"
	want.XDSNodeMetadata = NodeMetadata{"zone": "a", "cluster": "edge=1"}
	want.TracingProtocol = "http/protobuf"
	require.NoError(t, want.TracingSamplingRate.UnmarshalText([]byte("0.25")))
	want.WildcardPrecedence, want.MetricsNames = config.MostSpecificWildcard, metrics.NamesBoth
	want.ConfigSource, want.HTTPJson = ConfigFromXDS, JSONOff
	require.NoError(t, want.XDSCalendar.UnmarshalText([]byte("day,month")))
	assert.Equal(t, want, s)
	assert.Equal(t, want.XDSCalendar, s.XDSConfigOptions().XDSCalendar)
	assert.Equal(t, algorithms.SlidingWindowLog, s.XDSConfigOptions().DefaultAlgorithm)
	assert.Equal(t, uint64(16), s.MaxHits, "numbers are read in any base")

	env["RLS_SHADOW_MODE"] = "perhaps"
	err := read(Prefix, &s, lookupIn(env))
	assert.ErrorContains(t, err, "RLS_SHADOW_MODE")
}

// TestVariablesAreThoseUsagePrints: Load reads the variables `server -h`
// lists, in its order, every one of them RLS_.
func TestVariablesAreThoseUsagePrints(t *testing.T) {
	t.Parallel()
	var usage bytes.Buffer
	require.NoError(t, PrintUsage(&usage))
	var names []string
	for _, v := range variables(Prefix, reflect.ValueOf(&Settings{})) {
		names = append(names, v.name)
		assert.True(t, strings.HasPrefix(v.name, Prefix+"_"), v.name)
		assert.Empty(t, v.tag.Get("envconfig"), "%s: a field named by an envconfig tag is read without the prefix too by envconfig", v.name)
	}
	var printed []string
	for _, line := range strings.Split(strings.TrimSpace(usage.String()), "\n")[1:] {
		printed = append(printed, strings.Fields(line)[0])
	}
	assert.Equal(t, printed, names)
	assert.Greater(t, len(names), 100)
}

// TestLoadReadsOnlyThroughLookup: the process's environment is not read:
// no file of the package, nor of package compat, which Load runs for
// envoyproxy/ratelimit's variables, calls os.Getenv, os.LookupEnv or
// os.Environ, so every variable comes through Load's lookup.
func TestLoadReadsOnlyThroughLookup(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	compatFiles, err := filepath.Glob("compat/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, compatFiles)
	files = append(files, compatFiles...)
	read := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		read++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "os" {
					assert.NotContains(t, []string{"Getenv", "LookupEnv", "Environ"}, sel.Sel.Name, "%s reads the process's environment", name)
				}
			}
			return true
		})
	}
	assert.Greater(t, read, 5)
}

// TestVarsAreCompatsTarget: the variables of Settings by name, through
// which package compat gives them values, parse text with their own types
// and give their values back as text; a name that is no variable is an
// error.
func TestVarsAreCompatsTarget(t *testing.T) {
	t.Parallel()
	s := Default()
	vars := varsOf(&s)
	assert.Equal(t, "file", vars.Get("RLS_CONFIG_SOURCE"))
	assert.Equal(t, "true", vars.Get("RLS_CONFIG_WATCH"))
	require.NoError(t, vars.Set("RLS_CONFIG_SOURCE", "GRPC_XDS_SOTW"))
	require.NoError(t, vars.Set("RLS_CONFIG_WATCH", "false"))
	require.NoError(t, vars.Set("RLS_REDIS_POOL_SIZE", "20"))
	assert.Equal(t, ConfigFromXDS, s.ConfigSource)
	assert.Equal(t, 20, s.Redis.PoolSize)
	assert.Equal(t, "xds", vars.Get("RLS_CONFIG_SOURCE"))
	assert.Equal(t, "false", vars.Get("RLS_CONFIG_WATCH"))

	assert.EqualError(t, vars.Set("RLS_REDIS_POOL_SIZE", "ten"), `server: RLS_REDIS_POOL_SIZE: strconv.ParseInt: parsing "ten": invalid syntax`)
	assert.EqualError(t, vars.Set("RLS_NO_SUCH", "1"), "server: RLS_NO_SUCH is no setting")
	assert.Empty(t, vars.Get("RLS_NO_SUCH"))
}

// TestMaxEntriesDefaultIsTheDeepestRule: RLS_MAX_ENTRIES's default says
// that no rule matches more entries; the tag's number is config.MaxDepth.
func TestMaxEntriesDefaultIsTheDeepestRule(t *testing.T) {
	s, err := Load(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, config.MaxDepth, s.MaxEntries)
}

func TestVariablesWithoutThePrefixAreIgnored(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"BACKEND":                 "redis",
		"CONFIG_PATH":             "/nowhere",
		"REDIS_ADDRS":             "bad address",
		"TLS_CA_FILE":             "/nowhere.pem",
		"XDS_DEFAULT_ALGORITHM":   "token_bucket",
		"REDIS_PIPELINES_PER_CPU": "0",
		"RLS_REDIS_ADDRS":         "127.0.0.1:6379,127.0.0.1:6380",
		"RLS_REDIS_TLS_CA_FILE":   "/etc/ca.pem",
	}))
	require.NoError(t, err)
	assert.Equal(t, BackendMemory, s.Backend)
	assert.Equal(t, "./config", s.ConfigPath)
	assert.Equal(t, []string{"127.0.0.1:6379", "127.0.0.1:6380"}, s.Redis.Addrs)
	assert.Equal(t, "/etc/ca.pem", s.Redis.TLSCaFile)
	assert.Equal(t, algorithms.FixedWindow, s.XDSDefaultAlgorithm)
	assert.Equal(t, 1, s.RedisPipelinesPerCPU)
}

// TestSettingsParseThemselves: a setting that is more than a string, a
// number or a duration is read into its type once, by Load.
func TestSettingsParseThemselves(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, config.FirstWildcard, s.WildcardPrecedence)
	assert.Equal(t, LogLevel(slog.LevelInfo), s.LogLevel)
	assert.Equal(t, LogText, s.LogFormat)
	assert.Equal(t, metrics.NamesRatewarden, s.MetricsNames)
	assert.Equal(t, ConfigFromFiles, s.ConfigSource)
	assert.Equal(t, JSONAuto, s.HTTPJson)
	assert.Nil(t, s.XDSNodeMetadata)
	assert.Equal(t, TracingProtocol(""), s.TracingProtocol)
	_, ok := s.TracingSamplingRate.Share()
	assert.False(t, ok)

	s, err = Load(lookupIn(map[string]string{
		"RLS_WILDCARD_PRECEDENCE":   "most_specific",
		"RLS_LOG_LEVEL":             "WARN",
		"RLS_LOG_FORMAT":            "json",
		"RLS_METRICS_NAMES":         "ratelimit",
		"RLS_CONFIG_SOURCE":         "GRPC_XDS_SOTW",
		"RLS_HTTP_JSON":             "off",
		"RLS_XDS_NODE_METADATA":     " zone=a,cluster=edge=1",
		"RLS_TRACING_PROTOCOL":      "http",
		"RLS_TRACING_SAMPLING_RATE": "0.25",
		"RLS_BACKEND":               "redis",
		"RLS_DEFAULT_ALGORITHM":     "token_bucket",
		"RLS_FAILURE_MODE":          "deny",
	}))
	require.NoError(t, err)
	assert.Equal(t, config.MostSpecificWildcard, s.WildcardPrecedence)
	assert.Equal(t, LogLevel(slog.LevelWarn), s.LogLevel)
	assert.Equal(t, LogJSON, s.LogFormat)
	assert.Equal(t, metrics.NamesRatelimit, s.MetricsNames)
	assert.Equal(t, ConfigFromXDS, s.ConfigSource)
	assert.Equal(t, JSONOff, s.HTTPJson)
	assert.Equal(t, NodeMetadata{"zone": "a", "cluster": "edge=1"}, s.XDSNodeMetadata)
	assert.Equal(t, TracingProtocol(tracing.ProtocolHTTP), s.TracingProtocol)
	share, ok := s.TracingSamplingRate.Share()
	assert.True(t, ok)
	assert.InDelta(t, 0.25, share, 0)
	assert.Equal(t, BackendRedis, s.Backend)
	assert.Equal(t, algorithms.TokenBucket, s.DefaultAlgorithm)
	assert.Equal(t, rls.FailDeny, s.FailureMode)

	var logs bytes.Buffer
	logger := s.NewLogger(&logs)
	logger.Info("below the level")
	logger.Warn("at the level")
	assert.Contains(t, logs.String(), `"level":"WARN","msg":"at the level"`)
	assert.NotContains(t, logs.String(), "below the level")
}

// TestSettingsErrorsNameTheVariable: a value a setting refuses, by its
// type or by Validate, stops loading with the variable's name.
func TestSettingsErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value string }{
		{"RLS_BACKEND", "postgres"},
		{"RLS_DEFAULT_ALGORITHM", "leaky"},
		{"RLS_FAILURE_MODE", "maybe"},
		{"RLS_BACKEND_TIMEOUT", "soon"},
		{"RLS_BACKEND_TIMEOUT", "0s"},
		{"RLS_SHADOW_MODE", "perhaps"},
		{"RLS_LOG_LEVEL", "loud"},
		{"RLS_ALLOW_NEGATIVE_HITS", "sometimes"},
		{"RLS_MAX_DESCRIPTORS", "0"},
		{"RLS_MAX_ENTRIES", "-1"},
		{"RLS_MAX_HITS", "0"},
		{"RLS_MAX_HITS", "-1"},
		{"RLS_MAX_LOG_HITS", "100001"},
		{"RLS_MAX_OVERRIDE_LOG_SIZE", "0"},
		{"RLS_MAX_OVERRIDE_LIFETIME", "500ms"},
		{"RLS_MAX_UNMATCHED_ENTRIES", "0"},
		{"RLS_MAX_UNMATCHED_KEY_BYTES", "-5"},
		{"RLS_REDIS_PIPELINES_PER_CPU", "0"},

		// The bounds on connections, streams and reads.
		{"RLS_HTTP_READ_TIMEOUT", "0s"},
		{"RLS_HTTP_WRITE_TIMEOUT", "-1s"},
		{"RLS_HTTP_IDLE_TIMEOUT", "0s"},
		{"RLS_HTTP_MAX_HEADER_BYTES", "100"},
		{"RLS_HTTP_MAX_CONNECTIONS", "0"},
		{"RLS_HTTP_PROBE_CONNECTIONS", "-1"},
		{"RLS_GRPC_MAX_CONNECTIONS", "0"},
		{"RLS_GRPC_MAX_CONCURRENT_STREAMS", "0"},
		{"RLS_GRPC_MAX_CALLS", "0"},
		{"RLS_GRPC_READ_TIMEOUT", "0s"},
		{"RLS_GRPC_KEEPALIVE_MIN_TIME", "0s"},
		{"RLS_GRPC_KEEPALIVE_TIME", "0s"},
		{"RLS_GRPC_KEEPALIVE_TIMEOUT", "0s"},
		{"RLS_GRPC_MAX_CONNECTION_IDLE", "-1s"},
		{"RLS_GRPC_MAX_CONNECTION_AGE", "-1s"},
		{"RLS_CONFIG_READ_TIMEOUT", "0s"},
		{"RLS_CONFIG_MAX_BYTES", "0"},

		// The breaker, and the backend's health.
		{"RLS_BREAKER_FAILURES", "-1"},
		{"RLS_BREAKER_FAILURES", "many"},
		{"RLS_BREAKER_COOLDOWN", "0s"},
		{"RLS_NEAR_LIMIT_RATIO", "0"},
		{"RLS_NEAR_LIMIT_RATIO", "1.5"},
		{"RLS_BACKEND_HEALTH_INTERVAL", "0s"},
		{"RLS_BACKEND_HEALTH_TIMEOUT", "-1s"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			t.Parallel()
			err := loadErr(t, map[string]string{tc.key: tc.value})
			assert.Contains(t, err.Error(), tc.key)
		})
	}
}

// TestTypedSettingsNameWhatTheyAccept: a setting typed as a name is refused
// with the variable and the names it accepts.
func TestTypedSettingsNameWhatTheyAccept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, value, want string }{
		{"RLS_BACKEND", "postgres", `server: RLS_BACKEND: unknown backend "postgres" (want memory or redis)`},
		{"RLS_DEFAULT_ALGORITHM", "leaky", "want fixed_window, sliding_window_log, sliding_window_counter or token_bucket"},
		{"RLS_FAILURE_MODE", "maybe", "want error, allow or deny"},
		{"RLS_LOG_LEVEL", "loud", `server: RLS_LOG_LEVEL "loud" is not debug, info, warn or error`},
		{"RLS_LOG_FORMAT", "xml", `server: RLS_LOG_FORMAT "xml" is not text or json`},
		{"RLS_HTTP_JSON", "maybe", `server: RLS_HTTP_JSON "maybe" is not auto, on or off`},
		{"RLS_CONFIG_SOURCE", "etcd", `server: RLS_CONFIG_SOURCE "etcd" is not file or xds`},
		{"RLS_WILDCARD_PRECEDENCE", "longest", `server: RLS_WILDCARD_PRECEDENCE: config: unknown wildcard precedence "longest" (want first or most_specific)`},
		{"RLS_METRICS_NAMES", "statsd", `server: RLS_METRICS_NAMES: metrics: unknown metric names "statsd" (want ratewarden, ratelimit or both)`},
		{"RLS_TRACING_PROTOCOL", "zipkin", `server: RLS_TRACING_PROTOCOL: tracing: unknown OTLP protocol "zipkin" (want grpc or http/protobuf)`},
		{"RLS_TRACING_SAMPLING_RATE", "1.5", `server: RLS_TRACING_SAMPLING_RATE: tracing: sampling rate "1.5" is not a number in [0, 1]`},
		{"RLS_XDS_NODE_METADATA", "zone=a,cluster", `server: RLS_XDS_NODE_METADATA: "cluster" is not key=value`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			t.Parallel()
			err := loadErr(t, map[string]string{tc.key: tc.value})
			assert.Contains(t, err.Error(), tc.key)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestLimitHeaderNamesAreValidated(t *testing.T) {
	t.Parallel()
	err := loadErr(t, map[string]string{"RLS_LIMIT_HEADERS": "true", "RLS_LIMIT_HEADER_REMAINING": "bad header"})
	assert.ErrorContains(t, err, "RLS_LIMIT_HEADER_REMAINING")
}

func TestMetricsSettingsAreValidated(t *testing.T) {
	t.Parallel()
	err := loadErr(t, map[string]string{"RLS_METRICS_NAMES": "statsd"})
	assert.ErrorContains(t, err, "RLS_METRICS_NAMES")
	err = loadErr(t, map[string]string{"RLS_METRICS_NAMES": "ratelimit", "RLS_METRICS_ADDR": ":0", "RLS_METRICS_PATH": "metrics"})
	assert.ErrorContains(t, err, "RLS_METRICS_PATH")
}

func TestTracingSettingsAreValidated(t *testing.T) {
	t.Parallel()
	err := loadErr(t, map[string]string{"RLS_TRACING": "true", "RLS_TRACING_PROTOCOL": "zipkin"})
	assert.ErrorContains(t, err, "RLS_TRACING_PROTOCOL")
	err = loadErr(t, map[string]string{"RLS_TRACING": "true", "RLS_TRACING_PROTOCOL": "grpc", "RLS_TRACING_SAMPLING_RATE": "1.5"})
	assert.ErrorContains(t, err, "RLS_TRACING_SAMPLING_RATE")
}

func TestReloadSettings(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(nil))
	require.NoError(t, err)
	assert.True(t, s.ConfigWatch)
	assert.Equal(t, 10*time.Second, s.ConfigPollInterval)

	err = loadErr(t, map[string]string{"RLS_CONFIG_POLL_INTERVAL": "-1s"})
	assert.Contains(t, err.Error(), "RLS_CONFIG_POLL_INTERVAL")
}

// TestXDSSettingsErrorsNameTheVariable: bad RLS_CONFIG_SOURCE and RLS_XDS_*
// values stop the server with the variable's name.
func TestXDSSettingsErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RLS_CONFIG_SOURCE": "etcd"}, `RLS_CONFIG_SOURCE "etcd" is not file or xds`},
		{map[string]string{"RLS_CONFIG_SOURCE": "xds", "RLS_XDS_SERVER_URL": ""}, "RLS_XDS_SERVER_URL must not be empty"},
		{map[string]string{"RLS_CONFIG_SOURCE": "xds", "RLS_XDS_NODE_ID": ""}, "RLS_XDS_NODE_ID must not be empty"},
		{map[string]string{"RLS_XDS_NODE_METADATA": "zone=a,cluster"}, `RLS_XDS_NODE_METADATA: "cluster" is not key=value`},
		{map[string]string{"RLS_XDS_HEADERS": "bad header:x"}, `RLS_XDS_HEADERS: "bad header" is not a header name`},
		{map[string]string{"RLS_XDS_HEADERS": "x-a:caf\u00e9"}, `RLS_XDS_HEADERS: the value of "x-a" must be printable ASCII`},
		{map[string]string{"RLS_XDS_TLS": "true", "RLS_XDS_TLS_CERT_FILE": "/c.pem"}, "RLS_XDS_TLS_CERT_FILE and RLS_XDS_TLS_KEY_FILE go together"},
		{map[string]string{"RLS_XDS_TLS_CA_FILE": "/ca.pem"}, "need RLS_XDS_TLS=true"},
		{map[string]string{"RLS_XDS_BACKOFF_INITIAL_INTERVAL": "0s"}, "RLS_XDS_BACKOFF_INITIAL_INTERVAL must be positive"},
		{map[string]string{"RLS_XDS_BACKOFF_MAX_INTERVAL": "10ms"}, "RLS_XDS_BACKOFF_MAX_INTERVAL 10ms is below the initial interval 1s"},
		{map[string]string{"RLS_XDS_BACKOFF_RANDOM_FACTOR": "2"}, "RLS_XDS_BACKOFF_RANDOM_FACTOR must be in [0, 1]"},
		{map[string]string{"RLS_XDS_MAX_MESSAGE_BYTES": "0"}, "RLS_XDS_MAX_MESSAGE_BYTES must be positive"},
		{map[string]string{"RLS_XDS_CALENDAR": "month,hour"}, `RLS_XDS_CALENDAR`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			t.Parallel()
			err := loadErr(t, tc.env)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestXDSSettingsOfEnvoyGateway: the values Envoy Gateway gives
// envoyproxy/ratelimit, under their RLS_ names, are valid settings.
func TestXDSSettingsOfEnvoyGateway(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"RLS_CONFIG_SOURCE":     "GRPC_XDS_SOTW",
		"RLS_XDS_SERVER_URL":    "envoy-gateway:18001",
		"RLS_XDS_NODE_ID":       "envoy-ratelimit",
		"RLS_XDS_TLS":           "true",
		"RLS_XDS_TLS_CERT_FILE": "/certs/tls.crt",
		"RLS_XDS_TLS_KEY_FILE":  "/certs/tls.key",
		"RLS_XDS_TLS_CA_FILE":   "/certs/ca.crt",
		"RLS_XDS_NODE_METADATA": "zone=a,cluster=edge=1",
		"RLS_XDS_HEADERS":       "authorization:Bearer x,X-Tenant:t1",
	}))
	require.NoError(t, err)
	assert.Equal(t, ConfigFromXDS, s.ConfigSource)
	assert.Equal(t, NodeMetadata{"zone": "a", "cluster": "edge=1"}, s.XDSNodeMetadata)
	assert.Equal(t, map[string]string{"authorization": "Bearer x", "X-Tenant": "t1"}, s.XDSHeaders)
}

// TestReadRedis: every RLS_REDIS_* variable reaches its field of
// redisx.Options.
func TestReadRedis(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"RLS_BACKEND":                        "redis",
		"RLS_REDIS_ADDRS":                    "10.0.0.1:26379,10.0.0.2:26379",
		"RLS_REDIS_MODE":                     "sentinel",
		"RLS_REDIS_SENTINEL_MASTER":          "mymaster",
		"RLS_REDIS_SENTINEL_USERNAME":        "watcher",
		"RLS_REDIS_SENTINEL_PASSWORD":        "sp",
		"RLS_REDIS_USERNAME":                 "ratewarden",
		"RLS_REDIS_PASSWORD":                 "pw",
		"RLS_REDIS_DB":                       "2",
		"RLS_REDIS_TLS":                      "true",
		"RLS_REDIS_TLS_CA_FILE":              "/etc/ca.pem",
		"RLS_REDIS_TLS_CERT_FILE":            "/etc/c.pem",
		"RLS_REDIS_TLS_KEY_FILE":             "/etc/k.pem",
		"RLS_REDIS_TLS_SERVER_NAME":          "redis.internal",
		"RLS_REDIS_TLS_INSECURE_SKIP_VERIFY": "true",
		"RLS_REDIS_TLS_SKIP_HOSTNAME_VERIFY": "true",
		"RLS_REDIS_POOL_SIZE":                "50",
		"RLS_REDIS_MIN_IDLE_CONNS":           "5",
		"RLS_REDIS_DIAL_TIMEOUT":             "250ms",
		"RLS_REDIS_READ_TIMEOUT":             "20ms",
		"RLS_REDIS_WRITE_TIMEOUT":            "30ms",
		"RLS_REDIS_MAX_RETRIES":              "-1",
	}))
	require.NoError(t, err)
	assert.Equal(t, redisx.Options{
		Addrs:                 []string{"10.0.0.1:26379", "10.0.0.2:26379"},
		Mode:                  redisx.ModeSentinel,
		SentinelMaster:        "mymaster",
		SentinelUsername:      "watcher",
		SentinelPassword:      "sp",
		Username:              "ratewarden",
		Password:              "pw",
		DB:                    2,
		TLS:                   true,
		TLSCaFile:             "/etc/ca.pem",
		TLSCertFile:           "/etc/c.pem",
		TLSKeyFile:            "/etc/k.pem",
		TLSServerName:         "redis.internal",
		TLSInsecureSkipVerify: true,
		TLSSkipHostnameVerify: true,
		PoolSize:              50,
		MinIdleConns:          5,
		DialTimeout:           250 * time.Millisecond,
		ReadTimeout:           20 * time.Millisecond,
		WriteTimeout:          30 * time.Millisecond,
		MaxRetries:            -1,
	}, s.RedisOptions())
	assert.NotContains(t, fmt.Sprintf("%v %+v %#v %s", s, s, s, s.Redis), "pw", "no verb prints a password")

	d, err := Load(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, redisx.DefaultOptions(), d.RedisOptions(), "the defaults are redisx's")
}
