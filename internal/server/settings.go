package server

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// EnvPrefix prefixes every environment variable the server reads.
const EnvPrefix = "RLS"

// Settings is everything the server reads from its environment: each field
// is the variable RLS_ and its name in upper-case words (GRPCAddr is
// RLS_GRPC_ADDR). No field has an envconfig name of its own, so no variable
// is ever read without the RLS_ prefix. docs/configuration.md lists them all, and
// PrintUsage prints the same list.
type Settings struct {
	GRPCAddr   string `split_words:"true" default:":8081" desc:"gRPC listen address (RateLimitService, health, reflection)"`
	HTTPAddr   string `split_words:"true" default:":8080" desc:"HTTP listen address (/healthcheck, /json, /rlconfig, /metrics); empty disables HTTP"`
	ConfigPath string `split_words:"true" default:"./config" desc:"limits YAML: a file, or a directory of *.yaml and *.yml files"`

	ConfigWatch        bool          `split_words:"true" default:"true" desc:"reload RLS_CONFIG_PATH when its files change; an invalid change is logged and the limits in force stay"`
	ConfigPollInterval time.Duration `split_words:"true" default:"10s" desc:"with RLS_CONFIG_WATCH, also re-read RLS_CONFIG_PATH this often, for volumes that send no change notifications; 0s turns it off"`

	// The gRPC TLS fields are spelled Tls and Ca so that split_words makes
	// their names RLS_GRPC_TLS_CERT_FILE and so on.
	GRPCTlsCertFile     string `split_words:"true" desc:"PEM certificate chain of the gRPC server; with RLS_GRPC_TLS_KEY_FILE, gRPC is served over TLS 1.2 or later, and the files are re-read when they change"`
	GRPCTlsKeyFile      string `split_words:"true" desc:"PEM private key of RLS_GRPC_TLS_CERT_FILE"`
	GRPCTlsClientCaFile string `split_words:"true" desc:"PEM CA certificates: gRPC clients must present a certificate they signed (mutual TLS); needs RLS_GRPC_TLS_CERT_FILE"`

	Backend          string        `split_words:"true" default:"memory" desc:"where limits are counted: memory (this process only) or redis"`
	DefaultAlgorithm string        `split_words:"true" default:"sliding_window_counter" desc:"algorithm of limits that name none: fixed_window, sliding_window_log, sliding_window_counter or token_bucket"`
	FailureMode      string        `split_words:"true" default:"error" desc:"answer when the backend fails or times out: error (gRPC UNAVAILABLE), allow (OK) or deny (OVER_LIMIT)"`
	BackendTimeout   time.Duration `split_words:"true" default:"10ms" desc:"longest wait for the backend per request: its take and the refund of a denied request share one deadline, set when the request arrives"`
	BreakerFailures  int           `split_words:"true" default:"20" desc:"consecutive backend failures that open the circuit breaker: requests then get the failure mode at once, without calling the backend; 0 disables it"`
	BreakerCooldown  time.Duration `split_words:"true" default:"1s" desc:"how long the open circuit breaker waits before letting probe calls through; the first success closes the breaker"`
	NearLimitRatio   float64       `split_words:"true" default:"0.8" desc:"share of a limit's capacity, in (0, 1], at or above which admitted hits count as near_limit in the metrics"`
	ShadowMode       bool          `split_words:"true" default:"false" desc:"count and report, but answer OK to every request"`
	RefundOnDeny     bool          `split_words:"true" default:"true" desc:"give back what a denied request took from its other descriptors and limits"`

	BackendHealthInterval time.Duration `split_words:"true" default:"1s" desc:"how often the backend is pinged for grpc.health.v1 and /healthcheck"`
	BackendHealthTimeout  time.Duration `split_words:"true" default:"250ms" desc:"longest wait for one health ping of the backend"`

	// Redis is read from RLS_REDIS_*: RLS_REDIS_ADDRS, RLS_REDIS_MODE, ….
	Redis     redisx.Options
	KeyPrefix string `split_words:"true" default:"ratewarden:" desc:"prefix of every Redis key; must not contain '{' or '}'"`
	// DenyCache answers repeated denials locally (redis backend only).
	DenyCache     bool `split_words:"true" default:"true" desc:"with the redis backend, answer a take that Redis denied, until its retry time, from memory instead of asking Redis again"`
	DenyCacheSize int  `split_words:"true" default:"100000" desc:"most denials the deny cache remembers"`

	LogLevel  string `split_words:"true" default:"info" desc:"debug, info, warn or error"`
	LogFormat string `split_words:"true" default:"text" desc:"text or json"`

	ShutdownDelay   time.Duration `split_words:"true" default:"0s" desc:"on SIGTERM, how long to report NOT_SERVING before refusing new calls"`
	ShutdownTimeout time.Duration `split_words:"true" default:"10s" desc:"on SIGTERM, how long in-flight calls may take to finish"`

	// Overload: deadlines and shedding (docs/operations.md#overload).
	BreakerProbes   int           `split_words:"true" default:"3" desc:"probe calls the half-open circuit breaker lets through at once; the first success closes it, and as many failures open it for another RLS_BREAKER_COOLDOWN"`
	DeadlineReserve time.Duration `split_words:"true" default:"2ms" desc:"time kept of a caller's gRPC deadline for the answer to reach it: backend calls end by the caller's deadline less this, when that comes before RLS_BACKEND_TIMEOUT"`
	MaxInflight     int           `split_words:"true" default:"0" desc:"requests with backend calls under way at once; more wait, and get the failure mode's answer at once when they could not be answered before their deadline; 0 adapts the limit to what the backend answers in time"`
	GiveBackQueue   int           `split_words:"true" default:"10000" desc:"most hits waiting to be given back to Redis after a failed call (a take answered with the failure mode error or deny, a failed refund); more are dropped"`
	GiveBackTimeout time.Duration `split_words:"true" default:"10s" desc:"how long hits may wait to be given back to Redis before they are dropped"`
}

