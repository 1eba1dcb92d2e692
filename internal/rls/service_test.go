package rls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

const testLimits = `
domain: test
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window, name: fixed_limit}
  - key: log
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: sliding_window_log}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 4}
  - key: counter
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 100}
  - key: two
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket}
    rate_limits:
      - {unit: hour, requests_per_unit: 7, algorithm: fixed_window, name: hourly}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: free
    rate_limit: {unlimited: true}
  - key: vip
    rate_limit: {unlimited: true, name: vip, replaces: [{name: fixed_limit}]}
  - key: staff
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: fixed_window, replaces: [{name: vip}]}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: refill
    allow_negative_hits: true
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: user
    descriptors:
      - key: plan
        value: basic
        rate_limit: {unit: minute, requests_per_unit: 2, algorithm: fixed_window, name: basic}
      - key: plan
        value: premium
        rate_limit:
          unit: minute
          requests_per_unit: 50
          algorithm: fixed_window
          replaces: [{name: basic}]
`

// t0 is a realistic time a little after a minute boundary.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 250_000_000, time.UTC)

type fixture struct {
	svc   *Service
	clock *algotest.Clock
	mem   *memory.Limiter
}

func newFixture(t *testing.T, mutate func(*Options)) *fixture {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	opts := DefaultOptions()
	opts.BackendTimeout = time.Second
	if mutate != nil {
		mutate(&opts)
	}
	return &fixture{svc: newService(t, mem, cfg, opts), clock: clock, mem: mem}
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor { return rlstest.Descriptor(kv...) }

func request(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return rlstest.Request("test", descs...)
}

func (f *fixture) call(t *testing.T, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.svc.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(req.GetDescriptors()))
	return resp
}

func codesOf(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	return rlstest.Codes(resp)
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

func TestInvalidRequests(t *testing.T) {
	f := newFixture(t, nil)
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("fixed", "a")}}, "domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "test"}, "request has no descriptors"},
		{"descriptor without entries", request(desc("fixed", "a"), desc()), "descriptors[1] has no entries"},
		{"empty key", request(desc("fixed", "a", "", "b")), "descriptors[0].entries[1] has an empty key"},
		{"override with unknown unit", request(withOverride(desc("fixed", "a"), 5, typev3.RateLimitUnit_UNKNOWN, 0)), "descriptors[0].limit.unit"},
		{"override with multiplier 0", request(withOverride(desc("fixed", "a"), 5, typev3.RateLimitUnit_SECOND, 0, true)), "unit_multiplier must be at least 1"},
		{"override a log cannot hold", request(withOverride(desc("log", "a"), 1_000_000, typev3.RateLimitUnit_SECOND, 0)), "sliding_window_log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.ShouldRateLimit(context.Background(), tc.req)
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}
}

func withOverride(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit, mult uint32, setMult ...bool) *ratelimitv3.RateLimitDescriptor {
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	if mult != 0 || len(setMult) > 0 {
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return d
}

func TestUnknownDomainAndUnmatchedDescriptorsAreOK(t *testing.T) {
	f := newFixture(t, nil)
	req := &rlsv3.RateLimitRequest{Domain: "nope", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("fixed", "a"), desc("x", "y")}}
	resp := f.call(t, req)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
	assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())

	resp = f.call(t, request(desc("nothing", "here"), desc("fixed", "a", "extra", "entry")))
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
	assert.Nil(t, resp.GetStatuses()[1].GetCurrentLimit())
}

