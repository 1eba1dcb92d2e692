package rls

import (
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// Observer is told what the Service decides, for metrics. The Service calls
// it on every request, so implementations MUST be safe for concurrent use
// and should be quick: a map lookup and an atomic add, not I/O. The layers
// of the request path (internal/layers/...) have observers of their own,
// for the backend's calls, the breaker, shedding and give-backs.
type Observer interface {
	// ObserveRequest is called once per ShouldRateLimit call, valid or not.
	ObserveRequest(RequestOutcome)
	// ObserveLimit is called once per limit that decided a request
	// descriptor: per Op the backend answered, before any refund. Refunds
	// (is_negative_hits), unlimited rules and descriptors that matched no
	// rule are not observed, nor are limits the backend could not decide.
	ObserveLimit(LimitDecision)
}

// RequestOutcome is how one ShouldRateLimit call ended.
type RequestOutcome struct {
	// Duration is the time from the call to its answer.
	Duration time.Duration
	// Code is the response's overall code; UNKNOWN when the call failed
	// with a gRPC error.
	Code rlsv3.RateLimitResponse_Code
	// GRPCCode is the call's gRPC status: OK, or the error's code
	// (InvalidArgument, Unavailable, ...).
	GRPCCode codes.Code
}

// LimitDecision is what one limit decided for one request descriptor.
type LimitDecision struct {
	// Domain is the request's domain.
	Domain string
	// Descriptor names the matched rule: config.Match.MetricKey, which is the
	// rule's path ("domain.key_value.key2") with the request's values only
	// where the rule sets detailed_metric or value_to_metric, so that the
	// number of distinct names stays bounded by the configuration. A limit
	// override of a descriptor that matched no rule is named by the domain
	// alone: its keys, like its values, are the client's to choose.
	Descriptor string
	// Limit is the limit's name; empty when unnamed.
	Limit string
	// Algorithm and Window identify the limit among the rule's limits.
	Algorithm algorithms.Algorithm
	Window    time.Duration
	// Override reports that the limit is the request's own override, whose
	// Window the client chose: metrics should not name a series by it.
	Override bool
	// Hits is the number of hits the request asked for, counted as the
	// limit's capacity plus one when it asked for more: no more can be
	// denied.
	Hits uint64
	// Charge reports that the hits were charged: usage already spent,
	// recorded whether or not the limit held them.
	Charge bool
	// OverLimit reports that the limit denied the hits, or, for a charge,
	// that the charge took it past its limit. Shadowed reports that it was
	// over but shadow mode let the request through.
	OverLimit, Shadowed bool
	// NearLimit reports that the limit admitted the hits and is now used at
	// or above the near-limit ratio of its capacity.
	NearLimit bool
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) ObserveRequest(RequestOutcome) {}
func (nopObserver) ObserveLimit(LimitDecision)    {}
