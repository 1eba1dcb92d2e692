package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// envoyproxy/ratelimit's environment variables are read too, so that a
// deployment made for it (Istio's sample, Envoy Gateway's generated
// Deployment, plain manifests, Compose files) runs ratewarden by a change of
// image alone. compatVars is the table of them: for each, the RLS_
// variables it stands in for and a conversion. The conversions run after
// envconfig has read the RLS_ variables and assign the Settings fields of
// RLS_ variables that are not set, so an explicit RLS_ value always wins
// and theirs only replaces ratewarden's defaults. docs/migrating.md holds
// the table as compatTable writes it; a test keeps the two in step.

// compatHow says what becomes of one of envoyproxy/ratelimit's variables.
type compatHow string

// The ways their variables are taken.
const (
	// compatSame: read into an RLS_ variable with the same meaning.
	compatSame compatHow = "same"
	// compatDiffers: read into an RLS_ variable, with the difference its
	// note says.
	compatDiffers compatHow = "differs"
	// compatBuiltIn: ratewarden always behaves as the variable asks (or
	// better), without a setting.
	compatBuiltIn compatHow = "built in"
	// compatIgnored: not read; a value that asks for something ratewarden
	// does not do is logged at warn with the reason.
	compatIgnored compatHow = "ignored"
	// compatRefused: a value that ratewarden cannot honour stops the
	// server, because serving without it would go wrong in silence.
	compatRefused compatHow = "refused"
)

// compatVar is how a group of envoyproxy/ratelimit's variables, read
// together, is taken.
type compatVar struct {
	// theirs are their variables, with their default in envoyproxy/ratelimit
	// where it matters.
	theirs []string
	// ours are the RLS_ variables that take their place.
	ours []string
	how  compatHow
	// note says how they differ, or why they are ignored or refused.
	note string
	// apply converts: it reads their values from c, and assigns settings
	// through c.set, or reports through c.ignore, c.builtIn or an error.
	apply func(c *compatContext) error
}

