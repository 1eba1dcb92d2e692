package rls

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// serveGRPC serves svc on a loopback port and returns a client of it.
func serveGRPC(t *testing.T, svc *Service) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// TestCallerDeadlineBoundsTheBackend has a backend that stalls, a caller that
// gives 50ms and a backend timeout of a second: the failure mode's answer
// (allow) must reach the caller before its deadline, rather than the caller
// giving up with DEADLINE_EXCEEDED while the service still waits.
func TestCallerDeadlineBoundsTheBackend(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	opts := DefaultOptions()
	opts.FailureMode = FailAllow
	opts.BackendTimeout = time.Second
	// A reserve that a loaded test machine cannot eat.
	opts.DeadlineReserve = 25 * time.Millisecond
	client := serveGRPC(t, newService(t, failingLimiter{hang: true}, cfg, opts))

	// A first call, so that the connection is up before the deadlines run.
	_, err = client.ShouldRateLimit(context.Background(), request(desc("nothing", "x")))
	require.NoError(t, err)

	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		resp, err := client.ShouldRateLimit(ctx, request(desc("fixed", "a")))
		cancel()
		require.NoError(t, err, "the failure mode's answer, before the caller's deadline")
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Nil(t, resp.GetStatuses()[0].GetDurationUntilReset(), "not decided: the failure mode's answer")
	}
}

// deadlineRecorder passes ops to inner and records the deadline of every
// call's context.
type deadlineRecorder struct {
	inner rate.Limiter

	mu        sync.Mutex
	deadlines []time.Time
	refunds   []bool
}

func (r *deadlineRecorder) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	d, _ := ctx.Deadline()
	r.mu.Lock()
	r.deadlines = append(r.deadlines, d)
	r.refunds = append(r.refunds, ops[0].Kind == rate.Refund)
	r.mu.Unlock()
	// Each call takes a while, as a round trip to Redis does.
	time.Sleep(5 * time.Millisecond)
	return r.inner.Do(ctx, ops)
}

// TestRefundSharesTheTakesDeadline denies a request of two descriptors, one
// of them admitted: the refund of the admitted one runs under the deadline
// the request got when it arrived, not under a fresh timeout of its own.
func TestRefundSharesTheTakesDeadline(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	mem := memory.New()
	t.Cleanup(mem.Close)
	rec := &deadlineRecorder{inner: mem}
	opts := DefaultOptions()
	opts.BackendTimeout = time.Second
	svc := newService(t, rec, cfg, opts)

	before := time.Now()
	resp, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "a"), desc("zero", "z")))
	require.NoError(t, err)
	assert.Equal(t, over, resp.GetOverallCode())

	require.Equal(t, []bool{false, true}, rec.refunds, "a take, then the refund of the admitted one")
	take, refund := rec.deadlines[0], rec.deadlines[1]
	require.False(t, take.IsZero())
	assert.Equal(t, take, refund, "one deadline for the take and the refund")
	assert.False(t, take.Before(before.Add(time.Second)), "the deadline is the backend timeout after arrival")
	assert.False(t, take.After(before.Add(time.Second+5*time.Millisecond)), "…set at arrival")
}

