package breaker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// t0 is a realistic time a little after a minute boundary.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 250_000_000, time.UTC)

// The limits the services of these tests decide under.
const testLimits = `
domain: test
descriptors:
  - key: login
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window_log, name: logins}
`

func desc(k, v string) *ratelimitv3.RateLimitDescriptor { return rlstest.Descriptor(k, v) }

func request(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return rlstest.Request("test", descs...)
}

// recorder is an Observer that keeps everything it is told.
type recorder struct {
	mu      sync.Mutex
	backend []Call
	breaker []State
}

func (r *recorder) ObserveBackend(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backend = append(r.backend, c)
}

func (r *recorder) ObserveBreaker(s State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breaker = append(r.breaker, s)
}

// take returns what was recorded since the last take.
func (r *recorder) take() (be []Call, br []State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	be, br = r.backend, r.breaker
	r.backend, r.breaker = nil, nil
	return
}

// newObserved returns a service with a budget of a second over a breaker,
// built with opts and the recorder, over limiter, the breaker's clock, and
// the service. mutate changes the service's options.
func newObserved(t *testing.T, limiter rate.Limiter, opts Options, mutate func(*rls.Options)) (*rls.Service, *Limiter, *recorder, *algotest.Clock) {
	t.Helper()
	clock := algotest.NewClock(t0)
	rec := &recorder{}
	opts.Observer, opts.Now = rec, clock.Now
	b, err := New(limiter, opts)
	require.NoError(t, err)
	svcOpts := rls.DefaultOptions()
	svcOpts.BackendTimeout = time.Second
	if mutate != nil {
		mutate(&svcOpts)
	}
	return newService(t, b, svcOpts), b, rec, clock
}

// newService returns a service with opts over limiter, deciding under
// testLimits.
func newService(t *testing.T, limiter rate.Limiter, opts rls.Options) *rls.Service {
	t.Helper()
	svc, err := rls.New(limiter, rlstest.Limits(t, testLimits), opts)
	require.NoError(t, err)
	return svc
}

// switchLimiter fails with err while it is set, counting its calls.
type switchLimiter struct {
	calls atomic.Int64
	err   atomic.Pointer[error]
	inner rate.Limiter
}

func (l *switchLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
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

// hangLimiter stands for a backend that hangs until its context ends.
type hangLimiter struct{}

func (hangLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func slicesOf[T any](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestBreakerInTheService(t *testing.T) {
	for _, mode := range []rls.FailureMode{rls.FailError, rls.FailAllow, rls.FailDeny} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := memory.New()
			t.Cleanup(mem.Close)
			lim := &switchLimiter{inner: mem}
			svc, _, rec, clock := newObserved(t, lim, Options{Failures: 3, Probes: 2, Cooldown: time.Second},
				func(o *rls.Options) { o.FailureMode = mode })
			ctx := context.Background()
			// call asks once and reports whether the answer was the failure
			// mode's.
			call := func() bool {
				resp, err := svc.ShouldRateLimit(ctx, request(desc("login", "b")))
				switch mode {
				case rls.FailError:
					if err != nil {
						require.Equal(t, codes.Unavailable, status.Code(err))
						return true
					}
				case rls.FailAllow, rls.FailDeny:
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
			be, br := rec.take()
			assert.Equal(t, []State{Open}, br)
			assert.Equal(t, rate.FailureUnavailable, be[len(be)-1].Failure)

			// Open: answered at once without calling the backend.
			for range 10 {
				assert.True(t, call())
			}
			assert.EqualValues(t, 4, lim.calls.Load())
			be, _ = rec.take()
			assert.Equal(t, slicesOf(10, Call{Failure: rate.FailureCircuitOpen}), be)

			// After the cool-down probes go through; the first failure
			// leaves it half-open, the second opens it again.
			clock.Advance(time.Second)
			assert.True(t, call())
			assert.EqualValues(t, 5, lim.calls.Load())
			assert.True(t, call())
			assert.EqualValues(t, 6, lim.calls.Load())
			assert.True(t, call())
			assert.EqualValues(t, 6, lim.calls.Load())
			_, br = rec.take()
			assert.Equal(t, []State{HalfOpen, Open}, br)

			// The backend is back: the next probe succeeds and closes it.
			lim.fail(nil)
			clock.Advance(999 * time.Millisecond)
			assert.True(t, call(), "still open 1ms before the cool-down ends")
			clock.Advance(time.Millisecond)
			assert.False(t, call())
			assert.False(t, call())
			assert.EqualValues(t, 8, lim.calls.Load())
			_, br = rec.take()
			assert.Equal(t, []State{HalfOpen, Closed}, br)
		})
	}
}

func TestBreakerIgnoresCallersThatGoAway(t *testing.T) {
	svc, _, rec, _ := newObserved(t, hangLimiter{}, Options{Failures: 1, Probes: 3, Cooldown: time.Second}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		_, err := svc.ShouldRateLimit(ctx, request(desc("login", "c")))
		require.Error(t, err)
	}
	be, br := rec.take()
	assert.Empty(t, br, "a canceled call is no failure")
	assert.Equal(t, slicesOf(3, Call{Failure: rate.FailureCanceled}), be)
}

func TestBreakerDisabled(t *testing.T) {
	lim := &switchLimiter{inner: memory.New()}
	lim.fail(errors.New("boom"))
	svc, _, _, _ := newObserved(t, lim, Options{Failures: 0}, nil)
	for range 20 {
		_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "d")))
		require.Error(t, err)
	}
	assert.EqualValues(t, 20, lim.calls.Load())
}