func TestFixedWindowTurnsOverLimitWithTruthfulReset(t *testing.T) {
	f := newFixture(t, nil)
	req := request(desc("fixed", "a"))
	for i := range 3 {
		resp := f.call(t, req)
		require.Equal(t, ok, resp.GetOverallCode(), "call %d", i)
		st := resp.GetStatuses()[0]
		assert.EqualValues(t, 2-i, st.GetLimitRemaining())
		assert.Equal(t, "fixed_limit", st.GetCurrentLimit().GetName())
		assert.EqualValues(t, 3, st.GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit())
	}
	resp := f.call(t, req)
	require.Equal(t, over, resp.GetOverallCode())
	st := resp.GetStatuses()[0]
	assert.Equal(t, over, st.GetCode())
	assert.EqualValues(t, 0, st.GetLimitRemaining())
	wait := st.GetDurationUntilReset().AsDuration()
	assert.Equal(t, 59*time.Second+750*time.Millisecond, wait)
	require.Len(t, resp.GetResponseHeadersToAdd(), 1)
	assert.Equal(t, "retry-after", resp.GetResponseHeadersToAdd()[0].GetKey())
	assert.Equal(t, "60", resp.GetResponseHeadersToAdd()[0].GetValue())

	f.clock.Advance(wait - time.Microsecond)
	assert.Equal(t, over, f.call(t, req).GetOverallCode())
	f.clock.Advance(time.Microsecond)
	assert.Equal(t, ok, f.call(t, req).GetOverallCode())
}

// TestRetryAfterCanBeLeftOut: with RetryAfter off (RLS_RETRY_AFTER=false),
// an answer over its limits carries no header, as envoyproxy/ratelimit's
// does not; its statuses are the same.
func TestRetryAfterCanBeLeftOut(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.RetryAfter = false })
	req := request(desc("fixed", "a"))
	for range 3 {
		require.Equal(t, ok, f.call(t, req).GetOverallCode())
	}
	resp := f.call(t, req)
	require.Equal(t, over, resp.GetOverallCode())
	assert.Equal(t, 59*time.Second+750*time.Millisecond, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration())
	assert.Empty(t, resp.GetResponseHeadersToAdd())
}

func TestStatusesFollowRequestOrder(t *testing.T) {
	f := newFixture(t, nil)
	for range 2 {
		f.call(t, request(desc("log", "a")))
	}
	resp := f.call(t, request(desc("nothing", "x"), desc("log", "a"), desc("free", "x"), desc("counter", "c")))
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, over, ok, ok}, codesOf(resp))
	assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
	assert.EqualValues(t, 2, resp.GetStatuses()[1].GetCurrentLimit().GetRequestsPerUnit())
	assert.EqualValues(t, math.MaxUint32, resp.GetStatuses()[2].GetLimitRemaining())
	assert.Nil(t, resp.GetStatuses()[2].GetCurrentLimit())
	cl := resp.GetStatuses()[3].GetCurrentLimit()
	assert.EqualValues(t, 100, cl.GetRequestsPerUnit())
	assert.EqualValues(t, 5, cl.GetUnitMultiplier().GetValue())
}

func TestHitsAddend(t *testing.T) {
	f := newFixture(t, nil)
	req := request(desc("bucket", "a"))
	req.HitsAddend = 3
	st := f.call(t, req).GetStatuses()[0]
	assert.Equal(t, ok, st.GetCode())
	assert.EqualValues(t, 1, st.GetLimitRemaining())

	// A descriptor's own hits_addend wins; present and 0 peeks.
	peek := desc("bucket", "a")
	peek.HitsAddend = wrapperspb.UInt64(0)
	req = request(peek)
	req.HitsAddend = 3
	st = f.call(t, req).GetStatuses()[0]
	assert.Equal(t, ok, st.GetCode())
	assert.EqualValues(t, 1, st.GetLimitRemaining())

	two := desc("bucket", "a")
	two.HitsAddend = wrapperspb.UInt64(2)
	resp := f.call(t, request(two))
	assert.Equal(t, over, resp.GetOverallCode())
	// 1 token short at 10 a second: exactly 100ms.
	assert.Equal(t, 100*time.Millisecond, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration())
}

func TestHitsLargerThanTheLimitAreDeniedAndConsumeNothing(t *testing.T) {
	f := newFixture(t, nil)
	req := request(desc("fixed", "a"))
	req.HitsAddend = 1000
	resp := f.call(t, req)
	assert.Equal(t, over, resp.GetOverallCode())
	huge := desc("fixed", "a")
	huge.HitsAddend = wrapperspb.UInt64(f.svc.opts.Bounds.MaxHits)
	assert.Equal(t, over, f.call(t, request(huge)).GetOverallCode())
	st := f.call(t, request(desc("fixed", "a"))).GetStatuses()[0]
	assert.Equal(t, ok, st.GetCode())
	assert.EqualValues(t, 2, st.GetLimitRemaining())
}