// TestCallerDeadlineLessReserve checks the deadline a request gets: the
// caller's deadline less the reserve, sooner or later than the backend
// timeout; the backend timeout after arrival for a caller without one; and
// none without a backend timeout.
func TestCallerDeadlineLessReserve(t *testing.T) {
	opts := DefaultOptions()
	opts.BackendTimeout = 10 * time.Millisecond
	opts.DeadlineReserve = 3 * time.Millisecond
	svc := newService(t, failingLimiter{}, nil, opts)
	arrival := time.Now()

	ctx, cancel, reserve := svc.withDeadline(context.Background(), arrival, arrival)
	d, ok := ctx.Deadline()
	cancel()
	require.True(t, ok)
	assert.Equal(t, arrival.Add(10*time.Millisecond), d, "no caller deadline: the backend timeout")
	assert.Equal(t, 3*time.Millisecond, reserve)

	caller, cancelCaller := context.WithDeadline(context.Background(), arrival.Add(8*time.Millisecond))
	defer cancelCaller()
	ctx, cancel, _ = svc.withDeadline(caller, arrival, arrival)
	d, _ = ctx.Deadline()
	cancel()
	assert.Equal(t, arrival.Add(5*time.Millisecond), d, "a caller deadline of 8ms, less the 3ms reserve")

	far, cancelFar := context.WithDeadline(context.Background(), arrival.Add(time.Second))
	defer cancelFar()
	ctx, cancel, _ = svc.withDeadline(far, arrival, arrival)
	d, _ = ctx.Deadline()
	cancel()
	assert.Equal(t, arrival.Add(time.Second-3*time.Millisecond), d, "a caller deadline later than the backend timeout, less the reserve")

	opts.BackendTimeout = 0
	svc = newService(t, failingLimiter{}, nil, opts)
	ctx, cancel, reserve = svc.withDeadline(context.Background(), arrival, arrival)
	cancel()
	_, ok = ctx.Deadline()
	assert.False(t, ok, "no backend timeout: no deadline of the service's own")
	assert.Zero(t, reserve)
}

// TestWaitBeforeTheHandlerCounts has a request that arrived 4ms before its
// handler ran, as on a busy host: the backend timeout runs from its
// arrival, and the reserve kept of the caller's deadline for the way back
// grows to the 4ms the way in took.
func TestWaitBeforeTheHandlerCounts(t *testing.T) {
	opts := DefaultOptions()
	opts.BackendTimeout = 10 * time.Millisecond
	opts.DeadlineReserve = time.Millisecond
	svc := newService(t, failingLimiter{}, nil, opts)
	handled := time.Now()
	arrived := handled.Add(-4 * time.Millisecond)

	ctx, cancel, reserve := svc.withDeadline(context.Background(), arrived, handled)
	d, _ := ctx.Deadline()
	cancel()
	assert.Equal(t, arrived.Add(10*time.Millisecond), d, "the backend timeout from arrival, not from the handler")
	assert.Equal(t, 4*time.Millisecond, reserve, "the way in, longer than RLS_DEADLINE_RESERVE")

	caller, cancelCaller := context.WithDeadline(context.Background(), handled.Add(8*time.Millisecond))
	defer cancelCaller()
	ctx, cancel, _ = svc.withDeadline(caller, arrived, handled)
	d, _ = ctx.Deadline()
	cancel()
	assert.Equal(t, handled.Add(4*time.Millisecond), d, "the caller's deadline less the 4ms of the way in")
}

// TestArrivalFromTheContext: ShouldRateLimit takes the arrival that
// WithArrival marked, and the time it was called when there is none or it
// is later.
func TestArrivalFromTheContext(t *testing.T) {
	handled := time.Now()
	early := handled.Add(-3 * time.Millisecond)
	assert.Equal(t, early, arrival(WithArrival(context.Background(), early), handled))
	assert.Equal(t, handled, arrival(context.Background(), handled))
	assert.Equal(t, handled, arrival(WithArrival(context.Background(), handled.Add(time.Second)), handled))
}

// newDelayService returns a service with opts over a memory backend that
// answers each call after delay, and that backend.
func newDelayService(t *testing.T, delay time.Duration, opts Options) (*Service, *rlstest.DelayLimiter) {
	t.Helper()
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &rlstest.DelayLimiter{Inner: mem, Delay: delay}
	return newService(t, lim, rlstest.Limits(t, testLimits), opts), lim
}

