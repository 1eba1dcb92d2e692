package test

// envoyproxy/ratelimit's service tests (test/service/ratelimit_test.go in
// that project) that an environment variable decides, against the server
// binary. Theirs mock the limit's answer: here a descriptor of basic.yaml's
// one_per_minute rule (1 a minute) is over its limit at its second hit.

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// rlOverOneLimit sends, twice, a request of two descriptors: one of a limit
// of 1 a minute and one that matches no rule, and returns the second
// answer, in which the first descriptor is over its limit.
func rlOverOneLimit(t *testing.T, s rlServer) rlCall {
	t.Helper()
	awayFromBoundary(time.Minute, 3*time.Second)
	req := rlRequest("basic", [][][2]string{{{"one_per_minute", "v"}}, {{"hello", "world"}}}, 1)
	s.call(t, req)
	return s.call(t, req)
}

// TestRLServiceGlobalShadowMode is their TestServiceGlobalShadowMode: with
// SHADOW_MODE, an answer is OK even when a descriptor is over its limit,
// whose status still says OVER_LIMIT.
func TestRLServiceGlobalShadowMode(t *testing.T) {
	t.Parallel()
	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""), "SHADOW_MODE", "true")
	s := startRLServer(t, env)
	c := rlOverOneLimit(t, s)
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			rlStatus(rlOver, 1, rlMinute, 0),
			{Code: rlOK, CurrentLimit: nil, LimitRemaining: 0},
		},
	}, c)
}

// TestRLServiceRatelimitHeaders is their TestServiceWithCustomRatelimitHeaders
// and TestServiceWithDefaultRatelimitHeaders: with
// LIMIT_RESPONSE_HEADERS_ENABLED, an answer carries the limit, the remaining
// count and the reset of the descriptor over its limit, under the names
// LIMIT_*_HEADER give or RateLimit-*.
func TestRLServiceRatelimitHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		env                     []string
		limit, remaining, reset string
	}{
		{"Custom", []string{"LIMIT_LIMIT_HEADER", "A-Ratelimit-Limit", "LIMIT_REMAINING_HEADER", "A-Ratelimit-Remaining", "LIMIT_RESET_HEADER", "A-Ratelimit-Reset"},
			"A-Ratelimit-Limit", "A-Ratelimit-Remaining", "A-Ratelimit-Reset"},
		{"Default", nil, "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""), "LIMIT_RESPONSE_HEADERS_ENABLED", "true")
			s := startRLServer(t, with(env, tc.env...))
			c := rlOverOneLimit(t, s)
			wait := c.resp.GetStatuses()[0].GetDurationUntilReset().AsDuration()
			// Their reset is the whole seconds to the end of the fixed
			// window (58 in their test); here, the denial's wait, rounded up.
			reset := strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10)
			want := &rlsv3.RateLimitResponse{
				OverallCode: rlOver,
				Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
					rlStatus(rlOver, 1, rlMinute, 0),
					{Code: rlOK, CurrentLimit: nil, LimitRemaining: 0},
				},
				ResponseHeadersToAdd: []*corev3.HeaderValue{
					{Key: tc.limit, Value: "1"},
					{Key: tc.remaining, Value: "0"},
					{Key: tc.reset, Value: reset},
				},
			}
			assertRL(t, want, c)
		})
	}
}

// TestRLServiceEmptyDomainAndDescriptors is their TestEmptyDomain and
// TestEmptyDescriptors: each request is refused with their message.
// Theirs is an error of gRPC code Unknown; ratewarden's is InvalidArgument.
func TestRLServiceEmptyDomainAndDescriptors(t *testing.T) {
	t.Parallel()
	s := startRLServer(t, rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""))
	for _, tc := range []struct {
		req    *rlsv3.RateLimitRequest
		theirs string
		ours   string
	}{
		{rlRequest("", [][][2]string{{{"hello", "world"}}}, 1), "rate limit domain must not be empty", "domain"},
		{rlRequest("test-domain", [][][2]string{}, 1), "rate limit descriptor list must not be empty", "descriptors"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := s.Client.ShouldRateLimit(ctx, tc.req)
		cancel()
		assert.Nil(t, resp)
		require.Error(t, err, "theirs: %s", tc.theirs)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		assert.Contains(t, status.Convert(err).Message(), tc.ours, "theirs: %s", tc.theirs)
	}
}

// rlQuotaMode is their QUOTA_MODE=true.
var rlQuotaMode = []string{"QUOTA_MODE", "true"}

// TestRLServiceGlobalQuotaMode is their TestServiceGlobalQuotaMode, and
// TestServiceQuotaModeOnlySomeOverTheLimit: with QUOTA_MODE every
// descriptor is a quota, and a request is over its limits only when all of
// them are; a quota over its limit alone keeps its OVER_LIMIT status.
func TestRLServiceGlobalQuotaMode(t *testing.T) {
	t.Parallel()
	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""), rlQuotaMode...)
	s := startRLServer(t, env)
	awayFromBoundary(time.Minute, 3*time.Second)
	s.call(t, rlRequest("basic", [][][2]string{{{"one_per_minute", "a"}}, {{"one_per_minute", "b"}}}, 1))

	c := s.call(t, rlRequest("basic", [][][2]string{{{"one_per_minute", "a"}}, {{"one_per_minute", "c"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			rlStatus(rlOver, 1, rlMinute, 0),
			rlStatus(rlOK, 1, rlMinute, 0),
		},
	}, c, "only some quotas are over")

	c = s.call(t, rlRequest("basic", [][][2]string{{{"one_per_minute", "a"}}, {{"one_per_minute", "b"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOver,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			rlStatus(rlOver, 1, rlMinute, 0),
			rlStatus(rlOver, 1, rlMinute, 0),
		},
	}, c, "every quota is over")
}