// compatVars is the table of envoyproxy/ratelimit's variables (its
// src/settings/settings.go), and of GRPC_SERVER_TLS_CA_CERT, which Envoy
// Gateway sets for it although it reads no such name. Names that are set
// but in none of these rows are none of theirs, and stay unread. A row may
// read what the rows before it assigned (the xDS rows, CONFIG_TYPE's).
var compatVars = []compatVar{
	{
		theirs: []string{"HOST", "PORT"}, ours: []string{"RLS_HTTP_ADDR"}, how: compatDiffers,
		note:  "host:port, with PORT 8080 when only HOST is set; without HOST the server listens on every address, IPv6 too, where envoyproxy/ratelimit takes 0.0.0.0",
		apply: hostPort("HOST", "PORT", "8080", "RLS_HTTP_ADDR", func(s *Settings, a string) { s.HTTPAddr = a }),
	},
	{
		theirs: []string{"GRPC_HOST", "GRPC_PORT"}, ours: []string{"RLS_GRPC_ADDR"}, how: compatDiffers,
		note:  "host:port, with GRPC_PORT 8081 when only GRPC_HOST is set; without GRPC_HOST, every address",
		apply: hostPort("GRPC_HOST", "GRPC_PORT", "8081", "RLS_GRPC_ADDR", func(s *Settings, a string) { s.GRPCAddr = a }),
	},
	{
		theirs: []string{"GRPC_UDS"}, how: compatRefused,
		note:  "gRPC is served over TCP only: a unix socket would leave Envoy without a service",
		apply: refuseIfSet("GRPC_UDS"),
	},
	{
		theirs: []string{"DEBUG_HOST", "DEBUG_PORT"}, ours: []string{"RLS_DEBUG_ADDR"}, how: compatDiffers,
		note:  "host:port, with DEBUG_PORT 6070 when only DEBUG_HOST is set: /rlconfig, /metrics and /debug/pprof/, no /stats. Unset, there is no debug listener, where envoyproxy/ratelimit always listens on 6070",
		apply: hostPort("DEBUG_HOST", "DEBUG_PORT", "6070", "RLS_DEBUG_ADDR", func(s *Settings, a string) { s.DebugAddr = a }),
	},
	{
		theirs: []string{"GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT"},
		ours:   []string{"RLS_GRPC_TLS_CERT_FILE", "RLS_GRPC_TLS_KEY_FILE", "RLS_GRPC_TLS_CLIENT_CA_FILE"}, how: compatSame,
		note:  "the files are read only when GRPC_SERVER_USE_TLS is true, as there; a client CA makes TLS mutual",
		apply: applyGRPCTLS,
	},
	{
		theirs: []string{"GRPC_CLIENT_TLS_SAN"}, ours: []string{"RLS_GRPC_TLS_CLIENT_SAN"}, how: compatSame,
		note:  "read only with GRPC_SERVER_USE_TLS true and a GRPC_CLIENT_TLS_CACERT, as there: a client certificate must also be valid for the name",
		apply: applyGRPCClientSAN,
	},
	{
		// Not one of theirs: Envoy Gateway sets it, and its row tells the
		// operator what it does not do.
		theirs: []string{"GRPC_SERVER_TLS_CA_CERT"}, how: compatIgnored,
		note:  "not envoyproxy/ratelimit's: Envoy Gateway sets it, and neither server reads it (the client CA is GRPC_CLIENT_TLS_CACERT), so gRPC is TLS without client certificates, as there",
		apply: ignoreIfSet("GRPC_SERVER_TLS_CA_CERT"),
	},
	{
		theirs: []string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}, how: compatIgnored,
		note:  "no setting for a maximum connection age",
		apply: ignoreIfSet("GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"),
	},
	{
		theirs: []string{"LOG_LEVEL"}, ours: []string{"RLS_LOG_LEVEL"}, how: compatDiffers,
		note:  "any case; trace is debug, warning is warn, fatal and panic are error; unset, the level stays info (envoyproxy/ratelimit's default is warn)",
		apply: applyLogLevel,
	},
	{
		theirs: []string{"LOG_FORMAT"}, ours: []string{"RLS_LOG_FORMAT"}, how: compatDiffers,
		note:  "json is json, anything else text; the fields are ratewarden's own",
		apply: applyLogFormat,
	},
	{
		theirs: []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, ours: []string{"RLS_CONFIG_PATH"}, how: compatSame,
		note:  "the three joined, with envoyproxy/ratelimit's defaults /srv/runtime_data/current and config for those unset: /data, ratelimit and config make /data/ratelimit/config. Every regular file under it is read, whatever its name ends with, in subdirectories too, as there",
		apply: applyRuntimePath,
	},
	{
		theirs: []string{"RUNTIME_WATCH_ROOT"}, how: compatBuiltIn,
		note:  "the directory is watched for changes and for symbolic links swapped (ConfigMap updates) either way",
		apply: applyRuntimeWatch,
	},
	{
		theirs: []string{"RUNTIME_IGNOREDOTFILES"}, ours: []string{"RLS_CONFIG_DOT_FILES"}, how: compatDiffers,
		note: "true is RLS_CONFIG_DOT_FILES=false, ratewarden's default: names starting with . are skipped. false, envoyproxy/ratelimit's default, is ignored with a warning, and they stay skipped: " +
			"a Kubernetes ConfigMap volume holds a second copy of its files in a directory named ..<timestamp>, which envoyproxy/ratelimit then reads too, refusing every domain as a duplicate. " +
			"RLS_CONFIG_DOT_FILES=true reads such names",
		apply: applyDotFiles,
	},
	{
		theirs: []string{"CONFIG_TYPE"}, ours: []string{"RLS_CONFIG_SOURCE"}, how: compatSame,
		note:  "FILE is file, the files of RLS_CONFIG_PATH; GRPC_XDS_SOTW is xds, RateLimitConfig resources from an xDS server, as Envoy Gateway serves them",
		apply: applyConfigType,
	},
	{
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_URL", "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"},
		ours:   []string{"RLS_XDS_SERVER_URL", "RLS_XDS_NODE_ID", "RLS_XDS_NODE_METADATA", "RLS_XDS_HEADERS"}, how: compatSame,
		note: "read with limits from xDS, and ignored otherwise, as there. NODE_METADATA is key=value pairs separated by commas; an entry without = is dropped, as there, with a warning. " +
			"The headers are key:value pairs, and the log shows their names only",
		apply: applyXDSServer,
	},
	{
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN"},
		ours:   []string{"RLS_XDS_TLS", "RLS_XDS_TLS_CERT_FILE", "RLS_XDS_TLS_KEY_FILE", "RLS_XDS_TLS_CA_FILE", "RLS_XDS_TLS_SERVER_NAME"}, how: compatDiffers,
		note: "the files are read only with CONFIG_GRPC_XDS_SERVER_USE_TLS true, as there. A CA file replaces the system's roots rather than adding to them, " +
			"and a certificate without its key (or the reverse) stops the server, where envoyproxy/ratelimit connects without a client certificate",
		apply: applyXDSTLS,
	},
	{
		theirs: []string{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER"},
		ours:   []string{"RLS_XDS_BACKOFF_INITIAL_INTERVAL", "RLS_XDS_BACKOFF_MAX_INTERVAL", "RLS_XDS_BACKOFF_RANDOM_FACTOR", "RLS_XDS_BACKOFF_JITTER"}, how: compatDiffers,
		note: "the wait before reconnecting doubles after each failure, from the initial interval up to the max, spread by ± the random factor with jitter on. " +
			"envoyproxy/ratelimit multiplies it by the random factor instead, so that with its default 0.5 every wait is the initial interval; a factor above 1 is ignored. " +
			"Unset, the intervals are ratewarden's 1s and 30s (there: 10s and 60s)",
		apply: applyXDSBackoff,
	},
	{
		theirs: []string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}, ours: []string{"RLS_XDS_MAX_MESSAGE_BYTES"}, how: compatSame,
		note:  "0 or empty is gRPC's default, 4 MiB, as there",
		apply: applyXDSMaxMessage,
	},
	{
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"}, how: compatIgnored,
		note:  "a broken stream is opened again after the waits of the backoff",
		apply: ignoreIfSet("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"),
	},
	{
		theirs: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}, how: compatBuiltIn,
		note: "with RLS_CONFIG_WATCH (on by default) the server starts without limits and waits for them, not ready; with limits from xDS it always starts, not ready until the first update. " +
			"Until then every request gets envoyproxy/ratelimit's answer before its first configuration, gRPC Unknown \"no rate limit configuration loaded\", so that Envoy's failure mode decides, as there with true. " +
			"With RLS_CONFIG_WATCH=false it starts only with its limits loaded, and true is ignored",
		apply: applyForceStart,
	},
	{
		theirs: []string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}, how: compatBuiltIn,
		note:  "readiness (/ready and grpc.health.v1) is never good without limits loaded. /healthcheck is liveness and answers OK without them (once Redis has answered), so a readiness probe that relied on it belongs on /ready",
		apply: builtInIfSet("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"),
	},
	{
		theirs: []string{"MERGE_DOMAIN_CONFIG"}, ours: []string{"RLS_CONFIG_MERGE_DOMAINS"}, how: compatSame,
		note:  "several files, or xDS resources, may configure one domain; a descriptor given twice stays an error",
		apply: applyBool("MERGE_DOMAIN_CONFIG", "RLS_CONFIG_MERGE_DOMAINS", func(s *Settings, b bool) { s.ConfigMergeDomains = b }),
	},
	{
		theirs: []string{"QUOTA_MODE"}, ours: []string{"RLS_QUOTA_MODE"}, how: compatSame,
		note:  "every descriptor in quota mode, as quota_mode puts one",
		apply: applyBool("QUOTA_MODE", "RLS_QUOTA_MODE", func(s *Settings, b bool) { s.QuotaMode = b }),
	},
	{
		theirs: []string{"RESPONSE_DYNAMIC_METADATA"}, ours: []string{"RLS_RESPONSE_DYNAMIC_METADATA"}, how: compatSame,
		apply: applyBool("RESPONSE_DYNAMIC_METADATA", "RLS_RESPONSE_DYNAMIC_METADATA", func(s *Settings, b bool) { s.ResponseDynamicMetadata = b }),
	},
	{
		theirs: []string{"USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH"},
		ours:   []string{"RLS_METRICS_NAMES", "RLS_METRICS_ADDR", "RLS_METRICS_PATH"}, how: compatDiffers,
		note:  "with USE_PROMETHEUS true: envoyproxy/ratelimit's metric names and ratewarden's (both), on PROMETHEUS_ADDR (:9090) at PROMETHEUS_PATH (/metrics); /metrics on the HTTP port stays",
		apply: applyPrometheus,
	},
	{
		theirs: []string{"PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"}, how: compatIgnored,
		note:  "the names are those of envoyproxy/ratelimit's default mapping, and times are in seconds; the mapping file is not read",
		apply: ignoreIfSet("PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"),
	},
	{
		theirs: []string{"USE_STATSD", "STATSD_HOST", "STATSD_PORT", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS"},
		how:    compatIgnored, note: "no statsd: the metrics are Prometheus's, always on",
		apply: applyStatsd,
	},
	{
		theirs: []string{"BACKEND_TYPE"}, ours: []string{"RLS_BACKEND"}, how: compatRefused,
		note:  "redis is redis; memcache is refused: ratewarden has no memcached backend",
		apply: applyBackendType,
	},
	{
		theirs: []string{"REDIS_SOCKET_TYPE"}, how: compatRefused,
		note:  "tcp is what ratewarden does; unix is refused: Redis is reached over TCP only",
		apply: applySocketType,
	},
	{
		theirs: []string{"REDIS_TYPE", "REDIS_URL"},
		ours:   []string{"RLS_BACKEND", "RLS_REDIS_MODE", "RLS_REDIS_ADDRS", "RLS_REDIS_SENTINEL_MASTER", "RLS_REDIS_USERNAME", "RLS_REDIS_PASSWORD", "RLS_REDIS_DB", "RLS_REDIS_TLS"},
		how:    compatSame,
		note:   "SINGLE, CLUSTER and SENTINEL in any case are standalone, cluster and sentinel; a REDIS_URL makes the backend redis. REDIS_URL is host:port or redis://[user:password@]host:port[/db] (rediss:// for TLS), a comma list for a cluster, and for Sentinel the master's name then the Sentinels",
		apply:  applyRedisURL,
	},
	{
		theirs: []string{"REDIS_AUTH", "REDIS_SENTINEL_AUTH"},
		ours:   []string{"RLS_REDIS_USERNAME", "RLS_REDIS_PASSWORD", "RLS_REDIS_SENTINEL_USERNAME", "RLS_REDIS_SENTINEL_PASSWORD"}, how: compatSame,
		note:  "password, or user:password",
		apply: applyRedisAuth,
	},
	{
		theirs: []string{"REDIS_TLS", "REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"},
		ours:   []string{"RLS_REDIS_TLS", "RLS_REDIS_TLS_CA_FILE", "RLS_REDIS_TLS_CERT_FILE", "RLS_REDIS_TLS_KEY_FILE", "RLS_REDIS_TLS_SKIP_HOSTNAME_VERIFY"}, how: compatDiffers,
		note:  "read only with REDIS_TLS true, as there; a CA file replaces the system's roots rather than adding to them. Skipping the hostname still verifies the chain",
		apply: applyRedisTLS,
	},
	{
		theirs: []string{"REDIS_POOL_SIZE"}, ours: []string{"RLS_REDIS_POOL_SIZE"}, how: compatSame,
		note:  "connections per Redis server",
		apply: applyInt("REDIS_POOL_SIZE", "RLS_REDIS_POOL_SIZE", func(s *Settings, n int) { s.Redis.PoolSize = n }),
	},
	{
		theirs: []string{"REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM"}, how: compatBuiltIn,
		note:  "concurrent requests always share pipelined round trips, on every cluster node at once",
		apply: builtInIfSet("REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM"),
	},
	{
		theirs: []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"},
		how:    compatBuiltIn,
		note: "the server starts without Redis and checks it every RLS_BACKEND_HEALTH_INTERVAL for as long as it takes; /healthcheck fails until Redis first answers, as there, where the HTTP port opens only then (with REDIS_STARTUP_MAX_ELAPSED_TIME 0, its default). " +
			"After that readiness follows Redis and /healthcheck does not",
		apply: builtInIfSet("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"),
	},
	{
		theirs: []string{"REDIS_TIMEOUT"}, ours: []string{"RLS_BACKEND_TIMEOUT_MAX"}, how: compatDiffers,
		note:  "theirs bounds each Redis connection and command; here it caps each request's whole budget for Redis, which is otherwise its caller's gRPC deadline less RLS_DEADLINE_RESERVE",
		apply: applyDuration("REDIS_TIMEOUT", "RLS_BACKEND_TIMEOUT_MAX", func(s *Settings, d time.Duration) { s.BackendTimeoutMax = d }),
	},
	{
		theirs: []string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_POOL_ON_EMPTY_WAIT_DURATION"}, how: compatIgnored,
		note:  "a request waits for a connection within its own budget, as for Redis",
		apply: ignoreIfSet("REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_POOL_ON_EMPTY_WAIT_DURATION"),
	},
	{
		theirs: []string{"REDIS_PERSECOND", "REDIS_PERSECOND_*"}, how: compatIgnored,
		note:  "one Redis holds every limit, per-second ones too",
		apply: applyPerSecond,
	},
	{
		theirs: []string{"CACHE_KEY_PREFIX"}, ours: []string{"RLS_KEY_PREFIX"}, how: compatDiffers,
		note:  "the keys after it are ratewarden's own, so envoyproxy/ratelimit's counters are not read; no braces",
		apply: applyString("CACHE_KEY_PREFIX", "RLS_KEY_PREFIX", func(s *Settings, v string) { s.KeyPrefix = v }),
	},
	{
		theirs: []string{"EXPIRATION_JITTER_MAX_SECONDS"}, how: compatIgnored,
		note:  "each key expires when its state would be as good as new",
		apply: ignoreIfSet("EXPIRATION_JITTER_MAX_SECONDS"),
	},
	{
		theirs: []string{"LOCAL_CACHE_SIZE_IN_BYTES"}, ours: []string{"RLS_DENY_CACHE", "RLS_DENY_CACHE_SIZE"}, how: compatDiffers,
		note:  "0 turns the deny cache off; more keeps one denial per 256 bytes. Unset, the deny cache stays on (envoyproxy/ratelimit's local cache is off by default)",
		apply: applyLocalCache,
	},
	{
		theirs: []string{"NEAR_LIMIT_RATIO"}, ours: []string{"RLS_NEAR_LIMIT_RATIO"}, how: compatSame,
		apply: applyFloat("NEAR_LIMIT_RATIO", "RLS_NEAR_LIMIT_RATIO", func(s *Settings, f float64) { s.NearLimitRatio = f }),
	},
	{
		theirs: []string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"}, how: compatBuiltIn,
		note:  "denied hits are never counted, and with RLS_REFUND_ON_DENY (on) neither is anything else a denied request took",
		apply: builtInIfSet("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"),
	},
	{
		theirs: []string{"SHADOW_MODE"}, ours: []string{"RLS_SHADOW_MODE"}, how: compatSame,
		apply: applyBool("SHADOW_MODE", "RLS_SHADOW_MODE", func(s *Settings, b bool) { s.ShadowMode = b }),
	},
	{
		theirs: []string{"LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"},
		ours:   []string{"RLS_LIMIT_HEADERS", "RLS_LIMIT_HEADER_LIMIT", "RLS_LIMIT_HEADER_REMAINING", "RLS_LIMIT_HEADER_RESET"}, how: compatDiffers,
		note:  "the same headers for the same descriptor; the reset is the answer's duration_until_reset, which for a fixed window is the end of the window as there",
		apply: applyLimitHeaders,
	},
	{
		theirs: []string{"TRACING_ENABLED", "TRACING_EXPORTER_PROTOCOL", "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID", "TRACING_SAMPLING_RATE"},
		ours: []string{"RLS_TRACING", "RLS_TRACING_PROTOCOL", "RLS_TRACING_SERVICE_NAME", "RLS_TRACING_SERVICE_NAMESPACE",
			"RLS_TRACING_SERVICE_INSTANCE_ID", "RLS_TRACING_SAMPLING_RATE"},
		how:   compatDiffers,
		note:  "http and grpc are http/protobuf and grpc; the OTEL_* variables are read by both. Unset, the service name is ratewarden (envoyproxy/ratelimit's: RateLimit) and the instance id none (there: a random UUID)",
		apply: applyTracing,
	},
	{
		theirs: []string{"MEMCACHE_*"}, how: compatIgnored,
		note:  "no memcached backend",
		apply: applyMemcache,
	},
}