// LoadSettings reads Settings from the environment and validates them. Its
// errors name the offending variable.
func LoadSettings() (Settings, error) {
	var s Settings
	if err := envconfig.Process(EnvPrefix, &s); err != nil {
		return s, fmt.Errorf("server: %w", err)
	}
	return s, s.Validate()
}

// Validate checks the values envconfig cannot, naming the variable at fault.
func (s Settings) Validate() error {
	if s.GRPCAddr == "" {
		return fmt.Errorf("server: RLS_GRPC_ADDR must not be empty")
	}
	if s.Backend != "memory" && s.Backend != "redis" {
		return fmt.Errorf("server: RLS_BACKEND %q is not memory or redis", s.Backend)
	}
	if s.Backend == "redis" {
		if err := s.Redis.Validate(); err != nil {
			return fmt.Errorf("server: RLS_REDIS_*: %w", err)
		}
		if strings.ContainsAny(s.KeyPrefix, "{}") {
			return fmt.Errorf("server: RLS_KEY_PREFIX %q must not contain '{' or '}'", s.KeyPrefix)
		}
	}
	if _, err := algorithms.ParseAlgorithm(s.DefaultAlgorithm); err != nil {
		return fmt.Errorf("server: RLS_DEFAULT_ALGORITHM: %w", err)
	}
	if _, err := rls.ParseFailureMode(s.FailureMode); err != nil {
		return fmt.Errorf("server: RLS_FAILURE_MODE: %w", err)
	}
	if s.BackendTimeout <= 0 {
		return fmt.Errorf("server: RLS_BACKEND_TIMEOUT must be positive, not %s", s.BackendTimeout)
	}
	if s.DenyCacheSize < 1 {
		return fmt.Errorf("server: RLS_DENY_CACHE_SIZE must be at least 1, not %d", s.DenyCacheSize)
	}
	if s.BreakerFailures < 0 {
		return fmt.Errorf("server: RLS_BREAKER_FAILURES must not be negative, not %d", s.BreakerFailures)
	}
	if s.BreakerCooldown <= 0 {
		return fmt.Errorf("server: RLS_BREAKER_COOLDOWN must be positive, not %s", s.BreakerCooldown)
	}
	if !(s.NearLimitRatio > 0 && s.NearLimitRatio <= 1) {
		return fmt.Errorf("server: RLS_NEAR_LIMIT_RATIO must be in (0, 1], not %v", s.NearLimitRatio)
	}
	if s.BackendHealthInterval <= 0 || s.BackendHealthTimeout <= 0 {
		return fmt.Errorf("server: RLS_BACKEND_HEALTH_INTERVAL and RLS_BACKEND_HEALTH_TIMEOUT must be positive")
	}
	if _, err := parseLogLevel(s.LogLevel); err != nil {
		return err
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		return fmt.Errorf("server: RLS_LOG_FORMAT %q is not text or json", s.LogFormat)
	}
	if s.ShutdownDelay < 0 || s.ShutdownTimeout < 0 {
		return fmt.Errorf("server: RLS_SHUTDOWN_DELAY and RLS_SHUTDOWN_TIMEOUT must not be negative")
	}
	if s.ConfigPollInterval < 0 {
		return fmt.Errorf("server: RLS_CONFIG_POLL_INTERVAL must not be negative, not %s", s.ConfigPollInterval)
	}
	if s.BreakerProbes < 1 {
		return fmt.Errorf("server: RLS_BREAKER_PROBES must be at least 1, not %d", s.BreakerProbes)
	}
	if s.MaxInflight < 0 {
		return fmt.Errorf("server: RLS_MAX_INFLIGHT must not be negative, not %d", s.MaxInflight)
	}
	if s.GiveBackQueue < 1 {
		return fmt.Errorf("server: RLS_GIVE_BACK_QUEUE must be at least 1, not %d", s.GiveBackQueue)
	}
	if s.GiveBackTimeout <= 0 {
		return fmt.Errorf("server: RLS_GIVE_BACK_TIMEOUT must be positive, not %s", s.GiveBackTimeout)
	}
	if s.DeadlineReserve < 0 {
		return fmt.Errorf("server: RLS_DEADLINE_RESERVE must not be negative, not %s", s.DeadlineReserve)
	}
	if (s.GRPCTlsCertFile == "") != (s.GRPCTlsKeyFile == "") {
		return fmt.Errorf("server: RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE go together: set both or neither")
	}
	if s.GRPCTlsClientCaFile != "" && s.GRPCTlsCertFile == "" {
		return fmt.Errorf("server: RLS_GRPC_TLS_CLIENT_CA_FILE needs RLS_GRPC_TLS_CERT_FILE and RLS_GRPC_TLS_KEY_FILE")
	}
	return nil
}