// TestHitsBeyondTheBoundsAreRefused: more hits than Bounds.MaxHits, or than
// Bounds.MaxLogHits of a sliding log, are an invalid request, however the
// limit stands; so are such hits given back. Nothing is counted.
func TestHitsBeyondTheBoundsAreRefused(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Bounds.MaxLogHits = 5 })
	descHits := func(kv string, hits uint64, negative bool) *ratelimitv3.RateLimitDescriptor {
		d := desc(kv, "a")
		d.HitsAddend = wrapperspb.UInt64(hits)
		d.IsNegativeHits = negative
		return d
	}
	requestHits := request(desc("counter", "a"))
	requestHits.HitsAddend = math.MaxUint32
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"the request's hits_addend", requestHits, "descriptors[0] asks for 4294967295 hits, more than the 1000000000 one descriptor may take or give back (RLS_MAX_HITS)"},
		{"a descriptor's hits_addend", request(desc("fixed", "a"), descHits("counter", math.MaxUint64, false)), "descriptors[1] asks for 18446744073709551615 hits"},
		{"hits given back", request(descHits("refill", f.svc.opts.Bounds.MaxHits+1, true)), "RLS_MAX_HITS"},
		{"hits of a sliding log", request(descHits("log", 6, false)), "descriptors[0] asks for 6 hits of a sliding_window_log, more than the 5 it may take or give back at once (RLS_MAX_LOG_HITS)"},
		{"hits of an override's log", request(withOverride(descHits("log", 6, false), 100, typev3.RateLimitUnit_MINUTE, 0)), "RLS_MAX_LOG_HITS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.ShouldRateLimit(context.Background(), tc.req)
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}
	// The request that named fixed first took nothing from it; a sliding
	// log takes as many hits as the bound allows.
	assert.EqualValues(t, 2, f.call(t, request(desc("fixed", "a"))).GetStatuses()[0].GetLimitRemaining())
	assert.Equal(t, over, f.call(t, request(descHits("log", 5, false))).GetOverallCode(), "5 hits are more than the log's 2")
}

func TestNegativeHitsGiveBack(t *testing.T) {
	f := newFixture(t, nil)
	for range 3 {
		f.call(t, request(desc("refill", "a")))
	}
	require.Equal(t, over, f.call(t, request(desc("refill", "a"))).GetOverallCode())
	back := desc("refill", "a")
	back.IsNegativeHits = true
	back.HitsAddend = wrapperspb.UInt64(2)
	st := f.call(t, request(back)).GetStatuses()[0]
	assert.Equal(t, ok, st.GetCode())
	assert.EqualValues(t, 2, st.GetLimitRemaining())
	assert.Equal(t, ok, f.call(t, request(desc("refill", "a"))).GetOverallCode())
}

