package rls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
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
	"github.com/ratewarden/ratewarden/internal/algorithms/algotest"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
)

// recorder is an Observer that keeps everything it is told.
type recorder struct {
	mu        sync.Mutex
	requests  []RequestOutcome
	limits    []LimitDecision
	backend   []BackendCall
	breaker   []BreakerState
	shed      []ShedReason
	inflight  []int
	giveBacks map[GiveBackResult]int
	deferred  map[GiveBackResult]int
}

func (r *recorder) ObserveShed(reason ShedReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shed = append(r.shed, reason)
}

func (r *recorder) ObserveInflightLimit(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inflight = append(r.inflight, n)
}

func (r *recorder) ObserveDeferredCharge(result GiveBackResult, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deferred == nil {
		r.deferred = map[GiveBackResult]int{}
	}
	r.deferred[result] += n
}

// deferredCharges returns the deferred charges counted so far, by result.
func (r *recorder) deferredCharges() map[GiveBackResult]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[GiveBackResult]int{}
	for k, v := range r.deferred {
		out[k] = v
	}
	return out
}

func (r *recorder) ObserveGiveBack(result GiveBackResult, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.giveBacks == nil {
		r.giveBacks = map[GiveBackResult]int{}
	}
	r.giveBacks[result] += n
}

// gaveBack returns the give-backs counted so far, by result.
func (r *recorder) gaveBack() map[GiveBackResult]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[GiveBackResult]int{}
	for k, v := range r.giveBacks {
		out[k] = v
	}
	return out
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

func (r *recorder) ObserveBackend(c BackendCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backend = append(r.backend, c)
}

func (r *recorder) ObserveBreaker(s BreakerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breaker = append(r.breaker, s)
}

// take returns what was recorded since the last take.
func (r *recorder) take() (req []RequestOutcome, lim []LimitDecision, be []BackendCall, br []BreakerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	req, lim, be, br = r.requests, r.limits, r.backend, r.breaker
	r.requests, r.limits, r.backend, r.breaker = nil, nil, nil, nil
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

func newObserved(t *testing.T, limiter algorithms.Limiter, mutate func(*Options)) (*Service, *recorder, *algotest.Clock) {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(observedLimits)}}, config.Options{})
	require.NoError(t, err)
	clock := algotest.NewClock(t0)
	if limiter == nil {
		mem := memory.New(memory.WithClock(clock.Now))
		t.Cleanup(mem.Close)
		limiter = mem
	}
	rec := &recorder{}
	opts := DefaultOptions()
	opts.BackendTimeout = time.Second
	opts.Observer = rec
	if mutate != nil {
		mutate(&opts)
	}
	svc := newService(t, limiter, cfg, opts)
	svc.now = clock.Now
	return svc, rec, clock
}

func TestObserveLimitDecisions(t *testing.T) {
	svc, rec, _ := newObserved(t, nil, nil)
	ctx := context.Background()
	logins := LimitDecision{Domain: "test", Descriptor: "test.login", Limit: "logins",
		Algorithm: algorithms.SlidingWindowLog, Window: time.Minute, Hits: 1}

	// 7 logins on a limit of 5 with the default ratio 0.8: admitted hits
	// leave 1..5 used, and 4 and 5 are at or above 0.8·5.
	for i := range 7 {
		_, err := svc.ShouldRateLimit(ctx, request(desc("login", "alice")))
		require.NoError(t, err)
		_, lim, be, _ := rec.take()
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
		_, lim, _, _ := rec.take()
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
		_, lim, _, _ := rec.take()
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
		_, lim, be, _ := rec.take()
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
		_, lim, _, _ = rec.take()
		assert.Empty(t, lim)

		// Where the rule allows no give-back, the hits are taken, and
		// counted.
		neg = request(desc("two", "x"))
		neg.Descriptors[0].IsNegativeHits = true
		_, err = svc.ShouldRateLimit(ctx, neg)
		require.NoError(t, err)
		_, lim, _, _ = rec.take()
		assert.Len(t, lim, 2)
	})

	t.Run("unlimited and unmatched descriptors decide nothing", func(t *testing.T) {
		_, err := svc.ShouldRateLimit(ctx, request(desc("free", "f"), desc("nothing", "n")))
		require.NoError(t, err)
		req, lim, be, _ := rec.take()
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
			_, lim, _, _ := rec.take()
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
		_, lim, _, _ := rec.take()
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
			svc, _, _ := newObserved(t, nil, func(o *Options) { o.NearLimitRatio = tc.ratio })
			assert.Equal(t, tc.want, svc.nearLimit(tc.capacity, tc.remaining))
		})
	}
}

