package rls

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// recorder is an Observer that keeps everything it is told, and a
// breaker.Observer too: the calls to the backend.
type recorder struct {
	mu       sync.Mutex
	requests []RequestOutcome
	limits   []LimitDecision
	backend  []breaker.Call
}

func (r *recorder) ObserveRequest(o RequestOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, o)
}

func (r *recorder) ObserveLimit(d LimitDecision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limits = append(r.limits, d)
}

func (r *recorder) ObserveBackend(c breaker.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backend = append(r.backend, c)
}

func (r *recorder) ObserveBreaker(breaker.State) {}

// take returns what was recorded since the last take.
func (r *recorder) take() (req []RequestOutcome, lim []LimitDecision, be []breaker.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, lim, be = r.requests, r.limits, r.backend
	r.requests, r.limits, r.backend = nil, nil, nil
	return
}

const observedLimits = `
domain: test
descriptors:
  - key: login
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, name: logins}
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: two
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 4}
    rate_limits:
      - {unit: hour, requests_per_unit: 100, algorithm: fixed_window, name: hourly}
  - key: free
    rate_limit: {unlimited: true}
`

// newObserved returns a service under observedLimits, with opts changed by
// mutate and a recorder, over a breaker that tells the recorder the calls
// to the backend, over a memory backend that reads the service's clock, and
// that clock. took is how long each call to the backend takes by the clock.
func newObserved(t *testing.T, took time.Duration, mutate func(*Options)) (*Service, *recorder, *algotest.Clock) {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(observedLimits)}}, rlstest.Config())
	require.NoError(t, err)
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	rec := &recorder{}
	b, err := breaker.New(slowLimiter{clock: clock, took: took, inner: mem}, breaker.Options{Observer: rec, Now: clock.Now})
	require.NoError(t, err)
	opts := DefaultOptions()
	opts.BackendTimeout = time.Second
	opts.Observer = rec
	if mutate != nil {
		mutate(&opts)
	}
	svc := newService(t, b, cfg, opts)
	svc.now = clock.Now
	return svc, rec, clock
}

func TestObserveLimitDecisions(t *testing.T) {
	svc, rec, _ := newObserved(t, 0, nil)
	ctx := context.Background()
	logins := LimitDecision{Domain: "test", Descriptor: "test.login", Limit: "logins",
		Algorithm: algorithms.SlidingWindowLog, Window: time.Minute, Hits: 1}

	// 7 logins on a limit of 5 with the default ratio 0.8: admitted hits
	// leave 1..5 used, and 4 and 5 are at or above 0.8·5.
	for i := range 7 {
		_, err := svc.ShouldRateLimit(ctx, request(desc("login", "alice")))
		require.NoError(t, err)
		_, lim, be := rec.take()
		want := logins
		switch {
		case i >= 5:
			want.OverLimit = true
		case i >= 3:
			want.NearLimit = true
		}
		assert.Equal(t, []LimitDecision{want}, lim, "call %d", i+1)
		assert.Len(t, be, 1, "call %d: one backend call (nothing to refund)", i+1)
	}

	t.Run("detailed_metric names the value", func(t *testing.T) {
		_, err := svc.ShouldRateLimit(ctx, request(desc("user", "bob"), desc("user", "carol")))
		require.NoError(t, err)
		_, lim, _ := rec.take()
		require.Len(t, lim, 2)
		assert.Equal(t, "test.user_bob", lim[0].Descriptor)
		assert.Equal(t, "test.user_carol", lim[1].Descriptor)
	})

	t.Run("shadow mode: over limit and shadowed, answered OK", func(t *testing.T) {
		for range 2 {
			resp, err := svc.ShouldRateLimit(ctx, request(desc("shadow", "s")))
			require.NoError(t, err)
			assert.Equal(t, ok, resp.GetOverallCode())
		}
		_, lim, _ := rec.take()
		require.Len(t, lim, 2)
		assert.True(t, lim[0].NearLimit, "1 of 1 used")
		assert.False(t, lim[0].OverLimit)
		assert.True(t, lim[1].OverLimit)
		assert.True(t, lim[1].Shadowed)
	})

	t.Run("a denied request is counted before its refund; refunds are not counted", func(t *testing.T) {
		req := request(desc("two", "x"), desc("login", "alice"))
		req.HitsAddend = 2
		resp, err := svc.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, over, resp.GetOverallCode())
		_, lim, be := rec.take()
		require.Len(t, lim, 3)
		assert.Equal(t, "test.two", lim[0].Descriptor)
		assert.Equal(t, algorithms.TokenBucket, lim[0].Algorithm)
		assert.Equal(t, time.Second, lim[0].Window)
		assert.Equal(t, uint64(2), lim[0].Hits)
		assert.False(t, lim[0].OverLimit)
		assert.False(t, lim[0].NearLimit, "2 of a burst of 4 is below 0.8")
		assert.Equal(t, "hourly", lim[1].Limit)
		assert.True(t, lim[2].OverLimit)
		assert.Len(t, be, 2, "the decision and the refund")

		neg := request(desc("refill", "x"))
		neg.Descriptors[0].IsNegativeHits = true
		_, err = svc.ShouldRateLimit(ctx, neg)
		require.NoError(t, err)
		_, lim, _ = rec.take()
		assert.Empty(t, lim)

		// Where the rule allows no give-back, the hits are taken, and
		// counted.
		neg = request(desc("two", "x"))
		neg.Descriptors[0].IsNegativeHits = true
		_, err = svc.ShouldRateLimit(ctx, neg)
		require.NoError(t, err)
		_, lim, _ = rec.take()
		assert.Len(t, lim, 2)
	})

	t.Run("unlimited and unmatched descriptors decide nothing", func(t *testing.T) {
		_, err := svc.ShouldRateLimit(ctx, request(desc("free", "f"), desc("nothing", "n")))
		require.NoError(t, err)
		req, lim, be := rec.take()
		assert.Empty(t, lim)
		assert.Empty(t, be)
		assert.Len(t, req, 1)
	})

	t.Run("an override of an unmatched descriptor is named by the domain alone", func(t *testing.T) {
		// The keys, like the values and the window, are the client's: each
		// would make a series of its own.
		for i := range 3 {
			d := desc(fmt.Sprint("unknown", i), "v1", "other", "v2")
			d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(uint32(i + 1))}
			_, err := svc.ShouldRateLimit(ctx, request(d))
			require.NoError(t, err)
			_, lim, _ := rec.take()
			require.Len(t, lim, 1)
			assert.Equal(t, "test", lim[0].Descriptor)
			assert.True(t, lim[0].Override)
		}
	})

	t.Run("an override of a rule keeps the rule's name", func(t *testing.T) {
		d := desc("two", "o")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MINUTE}
		_, err := svc.ShouldRateLimit(ctx, request(d))
		require.NoError(t, err)
		_, lim, _ := rec.take()
		require.Len(t, lim, 1)
		assert.Equal(t, "test.two", lim[0].Descriptor)
		assert.True(t, lim[0].Override)
	})
}

