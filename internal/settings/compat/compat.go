// Package compat reads envoyproxy/ratelimit's environment variables, so
// that a deployment made for it (Istio's sample, Envoy Gateway's generated
// Deployment, plain manifests, Compose files) runs ratewarden by a change of
// image alone. table is the table of them: for each, the RLS_ variables it
// stands in for and a conversion. Apply runs the conversions after the
// RLS_ variables are read, and gives the RLS_ variables that are not set a
// value, as text that the setting's own type parses, as it parses the RLS_
// variable: an explicit RLS_ value always wins, and theirs only replaces
// ratewarden's defaults. docs/migrating.md holds the table as docTable
// writes it; a test keeps the two in step.
//
// The package knows ratewarden's settings by their variables' names alone,
// through a Target, which the settings implement.
package compat

import (
	"errors"
	"fmt"
	"strings"
)

// Target is what Apply gives values to: ratewarden's RLS_ variables, by
// name. The settings implement it over the Settings being loaded.
type Target interface {
	// Set parses text into the RLS_ variable name, with that variable's
	// own type, as it would parse the variable's value. An unknown name is
	// an error; every error names the variable.
	Set(name, text string) error
	// Get returns the current value of the RLS_ variable name, as text:
	// "xds" for RLS_CONFIG_SOURCE=xds, "true" or "false" for a boolean; ""
	// for a name that is no variable.
	Get(name string) string
}

// treatment says what becomes of one of envoyproxy/ratelimit's variables.
type treatment string

// The ways their variables are taken.
const (
	// same: read into an RLS_ variable with the same meaning.
	same treatment = "same"
	// differs: read into an RLS_ variable, with the difference its
	// note says.
	differs treatment = "differs"
	// builtIn: ratewarden always behaves as the variable asks (or
	// better), without a setting.
	builtIn treatment = "built in"
	// ignored: not read; a value that asks for something ratewarden
	// does not do is logged at warn with the reason.
	ignored treatment = "ignored"
	// refused: a value that ratewarden cannot honour stops the
	// server, because serving without it would go wrong in silence.
	refused treatment = "refused"
)

// row is how a group of envoyproxy/ratelimit's variables, read
// together, is taken.
type row struct {
	// theirs are their variables, with their default in envoyproxy/ratelimit
	// where it matters.
	theirs []string
	// ours are the RLS_ variables that take their place.
	ours []string
	how  treatment
	// note says in a few words how they differ, why they are ignored,
	// or which values are refused. docs/migrating.md shows it, and the
	// start log gives it as the reason of rows taken by ignoreIfSet,
	// builtInIfSet or refuseIfSet. What it leaves out is in the row's
	// comment.
	note string
	// apply converts: it reads their values from c, and gives RLS_
	// variables values through c.set, or reports through c.ignore,
	// c.builtIn or an error.
	apply func(c *conversion) error
}

