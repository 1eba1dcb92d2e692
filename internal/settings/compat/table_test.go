package compat

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the table of docs/migrating.md from the table in compat.go")

// fakeVars is a Target that takes any value for any RLS_ variable, as text.
type fakeVars map[string]string

// defaultVars returns a fakeVars with ratewarden's defaults of the
// variables the conversions read: limits from files, watched.
func defaultVars() fakeVars {
	return fakeVars{"RLS_CONFIG_SOURCE": "file", "RLS_CONFIG_WATCH": "true"}
}

func (v fakeVars) Set(name, text string) error {
	v[name] = text
	return nil
}

func (v fakeVars) Get(name string) string { return v[name] }

// ratelimitSettings are the variables of envoyproxy/ratelimit's
// src/settings/settings.go and README.md.
var ratelimitSettings = []string{
	"HOST", "PORT", "DEBUG_HOST", "DEBUG_PORT", "GRPC_UDS", "GRPC_HOST", "GRPC_PORT",
	"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE", "GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT",
	"GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN", "LOG_LEVEL", "LOG_FORMAT",
	"CONFIG_TYPE", "FORCE_START_WITHOUT_INITIAL_CONFIG", "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA",
	"CONFIG_GRPC_XDS_SERVER_URL", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
	"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER",
	"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "USE_STATSD", "STATSD_HOST",
	"STATSD_PORT", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS", "USE_PROMETHEUS", "PROMETHEUS_ADDR",
	"PROMETHEUS_PATH", "PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "RUNTIME_ROOT",
	"RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES", "RUNTIME_WATCH_ROOT",
	"EXPIRATION_JITTER_MAX_SECONDS", "LOCAL_CACHE_SIZE_IN_BYTES", "NEAR_LIMIT_RATIO", "CACHE_KEY_PREFIX",
	"BACKEND_TYPE", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER",
	"LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "REDIS_SOCKET_TYPE",
	"REDIS_TYPE", "REDIS_URL", "REDIS_POOL_SIZE", "REDIS_AUTH", "REDIS_TLS", "REDIS_TLS_CLIENT_CERT",
	"REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "REDIS_PIPELINE_WINDOW",
	"REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND", "REDIS_PERSECOND_SOCKET_TYPE",
	"REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_AUTH",
	"REDIS_PERSECOND_TLS", "REDIS_SENTINEL_AUTH", "REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW",
	"REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
	"REDIS_TIMEOUT", "REDIS_PERSECOND_TIMEOUT", "REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
	"REDIS_POOL_ON_EMPTY_WAIT_DURATION", "REDIS_PERSECOND_POOL_ON_EMPTY_WAIT_DURATION", "REDIS_STARTUP_INITIAL_INTERVAL",
	"REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME", "MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS",
	"MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS", "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY",
	"MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "SHADOW_MODE", "QUOTA_MODE",
	"RESPONSE_DYNAMIC_METADATA", "MERGE_DOMAIN_CONFIG", "TRACING_ENABLED", "TRACING_SERVICE_NAME",
	"TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID", "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE",
}

// TestCompatTableCoversEveryVariable checks that every one of their
// variables has a row, and that every row is reported when its variables
// are set. TestCompatTableNamesOnlySettings checks the RLS_ variables the
// rows name.
func TestCompatTableCoversEveryVariable(t *testing.T) {
	t.Parallel()
	named := map[string]bool{}
	for _, v := range table {
		for _, n := range v.theirs {
			if prefix, ok := strings.CutSuffix(n, "*"); ok {
				for _, m := range prefixed[prefix] {
					named[m] = true
				}
				continue
			}
			named[n] = true
		}
	}
	for _, n := range ratelimitSettings {
		assert.True(t, named[n], "%s has a row in the table", n)
	}

	// Each variable alone, set to a value of its kind, is reported somehow:
	// applied, built in, ignored, or refused.
	for _, n := range ratelimitSettings {
		for _, value := range []string{"true", "1"} {
			only := func(name string) (string, bool) {
				if name == n {
					return value, true
				}
				return "", false
			}
			report, err := Apply(only, defaultVars())
			if err != nil {
				continue
			}
			var all []string
			for _, notes := range [][]Note{report.Applied, report.BuiltIn, report.Ignored} {
				for _, note := range notes {
					all = append(all, note.Theirs...)
				}
			}
			if !slices.Contains(all, n) {
				t.Errorf("%s=%s is neither applied, built in, ignored nor refused", n, value)
			}
		}
	}
}

// TestCompatTableInDocs keeps the table of docs/migrating.md as docTable
// writes it; -update-docs rewrites it.
func TestCompatTableInDocs(t *testing.T) {
	t.Parallel()
	const path = "../../../docs/migrating.md"
	const begin, end = "<!-- envoyproxy/ratelimit variables: begin -->\n", "<!-- envoyproxy/ratelimit variables: end -->\n"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "docs/migrating.md holds the table between %q and %q", begin, end)
	if *updateDocs {
		want := doc[:i+len(begin)] + docTable() + doc[j:]
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, docTable(), doc[i+len(begin):j], "docs/migrating.md's table differs from the table in compat.go; run go test ./internal/settings/compat -run CompatTableInDocs -update-docs")
}