func TestNearLimitRatio(t *testing.T) {
	for _, tc := range []struct {
		ratio               float64
		capacity, remaining uint64
		want                bool
	}{
		{0.8, 5, 1, true},
		{0.8, 5, 2, false},
		{0.8, 10, 2, true},
		{0.8, 10, 3, false},
		{0.5, 3, 2, false}, // 1 used of 3
		{0.5, 4, 2, true},  // exactly half
		{1, 7, 0, true},
		{1, 7, 1, false},
		{0.8, 0, 0, true},                         // a limit of 0 is always full
		{0.8, 4, 9, false},                        // remaining above capacity
		{0.9, 1 << 32, 1 << 32 / 10, true},        // 0.9·2^32 used, no overflow
		{0.9, 1 << 32, 1<<32/10 + 1000, false},    // a little less
		{0.3, 1 << 32, 1<<32 - 1288490189, true},  // 0.3·2^32 = 1288490188.8: one more is enough
		{0.3, 1 << 32, 1<<32 - 1288490188, false}, // and one less is not
	} {
		t.Run(fmt.Sprintf("%v of %d with %d left", tc.ratio, tc.capacity, tc.remaining), func(t *testing.T) {
			svc, _, _ := newObserved(t, 0, func(o *Options) { o.NearLimitRatio = tc.ratio })
			assert.Equal(t, tc.want, svc.nearLimit(tc.capacity, tc.remaining))
		})
	}
}

func TestObserveRequests(t *testing.T) {
	svc, rec, _ := newObserved(t, 3*time.Millisecond, nil)
	ctx := context.Background()

	_, err := svc.ShouldRateLimit(ctx, request(desc("login", "a")))
	require.NoError(t, err)
	_, err = svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "test"})
	require.Error(t, err)
	req, _, be := rec.take()
	assert.Equal(t, []RequestOutcome{
		{Duration: 3 * time.Millisecond, Code: ok, GRPCCode: codes.OK},
		{Duration: 0, Code: rlsv3.RateLimitResponse_UNKNOWN, GRPCCode: codes.InvalidArgument},
	}, req)
	assert.Equal(t, []breaker.Call{{Duration: 3 * time.Millisecond, Failure: rate.FailureNone}}, be)
}

// slowLimiter advances clock by took on every call, then asks inner.
type slowLimiter struct {
	clock *algotest.Clock
	took  time.Duration
	inner rate.Limiter
}

func (l slowLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	if l.clock != nil {
		l.clock.Advance(l.took)
	}
	if l.inner == nil {
		return make([]algorithms.Result, len(ops)), nil
	}
	return l.inner.Do(ctx, ops)
}