// compatContext is what a conversion sees: their variables, and the
// Settings it may assign.
type compatContext struct {
	lookup func(string) (string, bool)
	s      *Settings
	v      *compatVar
	report *CompatReport
}

// get returns the value of their variable name, and whether it is set.
func (c *compatContext) get(name string) (string, bool) { return c.lookup(name) }

// isSet reports whether any of their variables is set.
func (c *compatContext) isSet(names ...string) bool {
	for _, n := range names {
		if _, ok := c.lookup(n); ok {
			return true
		}
	}
	return false
}

// set runs assign, which sets the field of the RLS_ variable ours to value,
// unless ours is set in the environment: then the explicit value wins, and
// the report says so. The report names the row's variables that are set as
// the source, and keeps the values of passwords out.
func (c *compatContext) set(ours, value string, assign func()) {
	c.setFrom(c.setNames(), ours, value, assign)
}

// setFrom is set for a value that comes from the variables from alone.
func (c *compatContext) setFrom(from []string, ours, value string, assign func()) {
	if _, explicit := c.lookup(ours); explicit {
		c.report.Overridden = append(c.report.Overridden, CompatNote{Theirs: from, Ours: ours})
		return
	}
	assign()
	if strings.HasSuffix(ours, "_PASSWORD") {
		value = "[redacted]"
	}
	c.report.Applied = append(c.report.Applied, CompatNote{Theirs: from, Ours: ours, Value: value})
}