// TestNegativeHitsWhereNotAllowedAreTaken: where the rule does not set
// allow_negative_hits, is_negative_hits is ignored and the hits are taken,
// as envoyproxy/ratelimit takes them; an override of a descriptor that
// matches no rule gives back only with Options.AllowNegativeHits.
func TestNegativeHitsWhereNotAllowedAreTaken(t *testing.T) {
	negative := func(d *ratelimitv3.RateLimitDescriptor, hits uint64) *rlsv3.RateLimitRequest {
		d.IsNegativeHits = true
		d.HitsAddend = wrapperspb.UInt64(hits)
		return request(d)
	}
	t.Run("a rule", func(t *testing.T) {
		f := newFixture(t, nil)
		st := f.call(t, negative(desc("fixed", "a"), 2)).GetStatuses()[0]
		assert.Equal(t, ok, st.GetCode())
		assert.EqualValues(t, 1, st.GetLimitRemaining(), "2 of 3 taken")
		assert.Equal(t, over, f.call(t, negative(desc("fixed", "a"), 2)).GetOverallCode())
	})
	unmatched := func() *ratelimitv3.RateLimitDescriptor {
		return withOverride(desc("unconfigured", "x"), 3, typev3.RateLimitUnit_HOUR, 0)
	}
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("an unmatched override, AllowNegativeHits %v", allow), func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.AllowNegativeHits = allow })
			for range 3 {
				require.Equal(t, ok, f.call(t, request(unmatched())).GetOverallCode())
			}
			st := f.call(t, negative(unmatched(), 3)).GetStatuses()[0]
			if allow {
				assert.Equal(t, ok, st.GetCode())
				assert.EqualValues(t, 3, st.GetLimitRemaining(), "all 3 given back")
			} else {
				assert.Equal(t, over, st.GetCode(), "3 more hits taken from none left")
				assert.EqualValues(t, 0, st.GetLimitRemaining())
			}
		})
	}
}

func TestOverrideReplacesNumbersAndKeepsAlgorithm(t *testing.T) {
	f := newFixture(t, nil)
	// The rule is a sliding log of 2 a second; the override makes it 3 every
	// 2 minutes, still a log.
	req := request(withOverride(desc("log", "o"), 3, typev3.RateLimitUnit_MINUTE, 2))
	for range 3 {
		require.Equal(t, ok, f.call(t, req).GetOverallCode())
	}
	f.clock.Advance(30 * time.Second)
	resp := f.call(t, req)
	require.Equal(t, over, resp.GetOverallCode())
	st := resp.GetStatuses()[0]
	assert.EqualValues(t, 3, st.GetCurrentLimit().GetRequestsPerUnit())
	assert.EqualValues(t, 2, st.GetCurrentLimit().GetUnitMultiplier().GetValue())
	// A log frees its oldest entry exactly 120s after it was logged.
	assert.Equal(t, 90*time.Second, st.GetDurationUntilReset().AsDuration())

	// An unmatched descriptor of a known domain is limited by its override.
	req = request(withOverride(desc("unconfigured", "x"), 1, typev3.RateLimitUnit_HOUR, 0))
	assert.Equal(t, ok, f.call(t, req).GetOverallCode())
	assert.Equal(t, over, f.call(t, req).GetOverallCode())
}

func TestSeveralLimitsAllMustAdmit(t *testing.T) {
	f := newFixture(t, nil)
	req := request(desc("two", "a"))
	for i := range 5 {
		st := f.call(t, req).GetStatuses()[0]
		require.Equal(t, ok, st.GetCode(), "call %d", i)
	}
	// The bucket (burst 5) is empty: it binds, 200ms to the next token.
	st := f.call(t, req).GetStatuses()[0]
	assert.Equal(t, over, st.GetCode())
	assert.Equal(t, 200*time.Millisecond, st.GetDurationUntilReset().AsDuration())
	assert.EqualValues(t, 5, st.GetCurrentLimit().GetRequestsPerUnit())

	f.clock.Advance(time.Second)
	for range 2 {
		require.Equal(t, ok, f.call(t, req).GetOverallCode())
	}
	// Now the hourly limit (7) binds, although the bucket has tokens.
	st = f.call(t, req).GetStatuses()[0]
	assert.Equal(t, over, st.GetCode())
	assert.Equal(t, "hourly", st.GetCurrentLimit().GetName())
	assert.EqualValues(t, 0, st.GetLimitRemaining())
}

