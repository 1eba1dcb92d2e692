// Package settings holds every setting of the server: one typed struct,
// Settings, read once from RLS_ variables by Load, validated once. A
// variable that sets an option of a package (the service's, a layer's)
// takes its default from that package's DefaultOptions and is checked by
// its Validate (options.go); the server's own variables have their
// defaults in the struct's tags. A setting whose value is more than a
// string, a number or a duration has a type that parses itself
// (encoding.TextUnmarshaler), so no string is kept to be parsed again later.
// envoyproxy/ratelimit's variables are a table of their own (package
// compat), which gives the RLS_ variables that are not set their values,
// by name.
//
// Every error Load and Validate return names the variable at fault and
// begins with "server: ", as the server's own errors do: it is the name
// operators know these messages by.
package settings

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings/compat"
)

// Prefix prefixes every environment variable the server reads.
const Prefix = "RLS"

// Settings is everything the server reads from its environment: each field
// is the variable RLS_ and its name in upper-case words (GRPCAddr is
// RLS_GRPC_ADDR). No field has an envconfig name of its own, and Load reads
// no variable without the RLS_ prefix. The tags hold each variable's
// meaning, and the default of those that set no package's option:
// docs/settings.md lists them all, and PrintUsage prints the same
// list, with Default's values.
//
// The zero Settings is not valid; Load returns them with their defaults.
type Settings struct {
	GRPCAddr   string `split_words:"true" default:":8081" desc:"gRPC listen address (RateLimitService, health, reflection)"`
	HTTPAddr   string `split_words:"true" default:":8080" desc:"HTTP listen address (/healthcheck, /ready, /json, /explain, /rlconfig, /metrics); empty disables HTTP"`
	ConfigPath string `split_words:"true" default:"./config" desc:"limits YAML: a file, or a directory whose files, in its subdirectories too, are all read"`

	// ConfigSource says where the limits come from; the XDS fields, how
	// they come from an xDS server.
	ConfigSource ConfigSource `split_words:"true" default:"file" desc:"where the limits come from: file (RLS_CONFIG_PATH) or xds (RateLimitConfig resources from the xDS server at RLS_XDS_SERVER_URL, as Envoy Gateway serves them); envoyproxy/ratelimit's FILE and GRPC_XDS_SOTW mean the same"`

	ConfigWatch        bool                      `split_words:"true" default:"true" desc:"reload RLS_CONFIG_PATH when its files change; an invalid change is logged and the limits in force stay. A path with nothing to load yet is waited for, not ready"`
	ConfigPollInterval time.Duration             `split_words:"true" desc:"with RLS_CONFIG_WATCH, also re-read RLS_CONFIG_PATH this often, for volumes that send no change notifications; 0s turns it off"`
	ConfigMergeDomains bool                      `split_words:"true" desc:"let several files, or xDS resources, configure one domain: their descriptors join one tree; a top-level descriptor given twice stays an error"`
	ConfigDotFiles     bool                      `split_words:"true" desc:"also read files and directories of RLS_CONFIG_PATH whose names start with '.', which Kubernetes ConfigMap volumes use for a second copy of their files"`
	WildcardPrecedence config.WildcardPrecedence `split_words:"true" desc:"which of several wildcard values of one key that match a value wins: first (in the order of the files) or most_specific (the most characters besides '*')"`

	// The gRPC TLS fields are spelled Tls and Ca so that split_words makes
	// their names RLS_GRPC_TLS_CERT_FILE and so on.
	GRPCTlsCertFile     string `split_words:"true" desc:"PEM certificate chain of the gRPC server; with RLS_GRPC_TLS_KEY_FILE, gRPC is served over TLS 1.2 or later, and the files are re-read when they change"`
	GRPCTlsKeyFile      string `split_words:"true" desc:"PEM private key of RLS_GRPC_TLS_CERT_FILE"`
	GRPCTlsClientCaFile string `split_words:"true" desc:"PEM CA certificates: gRPC clients must present a certificate they signed (mutual TLS); needs RLS_GRPC_TLS_CERT_FILE"`
	GRPCTlsClientSan    string `split_words:"true" desc:"with RLS_GRPC_TLS_CLIENT_CA_FILE, a name every client certificate must also be valid for: one of its DNS names (wildcards as host names match them) or, for an IP address, one of its IP addresses"`

	XDSServerURL              string            `split_words:"true" default:"localhost:18000" desc:"with RLS_CONFIG_SOURCE=xds, the xDS management server, host:port"`
	XDSNodeID                 string            `split_words:"true" default:"default" desc:"node id sent to the xDS server, which serves each node its own limits (Envoy Gateway serves envoy-ratelimit)"`
	XDSNodeMetadata           NodeMetadata      `split_words:"true" desc:"node metadata sent to the xDS server: comma list of key=value"`
	XDSHeaders                map[string]string `split_words:"true" desc:"gRPC metadata sent to the xDS server when the stream opens: comma list of key:value"`
	XDSTls                    bool              `split_words:"true" default:"false" desc:"connect to the xDS server over TLS 1.2 or later"`
	XDSTlsCertFile            string            `split_words:"true" desc:"PEM client certificate chain presented to the xDS server (mutual TLS); needs RLS_XDS_TLS"`
	XDSTlsKeyFile             string            `split_words:"true" desc:"PEM private key of RLS_XDS_TLS_CERT_FILE"`
	XDSTlsCaFile              string            `split_words:"true" desc:"PEM CA certificates the xDS server's certificate must chain to; empty means the system roots"`
	XDSTlsServerName          string            `split_words:"true" desc:"name the xDS server's certificate must carry; empty means the host of RLS_XDS_SERVER_URL"`
	XDSBackoffInitialInterval time.Duration     `split_words:"true" desc:"first wait before reconnecting to the xDS server; each failure in a row doubles it"`
	XDSBackoffMaxInterval     time.Duration     `split_words:"true" desc:"longest wait before reconnecting to the xDS server, before the jitter"`
	XDSBackoffRandomFactor    float64           `split_words:"true" desc:"with RLS_XDS_BACKOFF_JITTER, each wait is drawn from ± this share of itself, in [0, 1]"`
	XDSBackoffJitter          bool              `split_words:"true" desc:"spread the waits before reconnecting at random, so that replicas do not return together"`
	XDSMaxMessageBytes        int               `split_words:"true" default:"4194304" desc:"largest response taken from the xDS server, in bytes"`
	// XDSDefaultAlgorithm counts the limits that come over xDS, which
	// cannot name an algorithm.
	XDSDefaultAlgorithm algorithms.Algorithm `split_words:"true" default:"fixed_window" desc:"algorithm of the limits that come over xDS (RateLimitConfig resources cannot name one); fixed_window counts them as envoyproxy/ratelimit does. Their hits are recorded even past the limit, as that service records them"`
	// XDSCalendar counts the limits of these units that come over xDS in
	// calendar windows, which a RateLimitConfig cannot ask for.
	XDSCalendar config.CalendarUnits `split_words:"true" desc:"units of the limits that come over xDS to count in calendar windows (UTC): any of day, week, month, year, comma-separated, as calendar: true counts a file's limit; empty: windows of fixed length from the epoch (a month of 30 days), as envoyproxy/ratelimit counts them. Calendar windows are fixed windows"`

	// The service's settings and the layers' take their defaults from
	// their packages (rls.DefaultOptions, breaker.DefaultOptions, ...):
	// see bindings.
	Backend          Backend              `split_words:"true" default:"memory" desc:"where limits are counted: memory (this process only) or redis"`
	DefaultAlgorithm algorithms.Algorithm `split_words:"true" desc:"algorithm of limits that name none: fixed_window, sliding_window_log, sliding_window_counter or token_bucket"`
	FailureMode      rls.FailureMode      `split_words:"true" desc:"answer when the backend fails or times out: error (gRPC UNAVAILABLE), allow (OK) or deny (OVER_LIMIT)"`
	BackendTimeout   time.Duration        `split_words:"true" desc:"budget for the backend of a request whose caller sends no gRPC deadline, from its arrival: its take and the refund of a denied request share it; a caller's own deadline, less RLS_DEADLINE_RESERVE, is its request's budget however long or short"`
	BreakerFailures  int                  `split_words:"true" desc:"consecutive backend failures that open the circuit breaker: requests then get the failure mode at once, without calling the backend; 0 disables it"`
	BreakerCooldown  time.Duration        `split_words:"true" desc:"how long the open circuit breaker waits before letting probe calls through; the first success closes the breaker"`
	NearLimitRatio   float64              `split_words:"true" desc:"share of a limit's capacity, in (0, 1], at or above which admitted hits count as near_limit in the metrics"`
	ShadowMode       bool                 `split_words:"true" desc:"count and report, but answer OK to every request; a descriptor over its limit keeps its OVER_LIMIT status"`
	RefundOnDeny     bool                 `split_words:"true" desc:"give back what a denied request took from its other descriptors and limits"`
	RetryAfter       bool                 `split_words:"true" desc:"add a retry-after header, the seconds until the request would be admitted, to every answer over its limits (envoyproxy/ratelimit adds none)"`
	QuotaMode        bool                 `split_words:"true" desc:"put every descriptor in quota mode, as quota_mode puts one: a descriptor over its limit is reported OVER_LIMIT but denies the request only when every quota descriptor of it is over"`

	ResponseDynamicMetadata bool `split_words:"true" desc:"answer with dynamic metadata: the request's domain, descriptors and hits, and the metadata of the rules that admitted it"`

	BackendHealthInterval time.Duration `split_words:"true" default:"1s" desc:"how often the backend is checked for readiness (grpc.health.v1 and /ready): that it takes writes; /healthcheck waits for its first answer"`
	BackendHealthTimeout  time.Duration `split_words:"true" default:"250ms" desc:"longest wait for one readiness check of the backend"`

	// Redis is read from RLS_REDIS_*: RLS_REDIS_ADDRS, RLS_REDIS_MODE, ….
	Redis     Redis
	KeyPrefix string `split_words:"true" default:"ratewarden:" desc:"prefix of every Redis key; must not contain '{' or '}'"`
	// RedisPipelinesPerCPU sets how many pipelines the Redis limiter keeps
	// in flight (redisx.NewLimiter). Fewer pipelines carry more calls each,
	// which costs Redis less per decision (one read and one write per
	// pipeline): on 2 CPUs, 1 per CPU cost Redis 17 to 28 µs of CPU per
	// decision where 4 per CPU cost 23 to 35 (`go -C bench run
	// ./cmd/loadgen rediscost`).
	RedisPipelinesPerCPU int `split_words:"true" default:"1" desc:"pipelines in flight to Redis per CPU (at least 2 in all): concurrent requests share them, so fewer cost Redis less per decision and more wait less on a CPU-starved host"`
	// DenyCache answers repeated denials locally (redis backend only).
	DenyCache     bool `split_words:"true" default:"true" desc:"with the redis backend, answer a take that Redis denied, until its retry time, from memory instead of asking Redis again"`
	DenyCacheSize int  `split_words:"true" desc:"most denials the deny cache remembers"`
	// Leases serve hot limits locally from reservations taken from Redis
	// (internal/layers/lease). LeaseTime bounds how long hits are held
	// away from the other replicas; LeaseMinHits is the least demand in a
	// lease time that leases a limit at all, so that cold limits never do.
	Leases       bool          `default:"true" desc:"with the redis backend, serve a limit this replica asks often from leases: hits reserved in Redis with one take, admitted locally, the unused given back"`
	LeaseTime    time.Duration `split_words:"true" desc:"longest a lease serves hits (and holds them from the other replicas) before what is left goes back"`
	LeaseMinHits uint64        `split_words:"true" desc:"least demand of this replica on a limit within a lease time for the limit to be leased; limits asked less go to Redis take by take"`
	// RLQS serves the Rate Limit Quota Service on the gRPC port, beside
	// RateLimitService (internal/rlqs).
	RLQS bool `default:"true" desc:"serve the Rate Limit Quota Service (envoy.service.rate_limit_quota.v3) on the gRPC port: token buckets granted to Envoy's rate_limit_quota filter that never add up past a limit"`

	LogLevel  LogLevel  `split_words:"true" default:"info" desc:"debug, info, warn or error"`
	LogFormat LogFormat `split_words:"true" default:"text" desc:"text or json"`

	ShutdownDelay   time.Duration `split_words:"true" default:"0s" desc:"on SIGTERM, how long to report NOT_SERVING before refusing new calls"`
	ShutdownTimeout time.Duration `split_words:"true" default:"10s" desc:"on SIGTERM, how long in-flight calls may take to finish"`

	// What one request may ask, so that no client hurts the others (see
	// rls.Bounds, and rls.DefaultBounds for why the defaults are what
	// they are): beyond these a request gets InvalidArgument.
	MaxDescriptors       int           `split_words:"true" desc:"most descriptors one request may have; Envoy sends one per rate limit action that applies, Envoy Gateway at most one per rule of a policy (at most 256)"`
	MaxEntries           int           `split_words:"true" desc:"most entries one descriptor may have; no rule matches more than 64"`
	AllowNegativeHits    bool          `split_words:"true" desc:"let is_negative_hits give hits back where a descriptor does not set allow_negative_hits, and for overrides of descriptors that match no rule; elsewhere such hits are taken"`
	MaxHits              uint64        `split_words:"true" desc:"most hits one descriptor may take or give back in one request"`
	MaxLogHits           uint64        `split_words:"true" desc:"most hits one descriptor may take from or give back to a sliding_window_log in one request (one log entry each)"`
	MaxOverrideLogSize   uint64        `split_words:"true" desc:"largest requests_per_unit of a limit override enforced by a sliding_window_log"`
	MaxOverrideLifetime  time.Duration `split_words:"true" desc:"longest the state (and the Redis keys) of a limit override may live: its window, twice that for sliding_window_counter"`
	MaxUnmatchedEntries  int           `split_words:"true" desc:"most entries of a descriptor that matches no rule but brings a limit override"`
	MaxUnmatchedKeyBytes int           `split_words:"true" desc:"longest key identity (between the braces) of a descriptor that matches no rule but brings a limit override"`

	// The limit headers: LimitHeaders turns them on, the others name them.
	LimitHeaders         bool   `split_words:"true" default:"false" desc:"add the most constrained limit's requests_per_unit, limit_remaining and seconds until reset to every decided answer, as headers for Envoy to add to the client's response"`
	LimitHeaderLimit     string `split_words:"true" default:"RateLimit-Limit" desc:"with RLS_LIMIT_HEADERS, the name of the header that carries the limit"`
	LimitHeaderRemaining string `split_words:"true" default:"RateLimit-Remaining" desc:"with RLS_LIMIT_HEADERS, the name of the header that carries what remains"`
	LimitHeaderReset     string `split_words:"true" default:"RateLimit-Reset" desc:"with RLS_LIMIT_HEADERS, the name of the header that carries the seconds until the limit resets"`

	// Metrics: whose names, and a listener of their own.
	MetricsNames metrics.Names `split_words:"true" default:"ratewarden" desc:"metric names to export: ratewarden (ratewarden_*), ratelimit (envoyproxy/ratelimit's ratelimit_service_*) or both"`
	MetricsAddr  string        `split_words:"true" desc:"listen address of a metrics-only HTTP server, serving RLS_METRICS_PATH, beside /metrics on RLS_HTTP_ADDR; empty: none"`
	MetricsPath  string        `split_words:"true" default:"/metrics" desc:"path of the metrics on RLS_METRICS_ADDR"`

	// DebugAddr serves /rlconfig, /metrics and the Go profiles.
	DebugAddr string `split_words:"true" desc:"listen address of a debug HTTP server: /rlconfig, /metrics and the Go profiles under /debug/pprof/; empty: none"`

	// AddrFile names the file the bound addresses are written to, for
	// whoever started the server with port 0 in its addresses.
	AddrFile string `split_words:"true" desc:"file to write the addresses the listeners are bound to, once they serve, as JSON (grpc, http, metrics, debug: host:port), for a supervisor that starts the server on port 0; empty: none"`

	// Tracing: OpenTelemetry, exported over OTLP as the OTEL_* variables say.
	Tracing                  bool            `split_words:"true" default:"false" desc:"trace ShouldRateLimit calls and their backend calls with OpenTelemetry, exported over OTLP as OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables say"`
	TracingProtocol          TracingProtocol `split_words:"true" desc:"OTLP protocol of the traces: grpc or http/protobuf; empty: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf"`
	TracingServiceName       string          `split_words:"true" desc:"service.name of the traces; empty: OTEL_SERVICE_NAME, else ratewarden"`
	TracingServiceNamespace  string          `split_words:"true" desc:"service.namespace of the traces; empty: none, or what OTEL_RESOURCE_ATTRIBUTES says"`
	TracingServiceInstanceID string          `split_words:"true" desc:"service.instance.id of the traces, such as the pod's name; empty: none, or what OTEL_RESOURCE_ATTRIBUTES says"`
	TracingSamplingRate      SamplingRate    `split_words:"true" desc:"share of the traces that start here to sample, in [0, 1], besides every trace the caller sampled; empty: as OTEL_TRACES_SAMPLER says (all, by default)"`

	// ConfigMaxBytes' default: see config.DefaultOptions.
	ConfigMaxBytes    int64         `split_words:"true" desc:"most bytes the files of RLS_CONFIG_PATH may hold together (32 MiB); past that, loading or reloading them is an error naming the file, and the limits in force stay. A 10 MB file of 92 000 descriptors takes about 100 MB of heap to load, twice that to reload"`
	ConfigReadTimeout time.Duration `split_words:"true" desc:"longest wait for the files of RLS_CONFIG_PATH to be read, at startup and at each reload; a read that hangs (a stuck volume) is an error naming the file, and the limits in force stay"`

	// Bounds on what one client can hold (see docs/operations.md, "Bounds
	// on clients").
	HTTPReadTimeout      time.Duration `split_words:"true" default:"10s" desc:"longest time to read an HTTP request, headers and body; a slower client's connection is closed"`
	HTTPWriteTimeout     time.Duration `split_words:"true" default:"10s" desc:"longest time to write an HTTP response, from the end of the request's headers"`
	HTTPIdleTimeout      time.Duration `split_words:"true" default:"60s" desc:"how long an HTTP keep-alive connection may wait for its next request"`
	HTTPMaxHeaderBytes   int           `split_words:"true" default:"65536" desc:"largest HTTP request header, in bytes; larger requests get 431"`
	HTTPMaxConnections   int           `split_words:"true" default:"1024" desc:"most HTTP connections open at once, besides RLS_HTTP_PROBE_CONNECTIONS; further ones wait in the kernel's backlog, refused once it is full, until one closes"`
	HTTPProbeConnections int           `split_words:"true" default:"16" desc:"HTTP connections kept for /healthcheck and /ready beyond RLS_HTTP_MAX_CONNECTIONS, so that the probes are answered while other clients hold all those: accepted only then, each serves one probe within 1s; other paths get 503. 0: none"`

	GRPCMaxConnections       int           `split_words:"true" default:"4096" desc:"most gRPC connections open at once; further ones wait in the kernel's backlog, refused once it is full, until one closes"`
	GRPCMaxConcurrentStreams uint32        `split_words:"true" default:"1024" desc:"most calls at once on one gRPC connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); Envoy opens another connection past it"`
	GRPCMaxCalls             int           `split_words:"true" default:"4096" desc:"gRPC calls open at once on all connections past which a new call must send its request within 10ms, not RLS_GRPC_READ_TIMEOUT, or is cancelled (each open call holds 10 to 20 KiB)"`
	GRPCReadTimeout          time.Duration `split_words:"true" default:"5s" desc:"longest time for a new gRPC connection's handshake, and for a call's request message after its headers; a call that sends no request in time is cancelled"`
	GRPCKeepaliveMinTime     time.Duration `split_words:"true" default:"1s" desc:"shortest interval at which a client may send keepalive pings, with or without calls; a client pinging more often is disconnected (too_many_pings)"`
	GRPCKeepaliveTime        time.Duration `split_words:"true" default:"30s" desc:"after this long without a frame from a client, the server pings it (at least 1s)"`
	GRPCKeepaliveTimeout     time.Duration `split_words:"true" default:"10s" desc:"a client that does not answer the server's ping within this is taken for dead and disconnected"`
	GRPCMaxConnectionIdle    time.Duration `split_words:"true" default:"15m" desc:"a gRPC connection without calls for this long is closed (GOAWAY); 0s keeps idle connections"`
	GRPCMaxConnectionAge     time.Duration `split_words:"true" default:"0s" desc:"a gRPC connection older than this is closed (GOAWAY, calls get 30s to finish), to spread clients over new replicas; 0s keeps connections for life"`

	// HTTP's TLS, like gRPC's; the fields are spelled Tls, Ca and Json so
	// that split_words makes RLS_HTTP_TLS_CERT_FILE, RLS_HTTP_JSON.
	HTTPTlsCertFile     string   `split_words:"true" desc:"PEM certificate chain of the HTTP server; with RLS_HTTP_TLS_KEY_FILE, HTTP is served over TLS 1.2 or later (HTTPS), and the files are re-read when they change"`
	HTTPTlsKeyFile      string   `split_words:"true" desc:"PEM private key of RLS_HTTP_TLS_CERT_FILE"`
	HTTPTlsClientCaFile string   `split_words:"true" desc:"PEM CA certificates: every HTTP endpoint but /healthcheck and /ready needs a client certificate they signed (mutual TLS); needs RLS_HTTP_TLS_CERT_FILE"`
	HTTPJson            JSONMode `split_words:"true" default:"auto" desc:"serve /json: on, off, or auto: on unless gRPC requires client certificates (RLS_GRPC_TLS_CLIENT_CA_FILE) and HTTP does not (RLS_HTTP_TLS_CLIENT_CA_FILE), so that no one takes quota over HTTP without the certificate gRPC demands"`
	RlconfigShowPaths   bool     `split_words:"true" default:"false" desc:"show the full paths of the limits files in /rlconfig; by default it names them relative to RLS_CONFIG_PATH"`

	// Overload: deadlines and shedding (docs/operations.md#overload).
	// BreakerProbes' default of three probes at once keeps the one probe
	// that a busy host happens to hold up from costing another cool-down,
	// while a backend that is down costs three timeouts per cool-down
	// instead of one. DeadlineReserve's default of 2ms is time for a gRPC
	// answer to be written, cross a local network and be read.
	BreakerProbes     int           `split_words:"true" desc:"probe calls the half-open circuit breaker lets through at once; the first success closes it, and as many failures open it for another RLS_BREAKER_COOLDOWN"`
	DeadlineReserve   time.Duration `split_words:"true" desc:"least time kept of a caller's gRPC deadline for the answer to reach it: backend calls end by the caller's deadline less this (or less the time the request waited in the server before its handler ran, when longer); a decision with less left gets the failure mode's answer and its hits are given back"`
	BackendTimeoutMax time.Duration `split_words:"true" desc:"cap on every request's budget for the backend, from its arrival, whatever deadline its caller sent (and on RLS_BACKEND_TIMEOUT); 0s caps nothing"`
	MaxInflight       int           `split_words:"true" desc:"requests with backend calls under way at once; more wait, and get the failure mode's answer at once when they could not be answered before their deadline; 0 adapts the limit to what the backend answers in time"`
	GiveBackQueue     int           `split_words:"true" desc:"most give-backs to Redis (the takes of a call answered with the failure mode error or deny, a failed refund) and charges that missed Redis waiting at once, one per limit whatever its hits; more are dropped"`
	GiveBackTimeout   time.Duration `split_words:"true" desc:"how long a give-back or a charge that missed Redis may wait for Redis before it is dropped"`

	// CompatEnv reads envoyproxy/ratelimit's variables where no RLS_ one is
	// set (package compat).
	CompatEnv bool `split_words:"true" default:"true" desc:"also read envoyproxy/ratelimit's variables (REDIS_URL, PORT, RUNTIME_ROOT, ...) for the settings whose RLS_ variable is not set; see docs/migrating.md"`

	// compat says what became of envoyproxy/ratelimit's variables (see
	// Compat).
	compat *compat.Report
}