// ServiceOptions returns the rls.Options these settings ask for.
func (s Settings) ServiceOptions(logger *slog.Logger) rls.Options {
	alg, _ := algorithms.ParseAlgorithm(s.DefaultAlgorithm)
	mode, _ := rls.ParseFailureMode(s.FailureMode)
	return rls.Options{
		DefaultAlgorithm: alg,
		ShadowMode:       s.ShadowMode,
		RefundOnDeny:     s.RefundOnDeny,
		FailureMode:      mode,
		BackendTimeout:   s.BackendTimeout,
		DeadlineReserve:  s.DeadlineReserve,
		MaxInflight:      s.MaxInflight,
		GiveBackQueue:    s.GiveBackQueue,
		GiveBackTimeout:  s.GiveBackTimeout,
		BreakerFailures:  s.BreakerFailures,
		BreakerCooldown:  s.BreakerCooldown,
		BreakerProbes:    s.BreakerProbes,
		NearLimitRatio:   s.NearLimitRatio,
		Logger:           logger,
	}
}

// NewLogger returns the logger the settings ask for, writing to w.
func (s Settings) NewLogger(w io.Writer) *slog.Logger {
	level, _ := parseLogLevel(s.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("server: RLS_LOG_LEVEL %q is not debug, info, warn or error", s)
	}
	return l, nil
}

// PrintUsage writes every environment variable with its default and meaning.
func PrintUsage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	format := "{{range .}}{{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}"
	if err := envconfig.Usagef(EnvPrefix, &Settings{}, tw, format); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return tw.Flush()
}
