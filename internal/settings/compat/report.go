package compat

import (
	"fmt"
	"log/slog"
	"strings"
)

// Note is one line of a Report.
type Note struct {
	// Theirs are the envoyproxy/ratelimit variables concerned.
	Theirs []string
	// Ours is the RLS_ variable they set, or that overrode them.
	Ours string
	// Value is the value they gave Ours; secrets are redacted.
	Value string
	// Why says why they were not read, or need no setting.
	Why string
}

// Report says what became of the envoyproxy/ratelimit variables that are
// set: Apply fills it, settings.Load keeps it (Settings.Compat), and the
// server logs it once, at start. The zero Report says that none was set.
type Report struct {
	// Applied lists the RLS_ settings they gave values to.
	Applied []Note
	// Overridden lists those whose RLS_ variable is set as well, and wins.
	Overridden []Note
	// BuiltIn lists those whose effect ratewarden always has.
	BuiltIn []Note
	// Ignored lists those that are not read.
	Ignored []Note
}

// Log writes the report: applied and overridden variables at info,
// built-in ones at debug, ignored ones at warn.
func (r *Report) Log(logger *slog.Logger) {
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

// Explain adds to err, an error of the settings' Validate, which of
// envoyproxy/ratelimit's variables gave the settings it names their value,
// so that an operator who set REDIS_URL learns that RLS_REDIS_ADDRS came
// from it. It returns err itself when they gave none of them.
func (r *Report) Explain(err error) error {
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