func TestDeniedRequestConsumesNothing(t *testing.T) {
	for _, refund := range []bool{true, false} {
		t.Run(map[bool]string{true: "refund", false: "no refund"}[refund], func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.RefundOnDeny = refund })
			// Exhaust the log, then send it together with the fixed window
			// and the two-limit descriptor.
			for range 2 {
				f.call(t, request(desc("log", "r")))
			}
			req := request(desc("fixed", "r"), desc("log", "r"), desc("two", "r"))
			for range 3 {
				resp := f.call(t, req)
				assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, over, ok}, codesOf(resp))
			}
			// With refunds the fixed window (3 a minute) is untouched; without,
			// the three denied requests used it up.
			st := f.call(t, request(desc("fixed", "r"))).GetStatuses()[0]
			if refund {
				assert.Equal(t, ok, st.GetCode())
				assert.EqualValues(t, 2, st.GetLimitRemaining())
			} else {
				assert.Equal(t, over, st.GetCode())
			}
		})
	}
}

func TestShadowMode(t *testing.T) {
	t.Run("rule", func(t *testing.T) {
		f := newFixture(t, nil)
		for range 3 {
			resp := f.call(t, request(desc("shadow", "s")))
			assert.Equal(t, ok, resp.GetOverallCode())
			assert.Empty(t, resp.GetResponseHeadersToAdd())
		}
		// A shadowed denial does not make other descriptors refund.
		resp := f.call(t, request(desc("shadow", "s"), desc("fixed", "s")))
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
		assert.EqualValues(t, 0, resp.GetStatuses()[0].GetLimitRemaining())
		assert.EqualValues(t, 2, resp.GetStatuses()[1].GetLimitRemaining())
	})
	t.Run("global", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.ShadowMode = true })
		for range 5 {
			assert.Equal(t, ok, f.call(t, request(desc("fixed", "g"))).GetOverallCode())
		}
		assert.EqualValues(t, 0, f.call(t, request(desc("fixed", "g"))).GetStatuses()[0].GetLimitRemaining())
		// The answer is OK, but, as with envoyproxy/ratelimit's
		// SHADOW_MODE, the status of a descriptor over its limit says so
		// (a rule's shadow mode answers its status OK); nothing is given
		// back, and no retry-after is sent.
		resp := f.call(t, request(desc("fixed", "g"), desc("counter", "g"), desc("shadow", "g"), desc("shadow", "g")))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok, ok, ok}, codesOf(resp))
		assert.Empty(t, resp.GetResponseHeadersToAdd())
		assert.EqualValues(t, 98, f.call(t, request(desc("counter", "g"))).GetStatuses()[0].GetLimitRemaining(),
			"the hit of counter in the request answered OK stays")
	})
}

func TestZeroLimitBlocks(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.call(t, request(desc("zero", "z")))
	assert.Equal(t, over, resp.GetOverallCode())
	assert.Equal(t, "1", resp.GetResponseHeadersToAdd()[0].GetValue())
}

func TestReplaces(t *testing.T) {
	f := newFixture(t, nil)
	basic := desc("user", "u", "plan", "basic")
	premium := desc("user", "u", "plan", "premium")
	// Alone, basic allows 2 a minute.
	for range 2 {
		f.call(t, request(basic))
	}
	assert.Equal(t, over, f.call(t, request(basic)).GetOverallCode())
	// With premium in the same request, the basic limit does not apply.
	resp := f.call(t, request(basic, premium))
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
	assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
	assert.EqualValues(t, 49, resp.GetStatuses()[1].GetLimitRemaining())
}

func TestUnlimitedRulesReplaceAndAreReplaced(t *testing.T) {
	f := newFixture(t, nil)
	for range 5 {
		resp := f.call(t, request(desc("fixed", "v"), desc("vip", "x")))
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
		assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
		assert.EqualValues(t, math.MaxUint32, resp.GetStatuses()[1].GetLimitRemaining())
	}
	// The vip rule replaced the fixed limit: nothing was counted.
	assert.EqualValues(t, 2, f.call(t, request(desc("fixed", "v"))).GetStatuses()[0].GetLimitRemaining())

	// A limit that replaces the unlimited rule removes it from the answer.
	resp := f.call(t, request(desc("vip", "x"), desc("staff", "y")))
	assert.EqualValues(t, 0, resp.GetStatuses()[0].GetLimitRemaining())
	assert.EqualValues(t, 0, resp.GetStatuses()[1].GetLimitRemaining())
	assert.EqualValues(t, 1, resp.GetStatuses()[1].GetCurrentLimit().GetRequestsPerUnit())
}

