package server

import (
	"fmt"

	"golang.org/x/net/http/httpguts"

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
	return nil
}

// limitHeaders returns the limit headers the settings ask for, or nil.
func (s Settings) limitHeaders() *rls.LimitHeaders {
	if !s.LimitHeaders {
		return nil
	}
	return &rls.LimitHeaders{Limit: s.LimitHeaderLimit, Remaining: s.LimitHeaderRemaining, Reset: s.LimitHeaderReset}
}