func TestObserveRequests(t *testing.T) {
	svc, rec, clock := newObserved(t, nil, nil)
	svc.limiter = slowLimiter{clock: clock, took: 3 * time.Millisecond, inner: svc.limiter}
	ctx := context.Background()

	_, err := svc.ShouldRateLimit(ctx, request(desc("login", "a")))
	require.NoError(t, err)
	_, err = svc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "test"})
	require.Error(t, err)
	req, _, be, _ := rec.take()
	assert.Equal(t, []RequestOutcome{
		{Duration: 3 * time.Millisecond, Code: ok, GRPCCode: codes.OK},
		{Duration: 0, Code: rlsv3.RateLimitResponse_UNKNOWN, GRPCCode: codes.InvalidArgument},
	}, req)
	assert.Equal(t, []BackendCall{{Duration: 3 * time.Millisecond, Error: BackendOK}}, be)
}

// slowLimiter advances clock by took on every call, then asks inner.
type slowLimiter struct {
	clock *algotest.Clock
	took  time.Duration
	inner algorithms.Limiter
}

func (l slowLimiter) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	if l.clock != nil {
		l.clock.Advance(l.took)
	}
	if l.inner == nil {
		return make([]algorithms.Result, len(ops)), nil
	}
	return l.inner.Do(ctx, ops)
}

// switchLimiter fails with err while it is set, counting its calls.
type switchLimiter struct {
	calls atomic.Int64
	err   atomic.Pointer[error]
	inner algorithms.Limiter
}

func (l *switchLimiter) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	l.calls.Add(1)
	if err := l.err.Load(); err != nil {
		return nil, *err
	}
	return l.inner.Do(ctx, ops)
}

func (l *switchLimiter) fail(err error) {
	if err == nil {
		l.err.Store(nil)
		return
	}
	l.err.Store(&err)
}

func TestBreakerInTheService(t *testing.T) {
	for _, mode := range []FailureMode{FailError, FailAllow, FailDeny} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := memory.New()
			t.Cleanup(mem.Close)
			lim := &switchLimiter{inner: mem}
			svc, rec, clock := newObserved(t, lim, func(o *Options) {
				o.FailureMode = mode
				o.BreakerFailures = 3
				o.BreakerProbes = 2
				o.BreakerCooldown = time.Second
			})
			ctx := context.Background()
			// call asks once and reports whether the answer was the failure
			// mode's.
			call := func() bool {
				resp, err := svc.ShouldRateLimit(ctx, request(desc("login", "b")))
				switch mode {
				case FailError:
					if err != nil {
						require.Equal(t, codes.Unavailable, status.Code(err))
						return true
					}
				case FailAllow, FailDeny:
					require.NoError(t, err)
				}
				// A decided limit carries a reset; a failure answer does not.
				return resp.GetStatuses()[0].GetDurationUntilReset() == nil
			}

			require.False(t, call())
			lim.fail(fmt.Errorf("redis: %w", syscall.ECONNREFUSED))
			for i := range 3 {
				assert.True(t, call(), "failure %d", i+1)
			}
			assert.EqualValues(t, 4, lim.calls.Load())
			_, _, be, br := rec.take()
			assert.Equal(t, []BreakerState{BreakerOpen}, br)
			assert.Equal(t, BackendUnavailable, be[len(be)-1].Error)

			// Open: answered at once without calling the backend.
			for range 10 {
				assert.True(t, call())
			}
			assert.EqualValues(t, 4, lim.calls.Load())
			_, _, be, _ = rec.take()
			assert.Equal(t, slicesOf(10, BackendCall{Error: BackendCircuitOpen}), be)

			// After the cool-down probes go through; the first failure
			// leaves it half-open, the second opens it again.
			clock.Advance(time.Second)
			assert.True(t, call())
			assert.EqualValues(t, 5, lim.calls.Load())
			assert.True(t, call())
			assert.EqualValues(t, 6, lim.calls.Load())
			assert.True(t, call())
			assert.EqualValues(t, 6, lim.calls.Load())
			_, _, _, br = rec.take()
			assert.Equal(t, []BreakerState{BreakerHalfOpen, BreakerOpen}, br)

			// The backend is back: the next probe succeeds and closes it.
			lim.fail(nil)
			clock.Advance(999 * time.Millisecond)
			assert.True(t, call(), "still open 1ms before the cool-down ends")
			clock.Advance(time.Millisecond)
			assert.False(t, call())
			assert.False(t, call())
			assert.EqualValues(t, 8, lim.calls.Load())
			_, _, _, br = rec.take()
			assert.Equal(t, []BreakerState{BreakerHalfOpen, BreakerClosed}, br)
		})
	}
}

