package rls

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// FailureMode says how the service answers when its backend cannot decide in
// time.
type FailureMode uint8

// The failure modes. FailError is the default: Envoy's failure_mode_deny then
// decides.
const (
	// FailError answers gRPC UNAVAILABLE.
	FailError FailureMode = iota
	// FailAllow answers OK, admitting the request.
	FailAllow
	// FailDeny answers OVER_LIMIT for every limited descriptor.
	FailDeny
)

// String returns the mode's name as RLS_FAILURE_MODE spells it.
func (m FailureMode) String() string {
	switch m {
	case FailError:
		return "error"
	case FailAllow:
		return "allow"
	case FailDeny:
		return "deny"
	}
	return fmt.Sprintf("FailureMode(%d)", uint8(m))
}

// ParseFailureMode returns the FailureMode named error, allow or deny.
func ParseFailureMode(s string) (FailureMode, error) {
	for _, m := range []FailureMode{FailError, FailAllow, FailDeny} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("rls: unknown failure mode %q (want error, allow or deny)", s)
}

// Options configure a Service. DefaultOptions gives the defaults.
type Options struct {
	// DefaultAlgorithm enforces a request's limit override when no rule
	// matched its descriptor.
	DefaultAlgorithm algorithms.Algorithm
	// ShadowMode answers OK to everything while still counting.
	ShadowMode bool
	// RefundOnDeny gives back what a denied request took from its other
	// descriptors and limits.
	RefundOnDeny bool
	// FailureMode applies when the backend fails or exceeds BackendTimeout.
	FailureMode FailureMode
	// BackendTimeout bounds each call to the backend.
	BackendTimeout time.Duration
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the options the service runs with when nothing is
// configured: sliding window counter, refunds on, failure mode error, 10 ms
// backend timeout.
func DefaultOptions() Options {
	return Options{
		DefaultAlgorithm: algorithms.SlidingWindowCounter,
		RefundOnDeny:     true,
		FailureMode:      FailError,
		BackendTimeout:   10 * time.Millisecond,
	}
}