// TestWithoutConfigTheAnswerIsAnError: until a configuration is loaded,
// every valid request, a limit override too, is answered as
// envoyproxy/ratelimit answers it before its first configuration (gRPC
// Unknown, "no rate limit configuration loaded"), so that Envoy applies its
// failure mode, and nothing is taken. An invalid request is still
// InvalidArgument. Once limits are set, they decide.
func TestWithoutConfigTheAnswerIsAnError(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	svc := newService(t, mem, nil, DefaultOptions())
	override := desc("fixed", "a")
	override.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
	for _, req := range []*rlsv3.RateLimitRequest{request(desc("fixed", "a")), request(override), {Domain: "elsewhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v")}}} {
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		assert.Nil(t, resp)
		assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
		assert.Equal(t, "no rate limit configuration loaded", status.Convert(err).Message())
		assert.ErrorIs(t, err, ErrNoConfig)
	}
	_, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("fixed", "a")}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "the request's fault first: %v", err)
	// /json says 503: internal/server's TestJSONWithoutConfig.

	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	svc.SetConfig(cfg)
	resp, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "a")))
	require.NoError(t, err)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.EqualValues(t, 2, resp.GetStatuses()[0].GetLimitRemaining(), "the first hit: the answers before took nothing")
}

// failingLimiter stands for a backend that fails, or hangs until its context
// ends.
type failingLimiter struct{ hang bool }

func (l failingLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	if l.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("connection refused")
}

func TestFailureModes(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	for _, hang := range []bool{false, true} {
		for _, tc := range []struct {
			mode FailureMode
			want rlsv3.RateLimitResponse_Code
		}{{FailAllow, ok}, {FailDeny, over}, {FailError, 0}} {
			t.Run(tc.mode.String(), func(t *testing.T) {
				opts := DefaultOptions()
				opts.FailureMode = tc.mode
				opts.BackendTimeout = 20 * time.Millisecond
				svc := newService(t, failingLimiter{hang: hang}, cfg, opts)
				start := time.Now()
				resp, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "a"), desc("nothing", "x"), desc("shadow", "s")))
				elapsed := time.Since(start)
				assert.Less(t, elapsed, 5*time.Second, "a hung backend is cut off by the timeout")
				if tc.mode == FailError {
					require.Error(t, err)
					assert.Equal(t, codes.Unavailable, status.Code(err))
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want, resp.GetOverallCode())
				assert.Equal(t, []rlsv3.RateLimitResponse_Code{tc.want, ok, ok}, codesOf(resp))
				if tc.mode == FailDeny {
					// No wait is known: clients are asked to come back in a second.
					require.Len(t, resp.GetResponseHeadersToAdd(), 1)
					assert.Equal(t, "1", resp.GetResponseHeadersToAdd()[0].GetValue())
				}
			})
		}
	}
}

func TestHostileInput(t *testing.T) {
	f := newFixture(t, nil)
	t.Run("64 KiB value is one key", func(t *testing.T) {
		big := strings.Repeat("v", 64<<10)
		for range 3 {
			require.Equal(t, ok, f.call(t, request(desc("fixed", big))).GetOverallCode())
		}
		assert.Equal(t, over, f.call(t, request(desc("fixed", big))).GetOverallCode())
		// A value differing only in its last byte is another key.
		other := big[:len(big)-1] + "w"
		assert.Equal(t, ok, f.call(t, request(desc("fixed", other))).GetOverallCode())
	})
	t.Run("10000 descriptors, where RLS_MAX_DESCRIPTORS allows them", func(t *testing.T) {
		descs := make([]*ratelimitv3.RateLimitDescriptor, 10_000)
		for i := range descs {
			descs[i] = desc("counter", strings.Repeat("k", i%7)+string(rune('a'+i%26)))
		}
		_, err := f.svc.ShouldRateLimit(context.Background(), request(descs...))
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "past the default bound")
		f := newFixture(t, func(o *Options) { o.Bounds.MaxDescriptors = 10_000 })
		resp := f.call(t, request(descs...))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Len(t, resp.GetStatuses(), 10_000)
	})
	t.Run("hits_addend 4294967295", func(t *testing.T) {
		req := request(desc("counter", "h"))
		req.HitsAddend = math.MaxUint32
		_, err := f.svc.ShouldRateLimit(context.Background(), req)
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
	})
	// And the service still serves.
	assert.Equal(t, ok, f.call(t, request(desc("fixed", "after"))).GetOverallCode())
}