// bindings pairs each variable that sets an option of o with it: the
// variable takes the package's default, and the package's rules. A new
// option of a package that operators set is its field in Settings above and
// one line here. A variable may set options of several packages
// (RLS_DEFAULT_ALGORITHM: the loader's and the service's), which must agree
// on its default.
func (s *Settings) bindings(o *options) []binding {
	svc, b, cfg := &o.service, &o.service.Bounds, &o.config.Options
	return []binding{
		bind(cfg, "DefaultAlgorithm", &s.DefaultAlgorithm, &cfg.DefaultAlgorithm),
		bind(cfg, "MergeDomains", &s.ConfigMergeDomains, &cfg.MergeDomains),
		bind(cfg, "WildcardPrecedence", &s.WildcardPrecedence, &cfg.WildcardPrecedence),
		bind(cfg, "DotFiles", &s.ConfigDotFiles, &cfg.DotFiles),
		bind(cfg, "AllowNegativeHits", &s.AllowNegativeHits, &cfg.AllowNegativeHits),
		bind(cfg, "MaxBytes", &s.ConfigMaxBytes, &cfg.MaxBytes),
		bind(&o.config, "PollInterval", &s.ConfigPollInterval, &o.config.PollInterval),
		bind(&o.config, "ReadTimeout", &s.ConfigReadTimeout, &o.config.ReadTimeout),

		bind(&o.backoff, "Initial", &s.XDSBackoffInitialInterval, &o.backoff.Initial),
		bind(&o.backoff, "Max", &s.XDSBackoffMaxInterval, &o.backoff.Max),
		bind(&o.backoff, "RandomFactor", &s.XDSBackoffRandomFactor, &o.backoff.RandomFactor),
		bind(&o.backoff, "Jitter", &s.XDSBackoffJitter, &o.backoff.Jitter),

		bind(svc, "DefaultAlgorithm", &s.DefaultAlgorithm, &svc.DefaultAlgorithm),
		bind(svc, "FailureMode", &s.FailureMode, &svc.FailureMode),
		bind(svc, "ShadowMode", &s.ShadowMode, &svc.ShadowMode),
		bind(svc, "QuotaMode", &s.QuotaMode, &svc.QuotaMode),
		bind(svc, "RefundOnDeny", &s.RefundOnDeny, &svc.RefundOnDeny),
		bind(svc, "RetryAfter", &s.RetryAfter, &svc.RetryAfter),
		bind(svc, "ResponseDynamicMetadata", &s.ResponseDynamicMetadata, &svc.ResponseDynamicMetadata),
		bind(svc, "AllowNegativeHits", &s.AllowNegativeHits, &svc.AllowNegativeHits),
		bind(svc, "BackendTimeout", &s.BackendTimeout, &svc.BackendTimeout),
		bind(svc, "BackendTimeoutMax", &s.BackendTimeoutMax, &svc.BackendTimeoutMax),
		bind(svc, "DeadlineReserve", &s.DeadlineReserve, &svc.DeadlineReserve),
		bind(svc, "NearLimitRatio", &s.NearLimitRatio, &svc.NearLimitRatio),
		bind(svc, "Bounds.MaxDescriptors", &s.MaxDescriptors, &b.MaxDescriptors),
		bind(svc, "Bounds.MaxEntries", &s.MaxEntries, &b.MaxEntries),
		bind(svc, "Bounds.MaxHits", &s.MaxHits, &b.MaxHits),
		bind(svc, "Bounds.MaxLogHits", &s.MaxLogHits, &b.MaxLogHits),
		bind(svc, "Bounds.MaxOverrideLogSize", &s.MaxOverrideLogSize, &b.MaxOverrideLogSize),
		bind(svc, "Bounds.MaxOverrideLifetime", &s.MaxOverrideLifetime, &b.MaxOverrideLifetime),
		bind(svc, "Bounds.MaxUnmatchedEntries", &s.MaxUnmatchedEntries, &b.MaxUnmatchedEntries),
		bind(svc, "Bounds.MaxUnmatchedKeyBytes", &s.MaxUnmatchedKeyBytes, &b.MaxUnmatchedKeyBytes),

		bind(&o.lease, "Time", &s.LeaseTime, &o.lease.Time),
		bind(&o.lease, "MinHits", &s.LeaseMinHits, &o.lease.MinHits),

		bind(&o.giveBack, "Size", &s.GiveBackQueue, &o.giveBack.Size),
		bind(&o.giveBack, "Timeout", &s.GiveBackTimeout, &o.giveBack.Timeout),

		bind(&o.breaker, "Failures", &s.BreakerFailures, &o.breaker.Failures),
		bind(&o.breaker, "Probes", &s.BreakerProbes, &o.breaker.Probes),
		bind(&o.breaker, "Cooldown", &s.BreakerCooldown, &o.breaker.Cooldown),

		bind(&o.admission, "MaxInflight", &s.MaxInflight, &o.admission.MaxInflight),

		bind(&o.denyCache, "MaxEntries", &s.DenyCacheSize, &o.denyCache.MaxEntries),
	}
}