// table is the table of envoyproxy/ratelimit's variables (its
// src/settings/settings.go), and of GRPC_SERVER_TLS_CA_CERT, which Envoy
// Gateway sets for it although it reads no such name. Names that are set
// but in none of these rows are none of theirs, and stay unread. A row may
// read what the rows before it assigned (the xDS rows, CONFIG_TYPE's).
var table = []row{
	{
		// host:port, with PORT 8080 when only HOST is set. Without HOST the
		// server listens on every address, IPv6 too, where
		// envoyproxy/ratelimit takes 0.0.0.0.
		theirs: []string{"HOST", "PORT"}, ours: []string{"RLS_HTTP_ADDR"}, how: differs,
		note:  "no HOST: every address, IPv6 too",
		apply: hostPort("HOST", "PORT", "8080", "RLS_HTTP_ADDR"),
	},
	{
		// host:port, with GRPC_PORT 8081 when only GRPC_HOST is set.
		theirs: []string{"GRPC_HOST", "GRPC_PORT"}, ours: []string{"RLS_GRPC_ADDR"}, how: differs,
		note:  "no GRPC_HOST: every address, IPv6 too",
		apply: hostPort("GRPC_HOST", "GRPC_PORT", "8081", "RLS_GRPC_ADDR"),
	},
	{
		// A unix socket would leave Envoy without a service.
		theirs: []string{"GRPC_UDS"}, how: refused,
		note:  "gRPC is served over TCP only",
		apply: refuseIfSet,
	},
	{
		// host:port, with DEBUG_PORT 6070 when only DEBUG_HOST is set. The
		// listener serves /rlconfig, /metrics and /debug/pprof/. Unset, there
		// is none, where envoyproxy/ratelimit always listens on 6070.
		theirs: []string{"DEBUG_HOST", "DEBUG_PORT"}, ours: []string{"RLS_DEBUG_ADDR"}, how: differs,
		note:  "unset: none; no /stats",
		apply: hostPort("DEBUG_HOST", "DEBUG_PORT", "6070", "RLS_DEBUG_ADDR"),
	},
	{
		// The files are read only when GRPC_SERVER_USE_TLS is true, as
		// there; a client CA makes TLS mutual.
		theirs: []string{"GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT"},
		ours:   []string{"RLS_GRPC_TLS_CERT_FILE", "RLS_GRPC_TLS_KEY_FILE", "RLS_GRPC_TLS_CLIENT_CA_FILE"}, how: same,
		apply: applyGRPCTLS,
	},
	{
		// Read only with GRPC_SERVER_USE_TLS true and a GRPC_CLIENT_TLS_CACERT,
		// as there: a client certificate must also be valid for the name.
		theirs: []string{"GRPC_CLIENT_TLS_SAN"}, ours: []string{"RLS_GRPC_TLS_CLIENT_SAN"}, how: same,
		apply: applyGRPCClientSAN,
	},
	{
		// Not one of theirs: Envoy Gateway sets it, and its row tells the
		// operator what it does not do. Neither server reads it (the client
		// CA is GRPC_CLIENT_TLS_CACERT), so gRPC is TLS without client
		// certificates, as there.
		theirs: []string{"GRPC_SERVER_TLS_CA_CERT"}, how: ignored,
		note:  "Envoy Gateway's; neither server reads it",
		apply: ignoreIfSet,
	},
	{
		theirs: []string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}, how: ignored,
		note:  "no maximum connection age",
		apply: ignoreIfSet,
	},
	{
		// Any case; trace is debug, warning is warn, fatal and panic are
		// error. Unset, the level stays info.
		theirs: []string{"LOG_LEVEL"}, ours: []string{"RLS_LOG_LEVEL"}, how: differs,
		note:  "unset: info (there: warn)",
		apply: applyLogLevel,
	},
	{
		theirs: []string{"LOG_FORMAT"}, ours: []string{"RLS_LOG_FORMAT"}, how: differs,
		note:  "json, else text",
		apply: applyLogFormat,
	},
	{
		// The three joined, with envoyproxy/ratelimit's defaults
		// /srv/runtime_data/current and config for those unset: /data,
		// ratelimit and config make /data/ratelimit/config. Every regular file
		// under it is read, whatever its name ends with, in subdirectories
		// too, as there.
		theirs: []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, ours: []string{"RLS_CONFIG_PATH"}, how: same,
		apply: applyRuntimePath,
	},
	{
		// The directory is watched for changes and for symbolic links
		// swapped (ConfigMap updates) either way.
		theirs: []string{"RUNTIME_WATCH_ROOT"}, how: builtIn,
		note:  "always watched",
		apply: applyRuntimeWatch,
	},
	{
		// true is RLS_CONFIG_DOT_FILES=false, ratewarden's default: names
		// starting with . are skipped. false, envoyproxy/ratelimit's default,
		// is ignored with a warning (applyDotFiles says why).
		theirs: []string{"RUNTIME_IGNOREDOTFILES"}, ours: []string{"RLS_CONFIG_DOT_FILES"}, how: differs,
		note:  "false ignored: dot files skipped",
		apply: applyDotFiles,
	},
	{
		// FILE is file, the files of RLS_CONFIG_PATH; GRPC_XDS_SOTW is xds,
		// RateLimitConfig resources from an xDS server, as Envoy Gateway
		// serves them.
		theirs: []string{"CONFIG_TYPE"}, ours: []string{"RLS_CONFIG_SOURCE"}, how: same,
		apply: applyConfigType,
	},
	{
		// Read with limits from xDS, and ignored otherwise, as there.
		// NODE_METADATA is key=value pairs separated by commas; an entry
		// without = is dropped, as there, with a warning. The headers are
		// key:value pairs, and the log shows their names only.
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_URL", "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"},
		ours:   []string{"RLS_XDS_SERVER_URL", "RLS_XDS_NODE_ID", "RLS_XDS_NODE_METADATA", "RLS_XDS_HEADERS"}, how: same,
		apply: applyXDSServer,
	},
	{
		// The files are read only with CONFIG_GRPC_XDS_SERVER_USE_TLS true, as
		// there. A CA file replaces the system's roots rather than adding to
		// them, and a certificate without its key (or the reverse) stops the
		// server, where envoyproxy/ratelimit connects without a client
		// certificate.
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN"},
		ours:   []string{"RLS_XDS_TLS", "RLS_XDS_TLS_CERT_FILE", "RLS_XDS_TLS_KEY_FILE", "RLS_XDS_TLS_CA_FILE", "RLS_XDS_TLS_SERVER_NAME"}, how: differs,
		note:  "CA file replaces system roots",
		apply: applyXDSTLS,
	},
	{
		// The wait before reconnecting doubles after each failure, from the
		// initial interval up to the max, spread by ± the random factor with
		// jitter on. envoyproxy/ratelimit multiplies it by the random factor
		// instead, so that with its default 0.5 every wait is the initial
		// interval; a factor above 1 is ignored.
		theirs: []string{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER"},
		ours:   []string{"RLS_XDS_BACKOFF_INITIAL_INTERVAL", "RLS_XDS_BACKOFF_MAX_INTERVAL", "RLS_XDS_BACKOFF_RANDOM_FACTOR", "RLS_XDS_BACKOFF_JITTER"}, how: differs,
		note:  "unset: 1s to 30s (there: 10s to 60s)",
		apply: applyXDSBackoff,
	},
	{
		// 0 or empty is gRPC's default, 4 MiB, as there.
		theirs: []string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}, ours: []string{"RLS_XDS_MAX_MESSAGE_BYTES"}, how: same,
		apply: applyXDSMaxMessage,
	},
	{
		theirs: []string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"}, how: ignored,
		note:  "reconnects follow the backoff",
		apply: ignoreIfSet,
	},
	{
		// With RLS_CONFIG_WATCH (on by default) the server starts without
		// limits and waits for them, not ready; with limits from xDS it always
		// starts, not ready until the first update. Until then every request
		// gets envoyproxy/ratelimit's answer before its first configuration,
		// gRPC Unknown "no rate limit configuration loaded", so that Envoy's
		// failure mode decides, as there with true. With
		// RLS_CONFIG_WATCH=false it starts only with its limits loaded, and
		// true is ignored.
		theirs: []string{"FORCE_START_WITHOUT_INITIAL_CONFIG"}, how: builtIn,
		note:  "starts without limits, not ready",
		apply: applyForceStart,
	},
	{
		// Readiness (/ready and grpc.health.v1) is never good without limits
		// loaded. /healthcheck is liveness and answers OK without them (once
		// Redis has answered), so a readiness probe that relied on it belongs
		// on /ready.
		theirs: []string{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}, how: builtIn,
		note:  "/ready always needs limits loaded",
		apply: builtInIfSet,
	},
	{
		// Several files, or xDS resources, may configure one domain; a
		// descriptor given twice stays an error.
		theirs: []string{"MERGE_DOMAIN_CONFIG"}, ours: []string{"RLS_CONFIG_MERGE_DOMAINS"}, how: same,
		apply: sameBool,
	},
	{
		// Every descriptor in quota mode, as quota_mode puts one.
		theirs: []string{"QUOTA_MODE"}, ours: []string{"RLS_QUOTA_MODE"}, how: same,
		apply: sameBool,
	},
	{
		theirs: []string{"RESPONSE_DYNAMIC_METADATA"}, ours: []string{"RLS_RESPONSE_DYNAMIC_METADATA"}, how: same,
		apply: sameBool,
	},
	{
		// With USE_PROMETHEUS true: envoyproxy/ratelimit's metric names and
		// ratewarden's (both), on PROMETHEUS_ADDR (:9090) at PROMETHEUS_PATH
		// (/metrics); /metrics on the HTTP port stays.
		theirs: []string{"USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH"},
		ours:   []string{"RLS_METRICS_NAMES", "RLS_METRICS_ADDR", "RLS_METRICS_PATH"}, how: differs,
		note:  "true: both names, on PROMETHEUS_ADDR too",
		apply: applyPrometheus,
	},
	{
		// The names are those of envoyproxy/ratelimit's default mapping, and
		// times are in seconds; the mapping file is not read.
		theirs: []string{"PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"}, how: ignored,
		note:  "default mapping's names; times in seconds",
		apply: ignoreIfSet,
	},
	{
		theirs: []string{"USE_STATSD", "STATSD_HOST", "STATSD_PORT", "USE_DOG_STATSD", "USE_DOG_STATSD_MOGRIFIERS", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS"},
		how:    ignored, note: "no statsd",
		apply: applyStatsd,
	},
	{
		// redis is redis; memcache is refused: ratewarden has no memcached
		// backend.
		theirs: []string{"BACKEND_TYPE"}, ours: []string{"RLS_BACKEND"}, how: refused,
		note:  "memcache",
		apply: applyBackendType,
	},
	{
		// tcp is what ratewarden does; unix is refused: Redis is reached
		// over TCP only.
		theirs: []string{"REDIS_SOCKET_TYPE"}, how: refused,
		note:  "unix",
		apply: applySocketType,
	},
	{
		// SINGLE, CLUSTER and SENTINEL in any case are standalone, cluster and
		// sentinel. REDIS_URL is host:port or
		// redis://[user:password@]host:port[/db] (rediss:// for TLS), a comma
		// list for a cluster, and for Sentinel the master's name then the
		// Sentinels.
		theirs: []string{"REDIS_TYPE", "REDIS_URL"},
		ours:   []string{"RLS_BACKEND", "RLS_REDIS_MODE", "RLS_REDIS_ADDRS", "RLS_REDIS_SENTINEL_MASTER", "RLS_REDIS_USERNAME", "RLS_REDIS_PASSWORD", "RLS_REDIS_DB", "RLS_REDIS_TLS"},
		how:    same,
		note:   "REDIS_URL implies redis",
		apply:  applyRedisURL,
	},
	{
		// A password, or user:password.
		theirs: []string{"REDIS_AUTH", "REDIS_SENTINEL_AUTH"},
		ours:   []string{"RLS_REDIS_USERNAME", "RLS_REDIS_PASSWORD", "RLS_REDIS_SENTINEL_USERNAME", "RLS_REDIS_SENTINEL_PASSWORD"}, how: same,
		apply: applyRedisAuth,
	},
	{
		// Read only with REDIS_TLS true, as there. A CA file replaces the
		// system's roots rather than adding to them. Skipping the hostname
		// still verifies the chain.
		theirs: []string{"REDIS_TLS", "REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"},
		ours:   []string{"RLS_REDIS_TLS", "RLS_REDIS_TLS_CA_FILE", "RLS_REDIS_TLS_CERT_FILE", "RLS_REDIS_TLS_KEY_FILE", "RLS_REDIS_TLS_SKIP_HOSTNAME_VERIFY"}, how: differs,
		note:  "CA file replaces system roots",
		apply: applyRedisTLS,
	},
	{
		// Connections per Redis server.
		theirs: []string{"REDIS_POOL_SIZE"}, ours: []string{"RLS_REDIS_POOL_SIZE"}, how: same,
		apply: sameInt,
	},
	{
		theirs: []string{"REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM"}, how: builtIn,
		note:  "always pipelined",
		apply: builtInIfSet,
	},
	{
		// The server starts without Redis and checks it every
		// RLS_BACKEND_HEALTH_INTERVAL for as long as it takes; /healthcheck
		// fails until Redis first answers, as there, where the HTTP port opens
		// only then (with REDIS_STARTUP_MAX_ELAPSED_TIME 0, its default).
		// After that readiness follows Redis and /healthcheck does not.
		theirs: []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"},
		how:    builtIn,
		note:   "starts without Redis; readiness follows it",
		apply:  builtInIfSet,
	},
	{
		// Theirs bounds each Redis connection and command; here it caps each
		// request's whole budget for Redis, which is otherwise its caller's
		// gRPC deadline less RLS_DEADLINE_RESERVE.
		theirs: []string{"REDIS_TIMEOUT"}, ours: []string{"RLS_BACKEND_TIMEOUT_MAX"}, how: differs,
		note:  "caps each request's Redis budget",
		apply: sameDuration,
	},
	{
		theirs: []string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_POOL_ON_EMPTY_WAIT_DURATION"}, how: ignored,
		note:  "waits within the request's budget",
		apply: ignoreIfSet,
	},
	{
		theirs: []string{"REDIS_PERSECOND", "REDIS_PERSECOND_*"}, how: ignored,
		note:  "one Redis holds every limit",
		apply: applyPerSecond,
	},
	{
		// envoyproxy/ratelimit's counters are not read; no braces.
		theirs: []string{"CACHE_KEY_PREFIX"}, ours: []string{"RLS_KEY_PREFIX"}, how: differs,
		note:  "keys after it differ",
		apply: sameString,
	},
	{
		theirs: []string{"EXPIRATION_JITTER_MAX_SECONDS"}, how: ignored,
		note:  "keys expire when no longer needed",
		apply: ignoreIfSet,
	},
	{
		// 0 turns the deny cache off; more keeps one denial per 256 bytes.
		// Unset, the deny cache stays on (envoyproxy/ratelimit's local cache
		// is off by default).
		theirs: []string{"LOCAL_CACHE_SIZE_IN_BYTES"}, ours: []string{"RLS_DENY_CACHE", "RLS_DENY_CACHE_SIZE"}, how: differs,
		note:  "0: deny cache off; unset: on",
		apply: applyLocalCache,
	},
	{
		theirs: []string{"NEAR_LIMIT_RATIO"}, ours: []string{"RLS_NEAR_LIMIT_RATIO"}, how: same,
		apply: sameFloat,
	},
	{
		// With RLS_REFUND_ON_DENY (on), neither is anything else a denied
		// request took.
		theirs: []string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"}, how: builtIn,
		note:  "denied hits are never counted",
		apply: builtInIfSet,
	},
	{
		theirs: []string{"SHADOW_MODE"}, ours: []string{"RLS_SHADOW_MODE"}, how: same,
		apply: sameBool,
	},
	{
		// The same headers for the same descriptor; the reset is the answer's
		// duration_until_reset, which for a fixed window is the end of the
		// window as there.
		theirs: []string{"LIMIT_RESPONSE_HEADERS_ENABLED", "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"},
		ours:   []string{"RLS_LIMIT_HEADERS", "RLS_LIMIT_HEADER_LIMIT", "RLS_LIMIT_HEADER_REMAINING", "RLS_LIMIT_HEADER_RESET"}, how: differs,
		note:  "reset: duration_until_reset, rounded up",
		apply: applyLimitHeaders,
	},
	{
		// http and grpc are http/protobuf and grpc; the OTEL_* variables are
		// read by both. Unset, the service name is ratewarden
		// (envoyproxy/ratelimit's: RateLimit) and the instance id none
		// (there: a random UUID).
		theirs: []string{"TRACING_ENABLED", "TRACING_EXPORTER_PROTOCOL", "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID", "TRACING_SAMPLING_RATE"},
		ours: []string{"RLS_TRACING", "RLS_TRACING_PROTOCOL", "RLS_TRACING_SERVICE_NAME", "RLS_TRACING_SERVICE_NAMESPACE",
			"RLS_TRACING_SERVICE_INSTANCE_ID", "RLS_TRACING_SAMPLING_RATE"},
		how:   differs,
		note:  "unset name: ratewarden (there: RateLimit)",
		apply: applyTracing,
	},
	{
		theirs: []string{"MEMCACHE_*"}, how: ignored,
		note:  "no memcached backend",
		apply: applyMemcache,
	},
}