// TestOverridesBeyondTheBoundsAreRefused: a limit override may not make a
// sliding log larger than Bounds.MaxOverrideLogSize, nor a state that lives
// longer than Bounds.MaxOverrideLifetime; an override of a descriptor that
// matches no rule may not count under more than Bounds.MaxUnmatchedEntries
// entries or a key longer than Bounds.MaxUnmatchedKeyBytes. Each is refused
// with a message naming the bound; just within the bounds is fine.
func TestOverridesBeyondTheBoundsAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	entries := func(n int) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := range n {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: fmt.Sprint("k", i), Value: "v"})
		}
		return d
	}
	for _, tc := range []struct {
		name string
		d    *ratelimitv3.RateLimitDescriptor
		msg  string // empty: admitted
	}{
		{"a log of 1000", withOverride(desc("log", "a"), 1000, typev3.RateLimitUnit_SECOND, 0), ""},
		{"a log of 1001", withOverride(desc("log", "a"), 1001, typev3.RateLimitUnit_SECOND, 0),
			"descriptors[0].limit.requests_per_unit 1001 is more than the 1000 entries a limit override may give a sliding_window_log (RLS_MAX_OVERRIDE_LOG_SIZE)"},
		{"a bucket of 10^9", withOverride(desc("bucket", "a"), 1_000_000_000, typev3.RateLimitUnit_SECOND, 0), ""},
		{"a log of 10 years", withOverride(desc("log", "a"), 10, typev3.RateLimitUnit_YEAR, 10),
			"descriptors[0].limit: a sliding_window_log of 87600h0m0s keeps its state for 87600h0m0s, longer than the 1488h0m0s a limit override may (RLS_MAX_OVERRIDE_LIFETIME)"},
		{"a fixed window of 62 days", withOverride(desc("fixed", "a"), 10, typev3.RateLimitUnit_DAY, 62), ""},
		{"a fixed window of 63 days", withOverride(desc("fixed", "a"), 10, typev3.RateLimitUnit_DAY, 63), "RLS_MAX_OVERRIDE_LIFETIME"},
		{"a counter of 31 days lives 62", withOverride(desc("counter", "a"), 10, typev3.RateLimitUnit_DAY, 31), ""},
		{"a counter of 32 days lives 64", withOverride(desc("counter", "a"), 10, typev3.RateLimitUnit_DAY, 32), "keeps its state for 1536h0m0s"},
		{"an unmatched override of 16 entries", withOverride(entries(16), 10, typev3.RateLimitUnit_SECOND, 0), ""},
		{"an unmatched override of 17 entries", withOverride(entries(17), 10, typev3.RateLimitUnit_SECOND, 0),
			"descriptors[0] matches no rule and has 17 entries, more than the 16 a limit override of an unmatched descriptor may count under (RLS_MAX_UNMATCHED_ENTRIES)"},
		// test|k=vvv…|l=%7C%7C…|sliding_window_counter:1, with each '|'
		// escaped in three bytes: 1024 bytes, then 1035.
		{"an unmatched override of a 1024-byte key", withOverride(desc("k", strings.Repeat("v", 239), "l", strings.Repeat("|", 250)), 10, typev3.RateLimitUnit_SECOND, 0), ""},
		{"an unmatched override of a 1035-byte key", withOverride(desc("k", strings.Repeat("v", 250), "l", strings.Repeat("|", 250)), 10, typev3.RateLimitUnit_SECOND, 0),
			"descriptors[0] matches no rule and its entries make a key of 1035 bytes, more than the 1024 a limit override of an unmatched descriptor may count under (RLS_MAX_UNMATCHED_KEY_BYTES)"},
		{"an unmatched override of a digested value", withOverride(desc("k", strings.Repeat("v", 64<<10)), 10, typev3.RateLimitUnit_SECOND, 0), ""},
		{"an unmatched override that a log would count", withOverride(desc("k", "v"), 2000, typev3.RateLimitUnit_SECOND, 0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.svc.ShouldRateLimit(context.Background(), request(tc.d))
			if tc.msg == "" {
				require.NoError(t, err)
				assert.Equal(t, ok, resp.GetOverallCode())
				return
			}
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}

	t.Run("the default algorithm is a log", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.DefaultAlgorithm = algorithms.SlidingWindowLog })
		_, err := f.svc.ShouldRateLimit(context.Background(), request(withOverride(desc("k", "v"), 2000, typev3.RateLimitUnit_SECOND, 0)))
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.Contains(t, status.Convert(err).Message(), "RLS_MAX_OVERRIDE_LOG_SIZE")
	})
}

