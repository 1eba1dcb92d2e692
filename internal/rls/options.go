package rls

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// FailureMode says how the service answers when its backend cannot decide in
// time.
type FailureMode uint8

// The failure modes. FailError is the zero FailureMode.
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

// MarshalText returns the mode's name.
func (m FailureMode) MarshalText() ([]byte, error) {
	if m > FailDeny {
		return nil, fmt.Errorf("rls: no such failure mode %d", uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText sets m to the mode named text (see ParseFailureMode).
func (m *FailureMode) UnmarshalText(text []byte) error {
	v, err := ParseFailureMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
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

// Options configure a Service. The zero Options are not valid: a field
// whose zero value has no meaning of its own (DefaultAlgorithm,
// NearLimitRatio, every bound) must be set, as DefaultOptions sets it; the
// server's settings change what their variables say.
type Options struct {
	// DefaultAlgorithm enforces a request's limit override when no rule
	// matched its descriptor.
	DefaultAlgorithm algorithms.Algorithm
	// ShadowMode answers OK to every request while still counting; the
	// status of a descriptor over its limit stays OVER_LIMIT, where a
	// rule's shadow_mode answers it OK.
	ShadowMode bool
	// QuotaMode puts every descriptor in quota mode, as each rule's
	// quota_mode puts its own: a descriptor over its limit is reported
	// OVER_LIMIT, but denies the request only when every quota descriptor of
	// it is over.
	QuotaMode bool
	// ResponseDynamicMetadata makes every response carry dynamic metadata:
	// the request's domain, descriptors and hits, and the metadata of the
	// rules that admitted it.
	ResponseDynamicMetadata bool
	// RefundOnDeny gives back what a denied request took from its other
	// descriptors and limits.
	RefundOnDeny bool
	// RetryAfter adds a retry-after header to every response over its
	// limits: the wait, in whole seconds rounded up, after which the
	// request would be admitted. envoyproxy/ratelimit adds none.
	RetryAfter bool
	// AllowNegativeHits lets is_negative_hits give hits back to a limit
	// override of a descriptor that matches no rule; a rule says for itself
	// (config.Rule.AllowNegativeHits). Where it is not allowed, the hits are
	// taken, as envoyproxy/ratelimit takes them.
	AllowNegativeHits bool
	// Bounds limit what one request may ask; every bound must be set.
	Bounds Bounds
	// FailureMode applies when the backend fails, or does not answer
	// within a request's budget.
	FailureMode FailureMode
	// BackendTimeout is the budget of a request whose caller sent no
	// deadline: its backend calls (its take and the refund of a denied
	// request) share one deadline, BackendTimeout after the request
	// arrived. A caller that sends a deadline gets that deadline less the
	// reserve (see DeadlineReserve), longer or shorter than BackendTimeout. 0 sets no deadline of the service's own
	// (for a backend that never waits): no budget, no cap.
	BackendTimeout time.Duration
	// BackendTimeoutMax, when positive, caps the budget of every request,
	// whatever deadline its caller sent: its backend calls end at the
	// latest BackendTimeoutMax after it arrived. 0 caps nothing.
	BackendTimeoutMax time.Duration
	// DeadlineReserve is the least time kept, of a caller's own gRPC
	// deadline, for the answer to reach it: a request's backend calls end
	// by the caller's deadline less the reserve, so that the failure
	// mode's answer, not the caller's timeout, decides. The reserve is the
	// longer of DeadlineReserve and the time the request waited between
	// arriving (see WithArrival) and its handler running; a decision
	// reached with less than it left gets the failure mode's answer, and
	// its admitted hits are given back.
	DeadlineReserve time.Duration
	// NearLimitRatio is the share of a limit's capacity at or above which an
	// admitted request counts as near the limit, in (0, 1].
	NearLimitRatio float64
	// LimitHeaders, when not nil, adds the most constrained limit's headers
	// to every response the backend decided (not to failure-mode answers);
	// nil adds none.
	LimitHeaders *LimitHeaders
	// Outcomes is told what became of the ops of requests whose answers
	// the service could not use, as the backend tells what became of failed
	// calls: the takes the backend admitted for an answer that came too
	// late (applied, with their results), and the charges of requests that
	// never reached the backend (shed, or refused by an open circuit
	// breaker: not applied), which are usage already spent. The server has
	// the give-back queue follow it (internal/giveback), which gives the
	// takes back and records the charges in the background; nil tells no
	// one.
	Outcomes *rate.Outcomes
	// Observer is told every request and decision, for metrics; nil
	// observes nothing.
	Observer Observer
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the Options of a server's service: limits without
// an algorithm counted by a sliding_window_counter, what a denied request
// took given back, the failure mode error, a second of the backend for a
// request whose caller sends no deadline, 2ms of a caller's deadline kept
// for the answer to reach it, near_limit from 80% of a limit, and
// DefaultBounds. A second for a caller without a deadline: it said it would
// wait, so a merely busy host should not fail it, while a hung Redis still
// costs it no more than a second.
func DefaultOptions() Options {
	return Options{
		DefaultAlgorithm: algorithms.SlidingWindowCounter,
		RefundOnDeny:     true,
		RetryAfter:       true,
		FailureMode:      FailError,
		BackendTimeout:   time.Second,
		DeadlineReserve:  2 * time.Millisecond,
		NearLimitRatio:   0.8,
		Bounds:           DefaultBounds(),
	}
}

// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	var err error
	switch {
	case o.DefaultAlgorithm == 0:
		err = option.Errorf("DefaultAlgorithm", "is not set")
	case !o.DefaultAlgorithm.Valid():
		err = option.Errorf("DefaultAlgorithm", "%s is no algorithm", o.DefaultAlgorithm)
	case o.FailureMode > FailDeny:
		err = option.Errorf("FailureMode", "%s is no failure mode", o.FailureMode)
	case !(o.NearLimitRatio > 0 && o.NearLimitRatio <= 1):
		err = option.Errorf("NearLimitRatio", "must be in (0, 1], not %v", o.NearLimitRatio)
	case o.BackendTimeout < 0:
		err = option.Errorf("BackendTimeout", "must not be negative, not %s", o.BackendTimeout)
	case o.BackendTimeoutMax < 0:
		err = option.Errorf("BackendTimeoutMax", "must not be negative, not %s", o.BackendTimeoutMax)
	case o.DeadlineReserve < 0:
		err = option.Errorf("DeadlineReserve", "must not be negative, not %s", o.DeadlineReserve)
	default:
		err = o.Bounds.validate()
	}
	if err != nil {
		return fmt.Errorf("rls: %w", err)
	}
	return nil
}

// withNops returns o with a logger, an observer and a give-back that do
// nothing in place of nil ones.
func (o Options) withNops() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return o
}