// TestLongDeadlineIsTheBudget has callers that allow 2s ask a backend that
// answers in 50ms, with a backend timeout of 10ms: the caller's deadline,
// not the backend timeout, is the budget, so each gets a decision, and the
// circuit breaker, which 20 failures would open, stays closed.
func TestLongDeadlineIsTheBudget(t *testing.T) {
	opts := DefaultOptions()
	opts.BackendTimeout = 10 * time.Millisecond
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	require.NoError(t, err)
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &rlstest.DelayLimiter{Inner: mem, Delay: 50 * time.Millisecond}
	bOpts := breaker.Options{Failures: 20, Probes: 3, Cooldown: time.Second}
	b, err := breaker.New(lim, bOpts)
	require.NoError(t, err)
	svc := newService(t, b, cfg, opts)

	var wg sync.WaitGroup
	for i := range 2 * bOpts.Failures {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := svc.ShouldRateLimit(ctx, request(desc("counter", fmt.Sprint(i))))
			if assert.NoError(t, err, "a decision, not the failure mode") {
				assert.True(t, rlstest.Decided(resp), "decided by the backend")
				assert.Equal(t, ok, resp.GetOverallCode())
			}
		})
	}
	wg.Wait()
	assert.Equal(t, breaker.Closed, b.State(), "slow answers are no failures")
	d := lim.LastDeadline(t)
	assert.Greater(t, time.Until(d), time.Second, "the backend got the caller's time, less the reserve")
}

// TestNoDeadlineGetsTheBackendTimeout has a caller that sends no deadline:
// its budget is BackendTimeout from its arrival, by default long enough for
// a backend that answers in 50ms to decide, and with a short one the
// failure mode's answer comes when it ends.
func TestNoDeadlineGetsTheBackendTimeout(t *testing.T) {
	opts := DefaultOptions()
	budget := opts.BackendTimeout
	require.Equal(t, time.Second, budget)
	svc, lim := newDelayService(t, 50*time.Millisecond, opts)
	before := time.Now()
	resp, err := svc.ShouldRateLimit(context.Background(), request(desc("counter", "a")))
	after := time.Now()
	require.NoError(t, err, "a decision with the default budget")
	assert.True(t, rlstest.Decided(resp))
	d := lim.LastDeadline(t)
	assert.False(t, d.Before(before.Add(budget)), "BackendTimeout after arrival")
	assert.False(t, d.After(after.Add(budget)), "…set at arrival")

	opts.BackendTimeout = 20 * time.Millisecond
	svc, lim = newDelayService(t, 50*time.Millisecond, opts)
	before = time.Now()
	_, err = svc.ShouldRateLimit(context.Background(), request(desc("counter", "a")))
	assert.Equal(t, codes.Unavailable, status.Code(err), "the failure mode's answer once the budget ends")
	d = lim.LastDeadline(t)
	assert.False(t, d.Before(before.Add(20*time.Millisecond)))
	assert.Less(t, d.Sub(before), 40*time.Millisecond)
}

// TestBackendTimeoutMaxCapsEveryBudget sets BackendTimeoutMax to 30ms: a
// caller that allows 2s and one that sends no deadline both get 30ms from
// their arrival, and the failure mode's answer from a backend that takes
// 50ms.
func TestBackendTimeoutMaxCapsEveryBudget(t *testing.T) {
	opts := DefaultOptions()
	opts.BackendTimeoutMax = 30 * time.Millisecond
	svc, lim := newDelayService(t, 50*time.Millisecond, opts)
	for name, timeout := range map[string]time.Duration{"2s deadline": 2 * time.Second, "no deadline": 0} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			before := time.Now()
			_, err := svc.ShouldRateLimit(ctx, request(desc("counter", name)))
			elapsed := time.Since(before)
			assert.Equal(t, codes.Unavailable, status.Code(err), "the failure mode's answer at the cap")
			d := lim.LastDeadline(t)
			assert.False(t, d.Before(before.Add(30*time.Millisecond)), "the cap after arrival")
			assert.Less(t, d.Sub(before), 50*time.Millisecond, "…not the caller's time")
			assert.Less(t, elapsed, time.Second)
		})
	}

	invalid := DefaultOptions()
	invalid.BackendTimeoutMax = -time.Second
	_, err := New(nil, nil, invalid)
	assert.ErrorContains(t, err, "BackendTimeoutMax")
}