// newService is New for the tests: an invalid option fails tb.
func newService(tb testing.TB, limiter rate.Limiter, cfg *config.Config, opts Options) *Service {
	tb.Helper()
	s, err := New(limiter, cfg, opts)
	require.NoError(tb, err)
	return s
}

// TestNewRefusesInvalidOptions: New refuses an option that is not valid,
// or not set where its zero value has no meaning of its own, naming the
// option. (The circuit breaker's options are its own:
// internal/layers/breaker's TestNewRefusesInvalidOptions.)
func TestNewRefusesInvalidOptions(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"DefaultAlgorithm":     func(o *Options) { o.DefaultAlgorithm = algorithms.Algorithm(9) },
		"FailureMode":          func(o *Options) { o.FailureMode = FailureMode(7) },
		"NearLimitRatio":       func(o *Options) { o.NearLimitRatio = 1.5 },
		"MaxUnmatchedEntries":  func(o *Options) { o.Bounds.MaxUnmatchedEntries = -1 },
		"BackendTimeout":       func(o *Options) { o.BackendTimeout = -time.Second },
		"MaxDescriptors":       func(o *Options) { o.Bounds.MaxDescriptors = 0 },
		"MaxEntries":           func(o *Options) { o.Bounds.MaxEntries = 0 },
		"MaxHits":              func(o *Options) { o.Bounds.MaxHits = 0 },
		"MaxLogHits":           func(o *Options) { o.Bounds.MaxLogHits = 0 },
		"MaxOverrideLogSize":   func(o *Options) { o.Bounds.MaxOverrideLogSize = 0 },
		"MaxOverrideLifetime":  func(o *Options) { o.Bounds.MaxOverrideLifetime = 0 },
		"MaxUnmatchedKeyBytes": func(o *Options) { o.Bounds.MaxUnmatchedKeyBytes = 0 },
	} {
		opts := DefaultOptions()
		mutate(&opts)
		_, err := New(memory.New(), nil, opts)
		assert.ErrorContains(t, err, name, name)
		require.NotNil(t, option.Of(err), name)
		assert.True(t, strings.HasSuffix(option.Of(err).Field, name), "the error names the field: %s", option.Of(err).Field)
	}
	_, err := New(memory.New(), nil, DefaultOptions())
	require.NoError(t, err)

	// No option without a meaning of its own for its zero value is filled
	// in: the zero Options name the first of them.
	_, err = New(memory.New(), nil, Options{})
	assert.EqualError(t, err, "rls: DefaultAlgorithm is not set")
	_, err = New(memory.New(), nil, Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	assert.ErrorContains(t, err, "NearLimitRatio")
	_, err = New(memory.New(), nil, Options{DefaultAlgorithm: algorithms.SlidingWindowCounter, NearLimitRatio: 0.8})
	assert.ErrorContains(t, err, "Bounds.MaxDescriptors must be at least 1")
}
