package compat

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// The conversions of the rows of table that take more than one
// variable, or convert a value, other than Redis's (redis.go) and xDS's
// (xds.go).

func applyGRPCTLS(c *conversion) error {
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
	c.set("RLS_GRPC_TLS_CERT_FILE", cert)
	c.set("RLS_GRPC_TLS_KEY_FILE", key)
	if ca, _ := c.get("GRPC_CLIENT_TLS_CACERT"); ca != "" {
		c.set("RLS_GRPC_TLS_CLIENT_CA_FILE", ca)
	}
	return nil
}

func applyGRPCClientSAN(c *conversion) error {
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
	c.set("RLS_GRPC_TLS_CLIENT_SAN", san)
	return nil
}

func applyLogLevel(c *conversion) error {
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
	c.set("RLS_LOG_LEVEL", level)
	return nil
}

func applyLogFormat(c *conversion) error {
	v, ok := c.get("LOG_FORMAT")
	if !ok {
		return nil
	}
	format := "text"
	if strings.EqualFold(v, "json") {
		format = "json"
	}
	c.set("RLS_LOG_FORMAT", format)
	return nil
}

func applyRuntimePath(c *conversion) error {
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
	c.set("RLS_CONFIG_PATH", path)
	return nil
}

func applyRuntimeWatch(c *conversion) error {
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
func applyDotFiles(c *conversion) error {
	v, ok := c.get("RUNTIME_IGNOREDOTFILES")
	if !ok {
		return nil
	}
	ignore, err := parseTheirBool("RUNTIME_IGNOREDOTFILES", v)
	if err != nil {
		return err
	}
	if ignore {
		c.set("RLS_CONFIG_DOT_FILES", "false")
		return nil
	}
	c.ignore("names starting with . stay skipped, so that a ConfigMap volume's second copy of its files under ..<timestamp> is not loaded; RLS_CONFIG_DOT_FILES=true reads them", "RUNTIME_IGNOREDOTFILES")
	return nil
}

func applyConfigType(c *conversion) error {
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
	c.set("RLS_CONFIG_SOURCE", source)
	return nil
}

// applyForceStart takes FORCE_START_WITHOUT_INITIAL_CONFIG. ratewarden
// starts before its limits wherever it can wait for them, and reports not
// ready until they are in force, which keeps traffic away as not starting
// would: true asks for nothing more there, and false for nothing less. Only
// files read once (RLS_CONFIG_WATCH=false) must be there at the start.
func applyForceStart(c *conversion) error {
	const name = "FORCE_START_WITHOUT_INITIAL_CONFIG"
	force, err := c.theirBool(name)
	if err != nil || !c.isSet(name) {
		return err
	}
	switch {
	case c.limitsFromXDS():
		c.builtIn("with limits from xDS the server starts at once, not ready until the first update", name)
	case c.target.Get("RLS_CONFIG_WATCH") == "true":
		c.builtIn("with RLS_CONFIG_WATCH the server starts without limits and waits for them, not ready", name)
	case force:
		c.ignore("with RLS_CONFIG_WATCH=false the server starts only with its limits loaded", name)
	default:
		c.builtIn("with RLS_CONFIG_WATCH=false the server starts only with its limits loaded", name)
	}
	return nil
}

func applyPrometheus(c *conversion) error {
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
	c.set("RLS_METRICS_NAMES", metrics.NamesBoth.String())
	c.set("RLS_METRICS_ADDR", addr)
	c.set("RLS_METRICS_PATH", path)
	return nil
}

func applyStatsd(c *conversion) error {
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

func applyLimitHeaders(c *conversion) error {
	if err := c.copyBool("LIMIT_RESPONSE_HEADERS_ENABLED", "RLS_LIMIT_HEADERS"); err != nil {
		return err
	}
	c.copyString("LIMIT_LIMIT_HEADER", "RLS_LIMIT_HEADER_LIMIT")
	c.copyString("LIMIT_REMAINING_HEADER", "RLS_LIMIT_HEADER_REMAINING")
	c.copyString("LIMIT_RESET_HEADER", "RLS_LIMIT_HEADER_RESET")
	return nil
}

func applyTracing(c *conversion) error {
	if err := c.copyBool("TRACING_ENABLED", "RLS_TRACING"); err != nil {
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
		c.set("RLS_TRACING_PROTOCOL", protocol)
	}
	c.copyString("TRACING_SERVICE_NAME", "RLS_TRACING_SERVICE_NAME")
	c.copyString("TRACING_SERVICE_NAMESPACE", "RLS_TRACING_SERVICE_NAMESPACE")
	c.copyString("TRACING_SERVICE_INSTANCE_ID", "RLS_TRACING_SERVICE_INSTANCE_ID")
	c.copyString("TRACING_SAMPLING_RATE", "RLS_TRACING_SAMPLING_RATE")
	return nil
}