// ignore reports their variables that are set as not read, with why.
func (c *compatContext) ignore(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.Ignored = append(c.report.Ignored, CompatNote{Theirs: set, Why: why})
	}
}

// builtIn reports their variables that are set as needing no setting.
func (c *compatContext) builtIn(why string, names ...string) {
	if set := c.setNames(names...); len(set) > 0 {
		c.report.BuiltIn = append(c.report.BuiltIn, CompatNote{Theirs: set, Why: why})
	}
}

// setNames returns those of names (by default the row's variables) that
// are set.
func (c *compatContext) setNames(names ...string) []string {
	if len(names) == 0 {
		names = c.v.theirs
	}
	var set []string
	for _, n := range names {
		if _, ok := c.lookup(n); ok {
			set = append(set, n)
		}
	}
	return set
}

// CompatNote is one line of a CompatReport.
type CompatNote struct {
	// Theirs are the envoyproxy/ratelimit variables concerned.
	Theirs []string
	// Ours is the RLS_ variable they set, or that overrode them.
	Ours string
	// Value is the value they gave Ours; secrets are redacted.
	Value string
	// Why says why they were not read, or need no setting.
	Why string
}

// CompatReport says what became of the envoyproxy/ratelimit variables that
// are set: LoadSettings fills it and New logs it, once, at start.
type CompatReport struct {
	// Applied lists the RLS_ settings they gave values to.
	Applied []CompatNote
	// Overridden lists those whose RLS_ variable is set as well, and wins.
	Overridden []CompatNote
	// BuiltIn lists those whose effect ratewarden always has.
	BuiltIn []CompatNote
	// Ignored lists those that are not read.
	Ignored []CompatNote
}

// log writes the report: applied and overridden variables at info, built-in
// ones at debug, ignored ones at warn.
func (r *CompatReport) log(logger *slog.Logger) {
	for _, n := range r.Applied {
		logger.Info("read envoyproxy/ratelimit variable", "from", strings.Join(n.Theirs, ","), "setting", n.Ours, "value", n.Value)
	}
	for _, n := range r.Overridden {
		logger.Info("envoyproxy/ratelimit variable overridden by an RLS_ variable", "from", strings.Join(n.Theirs, ","), "setting", n.Ours)
	}
	for _, n := range r.BuiltIn {
		logger.Debug("envoyproxy/ratelimit variable needs no setting", "variables", strings.Join(n.Theirs, ","), "why", n.Why)
	}
	for _, n := range r.Ignored {
		logger.Warn("envoyproxy/ratelimit variable ignored", "variables", strings.Join(n.Theirs, ","), "why", n.Why)
	}
}

// explain adds to err, an error of Settings.Validate, which of
// envoyproxy/ratelimit's variables gave the settings it names their value,
// so that an operator who set REDIS_URL learns that RLS_REDIS_ADDRS came
// from it.
func (r *CompatReport) explain(err error) error {
	msg := err.Error()
	var from []string
	for _, n := range r.Applied {
		// Validate names the Redis settings as a group, RLS_REDIS_*.
		if mentions(msg, n.Ours) || (strings.HasPrefix(n.Ours, "RLS_REDIS_") && strings.Contains(msg, "RLS_REDIS_*")) {
			from = append(from, n.Ours+" from "+strings.Join(n.Theirs, ","))
		}
	}
	if len(from) == 0 {
		return err
	}
	return fmt.Errorf("%w (envoyproxy/ratelimit's variables set %s)", err, strings.Join(from, "; "))
}

