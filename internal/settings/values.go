package settings

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/ratewarden/ratewarden/internal/tracing"
)

// The types below are settings that parse themselves: Load reads each
// variable into its field with the field's UnmarshalText, once, and its
// error names the variable.

// Backend names where limits are counted, as RLS_BACKEND spells it.
type Backend string

// The backends.
const (
	// BackendMemory counts in this process only.
	BackendMemory Backend = "memory"
	// BackendRedis counts in Redis, shared by every replica.
	BackendRedis Backend = "redis"
)

// UnmarshalText sets b to the backend named text, memory or redis.
func (b *Backend) UnmarshalText(text []byte) error {
	switch v := Backend(text); v {
	case BackendMemory, BackendRedis:
		*b = v
		return nil
	}
	return fmt.Errorf("unknown backend %q (want %s or %s)", text, BackendMemory, BackendRedis)
}

// ConfigSource says where the limits come from, as RLS_CONFIG_SOURCE spells
// it.
type ConfigSource string

// The sources of limits.
const (
	// ConfigFromFiles reads the files of RLS_CONFIG_PATH.
	ConfigFromFiles ConfigSource = "file"
	// ConfigFromXDS takes RateLimitConfig resources from the xDS server at
	// RLS_XDS_SERVER_URL.
	ConfigFromXDS ConfigSource = "xds"
)

// UnmarshalText sets c to the source named text, in any case: file, or xds,
// which envoyproxy/ratelimit's GRPC_XDS_SOTW also names.
func (c *ConfigSource) UnmarshalText(text []byte) error {
	switch strings.ToLower(string(text)) {
	case "file":
		*c = ConfigFromFiles
	case "xds", "grpc_xds_sotw":
		*c = ConfigFromXDS
	default:
		return notOneOf(text, ConfigFromFiles, ConfigFromXDS)
	}
	return nil
}

// LogLevel is the least level of the records the server logs.
type LogLevel slog.Level

// UnmarshalText sets l to the level named text: debug, info, warn or error,
// in any case, as slog.Level reads them (warn+2 too).
func (l *LogLevel) UnmarshalText(text []byte) error {
	var level slog.Level
	if err := level.UnmarshalText(text); err != nil {
		return notOneOf(text, "debug", "info", "warn", "error")
	}
	*l = LogLevel(level)
	return nil
}

// LogFormat is the format of the server's log, as RLS_LOG_FORMAT spells it.
type LogFormat string

// The log formats.
const (
	// LogText writes key=value pairs (slog.TextHandler).
	LogText LogFormat = "text"
	// LogJSON writes a JSON object per record (slog.JSONHandler).
	LogJSON LogFormat = "json"
)

// UnmarshalText sets f to the format named text, text or json.
func (f *LogFormat) UnmarshalText(text []byte) error {
	switch v := LogFormat(text); v {
	case LogText, LogJSON:
		*f = v
		return nil
	}
	return notOneOf(text, LogText, LogJSON)
}

// JSONMode says whether /json is served, as RLS_HTTP_JSON spells it.
type JSONMode string

// The modes of /json.
const (
	// JSONAuto serves /json unless gRPC requires client certificates and
	// HTTP does not.
	JSONAuto JSONMode = "auto"
	// JSONOn serves /json.
	JSONOn JSONMode = "on"
	// JSONOff does not serve /json.
	JSONOff JSONMode = "off"
)

// UnmarshalText sets m to the mode named text, auto, on or off.
func (m *JSONMode) UnmarshalText(text []byte) error {
	switch v := JSONMode(text); v {
	case JSONAuto, JSONOn, JSONOff:
		*m = v
		return nil
	}
	return notOneOf(text, JSONAuto, JSONOn, JSONOff)
}

// NodeMetadata is the metadata of the node sent to the xDS server, as
// RLS_XDS_NODE_METADATA spells it: key=value pairs separated by commas, as
// envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_METADATA. The value runs to
// the next comma, and may hold '='. Nil means none.
type NodeMetadata map[string]string

// UnmarshalText sets m to the pairs of text; blank text is none.
func (m *NodeMetadata) UnmarshalText(text []byte) error {
	s := string(text)
	if strings.TrimSpace(s) == "" {
		*m = nil
		return nil
	}
	md := make(NodeMetadata)
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", pair)
		}
		md[k] = v
	}
	*m = md
	return nil
}

// TracingProtocol is the OTLP protocol of the traces, tracing.ProtocolGRPC
// or tracing.ProtocolHTTP; empty leaves it to the OTEL_* variables, which
// tracing.New reads.
type TracingProtocol string

// UnmarshalText sets p to the protocol named text, grpc or http/protobuf
// ("http" is taken for it), as tracing.Protocol reads them; empty text is
// the empty protocol.
func (p *TracingProtocol) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*p = ""
		return nil
	}
	protocol, err := tracing.Protocol(string(text))
	if err != nil {
		return err
	}
	*p = TracingProtocol(protocol)
	return nil
}

// SamplingRate is the share of the traces that start here to sample, in
// [0, 1]. The zero SamplingRate is none: OTEL_TRACES_SAMPLER decides.
type SamplingRate struct {
	share float64
	set   bool
}

// UnmarshalText sets r to the share text, as tracing.ParseSamplingRate
// reads it; blank text is none.
func (r *SamplingRate) UnmarshalText(text []byte) error {
	share, err := tracing.ParseSamplingRate(string(text))
	if err != nil {
		return err
	}
	*r = SamplingRate{}
	if share != nil {
		*r = SamplingRate{share: *share, set: true}
	}
	return nil
}

// Share returns the share, and false when there is none.
func (r SamplingRate) Share() (float64, bool) { return r.share, r.set }

// choiceError reports a value that is none of the names a setting accepts.
// Its message follows the variable's name: RLS_LOG_FORMAT "xml" is not
// text or json.
type choiceError struct {
	value string
	names []string
}

func (e *choiceError) Error() string {
	names := strings.Join(e.names[:len(e.names)-1], ", ") + " or " + e.names[len(e.names)-1]
	return fmt.Sprintf("%q is not %s", e.value, names)
}

// notOneOf returns the error of a value that is none of names.
func notOneOf[N ~string](value []byte, names ...N) error {
	e := &choiceError{value: string(value)}
	for _, n := range names {
		e.names = append(e.names, string(n))
	}
	return e
}