// Apply converts the envoyproxy/ratelimit variables that lookup finds
// into target's RLS_ variables, row by row of table, and reports what it
// did. lookup returns the value of a variable and whether it is set, theirs
// and ours alike: an RLS_ variable that lookup finds set keeps its value,
// and the report says so. Its errors name their variable. Apply keeps no
// state of its own: calls with targets of their own may run at once.
func Apply(lookup func(string) (string, bool), target Target) (*Report, error) {
	report := &Report{}
	var errs []error
	for i := range table {
		c := &conversion{lookup: lookup, target: target, v: &table[i], report: report}
		if err := c.v.apply(c); err != nil {
			errs = append(errs, fmt.Errorf("server: %w", err))
		}
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return report, errors.Join(errs...)
}

// docTable writes table as the Markdown table of docs/migrating.md: for
// each row, their variables, then the RLS_ variables that take their place
// and the note, which says how ignored, built-in and refused rows are taken
// and why.
func docTable() string {
	var b strings.Builder
	b.WriteString("| envoyproxy/ratelimit | ratewarden |\n|---|---|\n")
	code := func(names []string) string {
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = "`" + n + "`"
		}
		return strings.Join(quoted, ", ")
	}
	for _, v := range table {
		var parts []string
		if len(v.ours) > 0 {
			parts = append(parts, code(v.ours))
		}
		switch {
		case v.how == ignored || v.how == builtIn || v.how == refused:
			parts = append(parts, string(v.how)+": "+v.note)
		case v.note != "":
			parts = append(parts, v.note)
		}
		fmt.Fprintf(&b, "| %s | %s |\n", code(v.theirs), strings.Join(parts, "; "))
	}
	return b.String()
}