// mentions reports whether msg names the variable name, and not only a
// longer one that starts with it (RLS_XDS_TLS_CERT_FILE for RLS_XDS_TLS).
func mentions(msg, name string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, name)
		if i < 0 {
			return false
		}
		rest = rest[i+len(name):]
		if rest == "" || !(rest[0] == '_' || rest[0] >= 'A' && rest[0] <= 'Z' || rest[0] >= '0' && rest[0] <= '9') {
			return true
		}
	}
}

// applyCompatEnv converts the envoyproxy/ratelimit variables that lookup
// finds into s, row by row of compatVars, and reports what it did. Its
// errors name their variable.
func applyCompatEnv(s *Settings, lookup func(string) (string, bool)) (*CompatReport, error) {
	report := &CompatReport{}
	var errs []error
	for i := range compatVars {
		c := &compatContext{lookup: lookup, s: s, v: &compatVars[i], report: report}
		if err := c.v.apply(c); err != nil {
			errs = append(errs, fmt.Errorf("server: %w", err))
		}
	}
	return report, errors.Join(errs...)
}

// parseTheirBool parses a boolean as envoyproxy/ratelimit's envconfig
// does.
func parseTheirBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %q is not true or false", name, v)
	}
	return b, nil
}

// theirBool returns their boolean variable name, false when unset.
func (c *compatContext) theirBool(name string) (bool, error) {
	v, ok := c.get(name)
	if !ok {
		return false, nil
	}
	return parseTheirBool(name, v)
}

func hostPort(hostVar, portVar, defaultPort, ours string, assign func(*Settings, string)) func(*compatContext) error {
	return func(c *compatContext) error {
		host, hostSet := c.get(hostVar)
		port, portSet := c.get(portVar)
		if !hostSet && !portSet {
			return nil
		}
		if !portSet {
			port = defaultPort
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("%s %q is not a port number", portVar, port)
		}
		addr := net.JoinHostPort(host, port)
		c.set(ours, addr, func() { assign(c.s, addr) })
		return nil
	}
}

func refuseIfSet(name string) func(*compatContext) error {
	return func(c *compatContext) error {
		if v, ok := c.get(name); ok && v != "" {
			return fmt.Errorf("%s is set, and %s; unset it", name, c.v.note)
		}
		return nil
	}
}

func ignoreIfSet(names ...string) func(*compatContext) error {
	return func(c *compatContext) error {
		c.ignore(c.v.note, names...)
		return nil
	}
}

func builtInIfSet(names ...string) func(*compatContext) error {
	return func(c *compatContext) error {
		c.builtIn(c.v.note, names...)
		return nil
	}
}

func applyString(theirs, ours string, assign func(*Settings, string)) func(*compatContext) error {
	return func(c *compatContext) error {
		if v, ok := c.get(theirs); ok {
			c.setFrom([]string{theirs}, ours, v, func() { assign(c.s, v) })
		}
		return nil
	}
}

func applyBool(theirs, ours string, assign func(*Settings, bool)) func(*compatContext) error {
	return func(c *compatContext) error {
		v, ok := c.get(theirs)
		if !ok {
			return nil
		}
		b, err := parseTheirBool(theirs, v)
		if err != nil {
			return err
		}
		c.setFrom([]string{theirs}, ours, strconv.FormatBool(b), func() { assign(c.s, b) })
		return nil
	}
}

func applyInt(theirs, ours string, assign func(*Settings, int)) func(*compatContext) error {
	return func(c *compatContext) error {
		v, ok := c.get(theirs)
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s %q is not a whole number", theirs, v)
		}
		c.setFrom([]string{theirs}, ours, v, func() { assign(c.s, n) })
		return nil
	}
}

func applyDuration(theirs, ours string, assign func(*Settings, time.Duration)) func(*compatContext) error {
	return func(c *compatContext) error {
		v, ok := c.get(theirs)
		if !ok {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("%s %q is not a duration such as 50ms or 2s", theirs, v)
		}
		c.setFrom([]string{theirs}, ours, v, func() { assign(c.s, d) })
		return nil
	}
}

func applyFloat(theirs, ours string, assign func(*Settings, float64)) func(*compatContext) error {
	return func(c *compatContext) error {
		v, ok := c.get(theirs)
		if !ok {
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s %q is not a number", theirs, v)
		}
		c.setFrom([]string{theirs}, ours, v, func() { assign(c.s, f) })
		return nil
	}
}

