package server

import (
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// validateAdditions checks the settings of the limit headers, the metrics
// listener and tracing, naming the variable at fault.
func (s Settings) validateAdditions() error {
	if s.LimitHeaders {
		for _, h := range []struct{ env, name string }{
			{"RLS_LIMIT_HEADER_LIMIT", s.LimitHeaderLimit},
			{"RLS_LIMIT_HEADER_REMAINING", s.LimitHeaderRemaining},
			{"RLS_LIMIT_HEADER_RESET", s.LimitHeaderReset},
		} {
			if !httpguts.ValidHeaderFieldName(h.name) {
				return fmt.Errorf("server: %s %q is not a valid header name", h.env, h.name)
			}
		}
	}
	if _, err := metrics.ParseNames(s.MetricsNames); err != nil {
		return fmt.Errorf("server: RLS_METRICS_NAMES: %w", err)
	}
	if s.MetricsAddr != "" && !strings.HasPrefix(s.MetricsPath, "/") {
		return fmt.Errorf("server: RLS_METRICS_PATH %q must start with /", s.MetricsPath)
	}
	return nil
}

// metricsNames returns the metric names the settings ask for.
func (s Settings) metricsNames() metrics.Names {
	n, _ := metrics.ParseNames(s.MetricsNames)
	return n
}

// limitHeaders returns the limit headers the settings ask for, or nil.
func (s Settings) limitHeaders() *rls.LimitHeaders {
	if !s.LimitHeaders {
		return nil
	}
	return &rls.LimitHeaders{Limit: s.LimitHeaderLimit, Remaining: s.LimitHeaderRemaining, Reset: s.LimitHeaderReset}
}
