package settings

import (
	"fmt"
	"log/slog"
	"strings"
)

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
// are set: Load fills it, and the server logs it once, at start.
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

// Log writes the report: applied and overridden variables at info,
// built-in ones at debug, ignored ones at warn.
func (r *CompatReport) Log(logger *slog.Logger) {
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
