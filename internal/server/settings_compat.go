package server

import (
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// validateAdditions checks the settings of the limit headers, the metric
// names and listener, and tracing, naming the variable at fault.
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
	if s.Tracing {
		if _, err := tracing.Protocol(s.TracingProtocol); err != nil {
			return fmt.Errorf("server: RLS_TRACING_PROTOCOL: %w", err)
		}
	}
	if _, err := tracing.ParseSamplingRate(s.TracingSamplingRate); err != nil {
		return fmt.Errorf("server: RLS_TRACING_SAMPLING_RATE: %w", err)
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

// tracingOptions returns the tracing options the settings ask for.
func (s Settings) tracingOptions() tracing.Options {
	rate, _ := tracing.ParseSamplingRate(s.TracingSamplingRate)
	return tracing.Options{
		Protocol:          s.TracingProtocol,
		ServiceName:       s.TracingServiceName,
		ServiceNamespace:  s.TracingServiceNamespace,
		ServiceInstanceID: s.TracingServiceInstanceID,
		SamplingRate:      rate,
	}
}