// hangingLimiter hangs until the context ends on ops for the descriptor
// value "slow", and passes every other op to inner.
type hangingLimiter struct {
	inner rate.Limiter
	hung  atomic.Int64
}

func (l *hangingLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
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
	opts := Options{Grace: 200 * time.Millisecond, Failures: 5, Probes: 3, Cooldown: time.Second}
	b, err := New(lim, opts)
	require.NoError(t, err)
	svcOpts := rls.DefaultOptions()
	svcOpts.BackendTimeout = 200 * time.Millisecond
	svc := newService(t, b, svcOpts)

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
	slow(3 * opts.Failures)
	assert.Equal(t, Closed, b.State(), "timeouts while the backend answered")

	var wg sync.WaitGroup
	for range opts.Failures {
		wg.Go(func() {
			_, err := svc.ShouldRateLimit(context.Background(), request(desc("login", "slow")))
			assert.Equal(t, codes.Unavailable, status.Code(err))
		})
	}
	wg.Wait()
	// Judged the backend's grace after they happened, when the next call
	// comes: refused.
	time.Sleep(opts.Grace)
	_, err = svc.ShouldRateLimit(context.Background(), request(desc("login", "fast")))
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, Open, b.State(), "timeouts with no answer at all")
}

// TestNewRefusesInvalidOptions: New refuses a negative option, and an
// enabled breaker without probes or a cool-down, naming the option; a
// disabled breaker needs neither.
func TestNewRefusesInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"Cooldown", Options{Cooldown: -time.Second}},
		{"Probes", Options{Probes: -1}},
		{"Probes", Options{Failures: 1, Cooldown: time.Second}},
		{"Cooldown", Options{Failures: 1, Probes: 1}},
	} {
		_, err := New(memory.New(), tc.opts)
		assert.ErrorContains(t, err, tc.name, "%+v", tc.opts)
	}
	_, err := New(memory.New(), Options{})
	assert.NoError(t, err, "disabled")
	_, err = New(memory.New(), DefaultOptions())
	assert.NoError(t, err, "the defaults")
}

// TestLateAnswersCountAsAnswers has a call time out while the backend holds
// it, and the backend report its answer to it later (to the Outcomes the
// breaker follows): the breaker takes it as an answer, so the timeout that
// waited for it is no failure.
func TestLateAnswersCountAsAnswers(t *testing.T) {
	outcomes := &rate.Outcomes{}
	clock := algotest.NewClock(t0)
	b, err := New(lateAnswer{}, Options{Failures: 1, Probes: 3, Cooldown: time.Second, Grace: time.Second, Now: clock.Now})
	require.NoError(t, err)
	outcomes.Follow(b.Answered)
	_, err = b.Do(context.Background(), []rate.Op{{}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	outcomes.Report([]rate.Outcome{{Fate: rate.Applied, At: t0.Add(time.Millisecond)}})
	clock.Advance(2 * time.Second)
	_, err = b.Do(context.Background(), []rate.Op{{}})
	require.ErrorIs(t, err, context.DeadlineExceeded, "let through: the timeout was answered")
	assert.Equal(t, Closed, b.State())
}

// lateAnswer times out every call.
type lateAnswer struct{}

func (lateAnswer) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	return nil, fmt.Errorf("redisx: %w", context.DeadlineExceeded)
}