func TestBreakerIgnoresCallersThatGoAway(t *testing.T) {
	hang := failingLimiter{hang: true}
	svc, rec, _ := newObserved(t, hang, func(o *Options) { o.BreakerFailures = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		_, err := svc.ShouldRateLimit(ctx, request(desc("login", "c")))
		require.Error(t, err)
	}
	_, _, be, br := rec.take()
	assert.Empty(t, br, "a canceled call is no failure")
	assert.Equal(t, slicesOf(3, BackendCall{Error: BackendCanceled}), be)
}

func TestBreakerDisabled(t *testing.T) {
	lim := &switchLimiter{inner: memory.New()}
	lim.fail(errors.New("boom"))
	svc, _, _ := newObserved(t, lim, func(o *Options) { o.BreakerFailures = 0 })
	for range 20 {
		_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "d")))
		require.Error(t, err)
	}
	assert.EqualValues(t, 20, lim.calls.Load())
}

func TestClassifyBackendError(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want BackendError
	}{
		{"nil", bg, nil, BackendOK},
		{"deadline", bg, fmt.Errorf("redisx: %w", context.DeadlineExceeded), BackendTimeout},
		{"i/o timeout", bg, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, BackendTimeout},
		{"refused", bg, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, BackendUnavailable},
		{"reset", bg, fmt.Errorf("x: %w", syscall.ECONNRESET), BackendUnavailable},
		{"eof", bg, io.EOF, BackendUnavailable},
		{"closed", bg, net.ErrClosed, BackendUnavailable},
		{"cluster down", bg, fmt.Errorf("redisx: run x: %w: CLUSTERDOWN", algorithms.ErrUnavailable), BackendUnavailable},
		{"circuit", bg, ErrCircuitOpen, BackendCircuitOpen},
		{"canceled by the caller", canceled, context.Canceled, BackendCanceled},
		{"canceled, caller still there", bg, context.Canceled, BackendOther},
		{"reply", bg, errors.New("CLUSTERDOWN The cluster is down"), BackendOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, classifyBackendError(tc.ctx, tc.err))
		})
	}
	var names []string
	for _, e := range BackendErrors {
		names = append(names, e.String())
	}
	assert.Equal(t, []string{"timeout", "unavailable", "circuit_open", "other"}, names)
}

func slicesOf[T any](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// hangingLimiter hangs until the context ends on ops for the descriptor
// value "slow", and passes every other op to inner.
type hangingLimiter struct {
	inner algorithms.Limiter
	hung  atomic.Int64
}

func (l *hangingLimiter) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	if ops[0].Key.Entries[0].Value == "slow" {
		l.hung.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return l.inner.Do(ctx, ops)
}

// TestBreakerStaysClosedOnALoadedHost has many more calls time out at once
// than the breaker's threshold while another call is answered during their
// wait: the backend answered, so the timeouts are the host's, and the
// breaker stays closed. Then as many calls time out with nothing answered
// while they wait, as a hung backend would have them: it opens.
func TestBreakerStaysClosedOnALoadedHost(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &hangingLimiter{inner: mem}
	opts := DefaultOptions()
	opts.BackendTimeout = 200 * time.Millisecond
	opts.BackendGrace = 200 * time.Millisecond
	opts.BreakerFailures = 5
	svc := newService(t, lim, nil, opts)
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(observedLimits)}}, config.Options{})
	require.NoError(t, err)
	svc.SetConfig(cfg)

	slow := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "slow")))
				assert.Equal(t, codes.Unavailable, status.Code(err))
			})
		}
		require.Eventually(t, func() bool { return lim.hung.Load() >= int64(n) }, 5*time.Second, time.Millisecond)
		lim.hung.Store(0)
		// Answered while they wait.
		_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "fast")))
		require.NoError(t, err)
		wg.Wait()
	}
	slow(3 * opts.BreakerFailures)
	assert.Equal(t, BreakerClosed, svc.breaker.current(), "timeouts while the backend answered")

	var wg sync.WaitGroup
	for range opts.BreakerFailures {
		wg.Go(func() {
			_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "slow")))
			assert.Equal(t, codes.Unavailable, status.Code(err))
		})
	}
	wg.Wait()
	// Judged the backend's grace after they happened, when the next call
	// comes: refused.
	time.Sleep(opts.BackendGrace)
	_, err = svc.ShouldRateLimit(context.Background(), request(desc("login", "fast")))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, BreakerOpen, svc.breaker.current(), "timeouts with no answer at all")
}
