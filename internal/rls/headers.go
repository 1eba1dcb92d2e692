package rls

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// LimitHeaders names the headers that report, on every decided response,
// the limit closest to denying the request, as envoyproxy/ratelimit does
// with LIMIT_RESPONSE_HEADERS_ENABLED. Envoy adds response_headers_to_add
// to the client's response whether the request was admitted or not.
type LimitHeaders struct {
	// Limit carries the limit's requests_per_unit ("10").
	Limit string
	// Remaining carries its limit_remaining ("3").
	Remaining string
	// Reset carries its duration_until_reset in whole seconds, rounded up
	// ("42").
	Reset string
}

// add appends the headers to resp for its most constrained status, chosen as
// envoyproxy/ratelimit chooses it: the last status that is over its limit,
// else the first with the fewest remaining. Statuses without a current
// limit (unmatched and unlimited descriptors) are never chosen; a response
// without any gets no headers.
func (h *LimitHeaders) add(resp *rlsv3.RateLimitResponse) {
	var chosen *rlsv3.RateLimitResponse_DescriptorStatus
	fewest := uint32(math.MaxUint32)
	for _, st := range resp.GetStatuses() {
		if st.GetCurrentLimit() == nil {
			continue
		}
		switch {
		case st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
			chosen, fewest = st, 0
		case st.GetLimitRemaining() < fewest:
			chosen, fewest = st, st.GetLimitRemaining()
		}
	}
	if chosen == nil {
		return
	}
	reset := int64(0)
	if d := chosen.GetDurationUntilReset(); d != nil {
		reset = d.GetSeconds()
		if d.GetNanos() > 0 {
			reset++
		}
	}
	resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
		&corev3.HeaderValue{Key: h.Limit, Value: strconv.FormatUint(uint64(chosen.GetCurrentLimit().GetRequestsPerUnit()), 10)},
		&corev3.HeaderValue{Key: h.Remaining, Value: strconv.FormatUint(uint64(chosen.GetLimitRemaining()), 10)},
		&corev3.HeaderValue{Key: h.Reset, Value: strconv.FormatInt(reset, 10)},
	)
}

// retryAfterHeader returns the Retry-After header for a wait: whole seconds,
// rounded up, so a client that honours it is admitted.
func retryAfterHeader(wait time.Duration) *corev3.HeaderValue {
	secs := int64(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return &corev3.HeaderValue{Key: "retry-after", Value: strconv.FormatInt(secs, 10)}
}