func applyGRPCTLS(c *compatContext) error {
	on, err := c.theirBool("GRPC_SERVER_USE_TLS")
	if err != nil {
		return err
	}
	if !on {
		c.ignore("GRPC_SERVER_USE_TLS is not true", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT")
		return nil
	}
	cert, _ := c.get("GRPC_SERVER_TLS_CERT")
	key, _ := c.get("GRPC_SERVER_TLS_KEY")
	if cert == "" || key == "" {
		return errors.New("GRPC_SERVER_USE_TLS is true, but GRPC_SERVER_TLS_CERT or GRPC_SERVER_TLS_KEY is empty")
	}
	c.set("RLS_GRPC_TLS_CERT_FILE", cert, func() { c.s.GRPCTlsCertFile = cert })
	c.set("RLS_GRPC_TLS_KEY_FILE", key, func() { c.s.GRPCTlsKeyFile = key })
	if ca, _ := c.get("GRPC_CLIENT_TLS_CACERT"); ca != "" {
		c.set("RLS_GRPC_TLS_CLIENT_CA_FILE", ca, func() { c.s.GRPCTlsClientCaFile = ca })
	}
	return nil
}

func applyGRPCClientSAN(c *compatContext) error {
	san, _ := c.get("GRPC_CLIENT_TLS_SAN")
	if san == "" {
		return nil
	}
	on, err := c.theirBool("GRPC_SERVER_USE_TLS")
	if err != nil {
		return err
	}
	if ca, _ := c.get("GRPC_CLIENT_TLS_CACERT"); !on || ca == "" {
		c.ignore("without GRPC_SERVER_USE_TLS true and a GRPC_CLIENT_TLS_CACERT no client certificate is asked for", "GRPC_CLIENT_TLS_SAN")
		return nil
	}
	c.set("RLS_GRPC_TLS_CLIENT_SAN", san, func() { c.s.GRPCTlsClientSan = san })
	return nil
}

func applyLogLevel(c *compatContext) error {
	v, ok := c.get("LOG_LEVEL")
	if !ok {
		return nil
	}
	var level string
	switch strings.ToLower(v) {
	case "trace", "debug":
		level = "debug"
	case "info":
		level = "info"
	case "warn", "warning":
		level = "warn"
	case "error", "fatal", "panic":
		level = "error"
	default:
		return fmt.Errorf("LOG_LEVEL %q is not trace, debug, info, warn, error, fatal or panic", v)
	}
	c.set("RLS_LOG_LEVEL", level, func() { c.s.LogLevel = level })
	return nil
}

func applyLogFormat(c *compatContext) error {
	v, ok := c.get("LOG_FORMAT")
	if !ok {
		return nil
	}
	format := "text"
	if strings.EqualFold(v, "json") {
		format = "json"
	}
	c.set("RLS_LOG_FORMAT", format, func() { c.s.LogFormat = format })
	return nil
}

func applyRuntimePath(c *compatContext) error {
	if !c.isSet("RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY") {
		return nil
	}
	root, ok := c.get("RUNTIME_ROOT")
	if !ok {
		root = "/srv/runtime_data/current"
	}
	sub, _ := c.get("RUNTIME_SUBDIRECTORY")
	app, ok := c.get("RUNTIME_APPDIRECTORY")
	if !ok {
		app = "config"
	}
	path := filepath.Join(root, sub, app)
	c.set("RLS_CONFIG_PATH", path, func() { c.s.ConfigPath = path })
	return nil
}

func applyRuntimeWatch(c *compatContext) error {
	if v, ok := c.get("RUNTIME_WATCH_ROOT"); ok {
		if _, err := parseTheirBool("RUNTIME_WATCH_ROOT", v); err != nil {
			return err
		}
		c.builtIn(c.v.note, "RUNTIME_WATCH_ROOT")
	}
	return nil
}

// applyDotFiles takes RUNTIME_IGNOREDOTFILES. Its true is ratewarden's
// default; its false is not followed, because on a Kubernetes ConfigMap
// volume envoyproxy/ratelimit then reads the volume's ..<timestamp>
// directory besides the links to it, loads every file twice and refuses the
// domains as duplicates (goruntime's walk enters that directory, and only
// fails to read the ..data link to it).
func applyDotFiles(c *compatContext) error {
	v, ok := c.get("RUNTIME_IGNOREDOTFILES")
	if !ok {
		return nil
	}
	ignore, err := parseTheirBool("RUNTIME_IGNOREDOTFILES", v)
	if err != nil {
		return err
	}
	if ignore {
		c.set("RLS_CONFIG_DOT_FILES", "false", func() { c.s.ConfigDotFiles = false })
		return nil
	}
	c.ignore("names starting with . stay skipped, so that a ConfigMap volume's second copy of its files under ..<timestamp> is not loaded; RLS_CONFIG_DOT_FILES=true reads them", "RUNTIME_IGNOREDOTFILES")
	return nil
}

func applyConfigType(c *compatContext) error {
	v, ok := c.get("CONFIG_TYPE")
	if !ok {
		return nil
	}
	var source string
	switch strings.ToUpper(v) {
	case "FILE":
		source = "file"
	case "GRPC_XDS_SOTW":
		source = "xds"
	default:
		return fmt.Errorf("CONFIG_TYPE %q is not FILE or GRPC_XDS_SOTW", v)
	}
	c.set("RLS_CONFIG_SOURCE", source, func() { c.s.ConfigSource = source })
	return nil
}

// applyForceStart takes FORCE_START_WITHOUT_INITIAL_CONFIG. ratewarden
// starts before its limits wherever it can wait for them, and reports not
// ready until they are in force, which keeps traffic away as not starting
// would: true asks for nothing more there, and false for nothing less. Only
// files read once (RLS_CONFIG_WATCH=false) must be there at the start.
func applyForceStart(c *compatContext) error {
	const name = "FORCE_START_WITHOUT_INITIAL_CONFIG"
	force, err := c.theirBool(name)
	if err != nil || !c.isSet(name) {
		return err
	}
	switch {
	case c.s.configFromXDS():
		c.builtIn("with limits from xDS the server starts at once, not ready until the first update", name)
	case c.s.ConfigWatch:
		c.builtIn("with RLS_CONFIG_WATCH the server starts without limits and waits for them, not ready", name)
	case force:
		c.ignore("with RLS_CONFIG_WATCH=false the server starts only with its limits loaded", name)
	default:
		c.builtIn("with RLS_CONFIG_WATCH=false the server starts only with its limits loaded", name)
	}
	return nil
}

func applyPrometheus(c *compatContext) error {
	on, err := c.theirBool("USE_PROMETHEUS")
	if err != nil {
		return err
	}
	if !on {
		c.ignore("USE_PROMETHEUS is not true", "PROMETHEUS_ADDR", "PROMETHEUS_PATH")
		return nil
	}
	addr, ok := c.get("PROMETHEUS_ADDR")
	if !ok {
		addr = ":9090"
	}
	path, ok := c.get("PROMETHEUS_PATH")
	if !ok {
		path = "/metrics"
	}
	names := metrics.NamesBoth.String()
	c.set("RLS_METRICS_NAMES", names, func() { c.s.MetricsNames = names })
	c.set("RLS_METRICS_ADDR", addr, func() { c.s.MetricsAddr = addr })
	c.set("RLS_METRICS_PATH", path, func() { c.s.MetricsPath = path })
	return nil
}

func applyStatsd(c *compatContext) error {
	for _, name := range []string{"USE_STATSD", "USE_DOG_STATSD", "DISABLE_STATS"} {
		v, ok := c.get(name)
		if !ok {
			continue
		}
		b, err := parseTheirBool(name, v)
		if err != nil {
			return err
		}
		switch {
		case name == "DISABLE_STATS" && b:
			c.ignore("the Prometheus metrics are always served", name)
		case name == "DISABLE_STATS", !b:
			c.builtIn("no statsd is what ratewarden does", name)
		default:
			c.ignore("no statsd: the metrics are Prometheus's, on /metrics of the HTTP port", name)
		}
	}
	c.ignore("no statsd", "STATSD_HOST", "STATSD_PORT", "USE_DOG_STATSD_MOGRIFIERS", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL")
	return nil
}

func applyBackendType(c *compatContext) error {
	v, ok := c.get("BACKEND_TYPE")
	if !ok {
		return nil
	}
	switch v {
	case "redis", "":
		c.set("RLS_BACKEND", "redis", func() { c.s.Backend = BackendRedis })
		return nil
	case "memcache":
		return errors.New("BACKEND_TYPE is memcache, and ratewarden has no memcached backend; use redis")
	}
	return fmt.Errorf("BACKEND_TYPE %q is not redis or memcache", v)
}

func applySocketType(c *compatContext) error {
	v, ok := c.get("REDIS_SOCKET_TYPE")
	if !ok {
		return nil
	}
	switch v {
	case "tcp":
		c.builtIn("Redis is reached over TCP", "REDIS_SOCKET_TYPE")
		return nil
	case "unix":
		if _, urlSet := c.get("REDIS_URL"); !urlSet {
			// Their default, with their default unix socket URL, which
			// nothing here uses.
			c.ignore("REDIS_URL is not set", "REDIS_SOCKET_TYPE")
			return nil
		}
		return errors.New("REDIS_SOCKET_TYPE is unix, and ratewarden reaches Redis over TCP only; use tcp and a host:port REDIS_URL")
	}
	return fmt.Errorf("REDIS_SOCKET_TYPE %q is not tcp or unix", v)
}

// redisTarget is what REDIS_TYPE and REDIS_URL say of where Redis is.
type redisTarget struct {
	mode       redisx.Mode
	addrs      []string
	master     string
	user, pass string
	auth       bool // user and pass came with a URL
	db         int
	dbSet      bool
	tls        bool
}

// parseRedisURL reads REDIS_URL as envoyproxy/ratelimit's REDIS_TYPE reads
// it: one address, a comma list for a cluster, or for Sentinel the master's
// name followed by the Sentinels. Each address is host:port or a
// redis:// (rediss:// for TLS) URL that may carry a user, a password and a
// database.
func parseRedisURL(typ, raw string) (redisTarget, error) {
	var t redisTarget
	switch strings.ToLower(typ) {
	case "", "single":
		t.mode = redisx.ModeStandalone
	case "cluster":
		t.mode = redisx.ModeCluster
	case "sentinel":
		t.mode = redisx.ModeSentinel
	default:
		return t, fmt.Errorf("REDIS_TYPE %q is not SINGLE, SENTINEL or CLUSTER", typ)
	}
	parts := strings.Split(raw, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if t.mode == redisx.ModeSentinel {
		if len(parts) < 2 || parts[0] == "" {
			return t, errors.New("REDIS_URL: with REDIS_TYPE sentinel, want the master's name and the Sentinels: mymaster,host1:26379,host2:26379")
		}
		t.master, parts = parts[0], parts[1:]
	}
	for _, p := range parts {
		addr, err := t.address(p)
		if err != nil {
			return t, err
		}
		t.addrs = append(t.addrs, addr)
	}
	return t, nil
}

// address returns the host:port of one element of REDIS_URL, keeping what
// a URL says of the user, password, database and TLS.
func (t *redisTarget) address(p string) (string, error) {
	if !strings.HasPrefix(p, "redis://") && !strings.HasPrefix(p, "rediss://") {
		return p, nil
	}
	u, err := url.Parse(p)
	if err != nil {
		// The URL may hold a password: name the element by its place.
		return "", errors.New("REDIS_URL holds an element that is not a valid redis:// URL")
	}
	if u.Scheme == "rediss" {
		t.tls = true
	}
	if u.User != nil {
		t.auth = true
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
		if _, hasPass := u.User.Password(); !hasPass && t.user != "" {
			// redis://password@host: a password alone.
			t.user, t.pass = "", t.user
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil {
			return "", fmt.Errorf("REDIS_URL: database %q is not a number", db)
		}
		t.db, t.dbSet = n, true
	}
	return u.Host, nil
}

func applyRedisURL(c *compatContext) error {
	typ, typeSet := c.get("REDIS_TYPE")
	raw, urlSet := c.get("REDIS_URL")
	if !typeSet && !urlSet {
		return nil
	}
	t, err := parseRedisURL(typ, raw)
	if err != nil {
		return err
	}
	mode := string(t.mode)
	c.set("RLS_REDIS_MODE", mode, func() { c.s.Redis.Mode = t.mode })
	if !urlSet {
		return nil
	}
	if _, backendSet := c.get("BACKEND_TYPE"); !backendSet {
		c.set("RLS_BACKEND", "redis", func() { c.s.Backend = BackendRedis })
	}
	c.set("RLS_REDIS_ADDRS", strings.Join(t.addrs, ","), func() { c.s.Redis.Addrs = t.addrs })
	if t.master != "" {
		c.set("RLS_REDIS_SENTINEL_MASTER", t.master, func() { c.s.Redis.SentinelMaster = t.master })
	}
	if t.auth && !c.isSet("REDIS_AUTH") {
		if t.user != "" {
			c.set("RLS_REDIS_USERNAME", t.user, func() { c.s.Redis.Username = t.user })
		}
		c.set("RLS_REDIS_PASSWORD", t.pass, func() { c.s.Redis.Password = t.pass })
	}
	if t.dbSet {
		c.set("RLS_REDIS_DB", strconv.Itoa(t.db), func() { c.s.Redis.DB = t.db })
	}
	if t.tls {
		c.set("RLS_REDIS_TLS", "true", func() { c.s.Redis.TLS = true })
	}
	return nil
}

func applyRedisAuth(c *compatContext) error {
	if v, ok := c.get("REDIS_AUTH"); ok && v != "" {
		user, pass, found := strings.Cut(v, ":")
		if !found {
			user, pass = "", v
		}
		if user != "" {
			c.set("RLS_REDIS_USERNAME", user, func() { c.s.Redis.Username = user })
		}
		c.set("RLS_REDIS_PASSWORD", pass, func() { c.s.Redis.Password = pass })
	}
	if v, ok := c.get("REDIS_SENTINEL_AUTH"); ok && v != "" {
		user, pass, found := strings.Cut(v, ":")
		if !found {
			user, pass = "", v
		}
		if user != "" {
			c.set("RLS_REDIS_SENTINEL_USERNAME", user, func() { c.s.Redis.SentinelUsername = user })
		}
		c.set("RLS_REDIS_SENTINEL_PASSWORD", pass, func() { c.s.Redis.SentinelPassword = pass })
	}
	return nil
}

func applyRedisTLS(c *compatContext) error {
	on, err := c.theirBool("REDIS_TLS")
	if err != nil {
		return err
	}
	if !on {
		c.ignore("REDIS_TLS is not true", "REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
		return nil
	}
	c.set("RLS_REDIS_TLS", "true", func() { c.s.Redis.TLS = true })
	skip, err := c.theirBool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
	if err != nil {
		return err
	}
	if skip {
		c.set("RLS_REDIS_TLS_SKIP_HOSTNAME_VERIFY", "true", func() { c.s.Redis.TLSSkipHostnameVerify = true })
	}
	for _, f := range []struct {
		theirs, ours string
		field        *string
	}{
		{"REDIS_TLS_CACERT", "RLS_REDIS_TLS_CA_FILE", &c.s.Redis.TLSCaFile},
		{"REDIS_TLS_CLIENT_CERT", "RLS_REDIS_TLS_CERT_FILE", &c.s.Redis.TLSCertFile},
		{"REDIS_TLS_CLIENT_KEY", "RLS_REDIS_TLS_KEY_FILE", &c.s.Redis.TLSKeyFile},
	} {
		if v, _ := c.get(f.theirs); v != "" {
			c.set(f.ours, v, func() { *f.field = v })
		}
	}
	return nil
}

func applyPerSecond(c *compatContext) error {
	on, err := c.theirBool("REDIS_PERSECOND")
	if err != nil {
		return err
	}
	if on {
		c.ignore("one Redis, REDIS_URL's, holds every limit, per-second ones too", "REDIS_PERSECOND")
	} else {
		c.builtIn("one Redis holds every limit", "REDIS_PERSECOND")
	}
	c.ignore("one Redis holds every limit", compatPrefixed["REDIS_PERSECOND_"]...)
	return nil
}

func applyMemcache(c *compatContext) error {
	c.ignore("no memcached backend", compatPrefixed["MEMCACHE_"]...)
	return nil
}

// compatPrefixed lists, by prefix, the variables of envoyproxy/ratelimit
// that a row names as PREFIX*.
var compatPrefixed = map[string][]string{
	"REDIS_PERSECOND_": {
		"REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE",
		"REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW",
		"REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_TIMEOUT",
		"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "REDIS_PERSECOND_POOL_ON_EMPTY_WAIT_DURATION",
	},
	"MEMCACHE_": {
		"MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS",
		"MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
	},
}

// denyCacheEntryBytes is what one remembered denial is taken to cost, to
// turn LOCAL_CACHE_SIZE_IN_BYTES into a number of entries.
const denyCacheEntryBytes = 256

func applyLocalCache(c *compatContext) error {
	v, ok := c.get("LOCAL_CACHE_SIZE_IN_BYTES")
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("LOCAL_CACHE_SIZE_IN_BYTES %q is not a size in bytes", v)
	}
	if n == 0 {
		c.set("RLS_DENY_CACHE", "false", func() { c.s.DenyCache = false })
		return nil
	}
	entries := max(1, n/denyCacheEntryBytes)
	c.set("RLS_DENY_CACHE", "true", func() { c.s.DenyCache = true })
	c.set("RLS_DENY_CACHE_SIZE", strconv.Itoa(entries), func() { c.s.DenyCacheSize = entries })
	return nil
}

func applyLimitHeaders(c *compatContext) error {
	if err := applyBool("LIMIT_RESPONSE_HEADERS_ENABLED", "RLS_LIMIT_HEADERS", func(s *Settings, b bool) { s.LimitHeaders = b })(c); err != nil {
		return err
	}
	for _, h := range []struct {
		theirs, ours string
		assign       func(*Settings, string)
	}{
		{"LIMIT_LIMIT_HEADER", "RLS_LIMIT_HEADER_LIMIT", func(s *Settings, v string) { s.LimitHeaderLimit = v }},
		{"LIMIT_REMAINING_HEADER", "RLS_LIMIT_HEADER_REMAINING", func(s *Settings, v string) { s.LimitHeaderRemaining = v }},
		{"LIMIT_RESET_HEADER", "RLS_LIMIT_HEADER_RESET", func(s *Settings, v string) { s.LimitHeaderReset = v }},
	} {
		if err := applyString(h.theirs, h.ours, h.assign)(c); err != nil {
			return err
		}
	}
	return nil
}

// compatTable writes compatVars as the Markdown table of docs/migrating.md.
func compatTable() string {
	var b strings.Builder
	b.WriteString("| envoyproxy/ratelimit | ratewarden | how | notes |\n|---|---|---|---|\n")
	code := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = "`" + n + "`"
		}
		return strings.Join(quoted, ", ")
	}
	for _, v := range compatVars {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", code(v.theirs), code(v.ours), v.how, v.note)
	}
	return b.String()
}

func applyTracing(c *compatContext) error {
	if err := applyBool("TRACING_ENABLED", "RLS_TRACING", func(s *Settings, b bool) { s.Tracing = b })(c); err != nil {
		return err
	}
	if v, ok := c.get("TRACING_EXPORTER_PROTOCOL"); ok {
		var protocol string
		switch v {
		case "http", "":
			protocol = tracing.ProtocolHTTP
		case "grpc":
			protocol = tracing.ProtocolGRPC
		default:
			return fmt.Errorf("TRACING_EXPORTER_PROTOCOL %q is not http or grpc", v)
		}
		c.set("RLS_TRACING_PROTOCOL", protocol, func() { c.s.TracingProtocol = protocol })
	}
	for _, f := range []struct {
		theirs, ours string
		assign       func(*Settings, string)
	}{
		{"TRACING_SERVICE_NAME", "RLS_TRACING_SERVICE_NAME", func(s *Settings, v string) { s.TracingServiceName = v }},
		{"TRACING_SERVICE_NAMESPACE", "RLS_TRACING_SERVICE_NAMESPACE", func(s *Settings, v string) { s.TracingServiceNamespace = v }},
		{"TRACING_SERVICE_INSTANCE_ID", "RLS_TRACING_SERVICE_INSTANCE_ID", func(s *Settings, v string) { s.TracingServiceInstanceID = v }},
		{"TRACING_SAMPLING_RATE", "RLS_TRACING_SAMPLING_RATE", func(s *Settings, v string) { s.TracingSamplingRate = v }},
	} {
		if err := applyString(f.theirs, f.ours, f.assign)(c); err != nil {
			return err
		}
	}
	return nil
}
