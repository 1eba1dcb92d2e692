package server

import (
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// EnvPrefix prefixes every environment variable the server reads.
const EnvPrefix = "RLS"

// Settings is everything the server reads from its environment. Each field
// is the variable RLS_<split_words>; the README lists them all, and
// PrintUsage prints the same list.
type Settings struct {
	GRPCAddr   string `envconfig:"GRPC_ADDR" default:":8081" desc:"gRPC listen address (RateLimitService, health, reflection)"`
	HTTPAddr   string `envconfig:"HTTP_ADDR" default:":8080" desc:"HTTP listen address (/healthcheck, /json, /rlconfig); empty disables HTTP"`
	ConfigPath string `envconfig:"CONFIG_PATH" default:"./config" desc:"limits YAML: a file, or a directory of *.yaml and *.yml files"`

	Backend          string        `envconfig:"BACKEND" default:"memory" desc:"where limits are counted: memory (this process only) or redis"`
	DefaultAlgorithm string        `envconfig:"DEFAULT_ALGORITHM" default:"sliding_window_counter" desc:"algorithm of limits that name none: fixed_window, sliding_window_log, sliding_window_counter or token_bucket"`
	FailureMode      string        `envconfig:"FAILURE_MODE" default:"error" desc:"answer when the backend fails or times out: error (gRPC UNAVAILABLE), allow (OK) or deny (OVER_LIMIT)"`
	BackendTimeout   time.Duration `envconfig:"BACKEND_TIMEOUT" default:"10ms" desc:"longest wait for the backend per request"`
	ShadowMode       bool          `envconfig:"SHADOW_MODE" default:"false" desc:"count and report, but answer OK to every request"`
	RefundOnDeny     bool          `envconfig:"REFUND_ON_DENY" default:"true" desc:"give back what a denied request took from its other descriptors and limits"`

	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat string `envconfig:"LOG_FORMAT" default:"text" desc:"text or json"`

	ShutdownDelay   time.Duration `envconfig:"SHUTDOWN_DELAY" default:"0s" desc:"on SIGTERM, how long to report NOT_SERVING before refusing new calls"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"on SIGTERM, how long in-flight calls may take to finish"`
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
	if _, err := algorithms.ParseAlgorithm(s.DefaultAlgorithm); err != nil {
		return fmt.Errorf("server: RLS_DEFAULT_ALGORITHM: %w", err)
	}
	if _, err := rls.ParseFailureMode(s.FailureMode); err != nil {
		return fmt.Errorf("server: RLS_FAILURE_MODE: %w", err)
	}
	if s.BackendTimeout <= 0 {
		return fmt.Errorf("server: RLS_BACKEND_TIMEOUT must be positive, not %s", s.BackendTimeout)
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
