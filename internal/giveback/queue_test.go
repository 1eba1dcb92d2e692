package giveback

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// recorder is an Observer that counts what it is told.
type recorder struct {
	mu        sync.Mutex
	giveBacks map[Result]int
	deferred  map[Result]int
}

func (r *recorder) ObserveGiveBack(result Result, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.giveBacks == nil {
		r.giveBacks = map[Result]int{}
	}
	r.giveBacks[result] += n
}

func (r *recorder) ObserveDeferredCharge(result Result, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deferred == nil {
		r.deferred = map[Result]int{}
	}
	r.deferred[result] += n
}

// gaveBack returns the give-backs counted so far, by result.
func (r *recorder) gaveBack() map[Result]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Result]int{}
	for k, v := range r.giveBacks {
		out[k] = v
	}
	return out
}

// deferredCharges returns the deferred charges counted so far, by result.
func (r *recorder) deferredCharges() map[Result]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Result]int{}
	for k, v := range r.deferred {
		out[k] = v
	}
	return out
}

// The limits the services of these tests decide under.
const testLimits = `
domain: test
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window, name: fixed_limit}
  - key: tokens
    charge: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: fixed_window}
`

func desc(k, v string) *ratelimitv3.RateLimitDescriptor { return rlstest.Descriptor(k, v) }

func request(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return rlstest.Request("test", descs...)
}

// hits sets a descriptor's own hits_addend.
func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// newService returns a service with opts over lim, deciding under
// testLimits, that reports what it owes the backend to outcomes, which a
// queue follows, as the server builds it.
func newService(t *testing.T, lim rate.Limiter, outcomes *rate.Outcomes, opts rls.Options) *rls.Service {
	t.Helper()
	opts.Outcomes = outcomes
	svc, err := rls.New(lim, rlstest.Limits(t, testLimits), opts)
	require.NoError(t, err)
	return svc
}

// givingLimiter passes ops to inner, failing every call while fail is set
// (reporting to outcomes that its ops were not applied, as a backend does),
// and records the refunds it applied.
type givingLimiter struct {
	inner    rate.Limiter
	outcomes *rate.Outcomes
	fail     atomic.Bool
	calls    atomic.Int64

	mu      sync.Mutex
	refunds []rate.Op
}

func (l *givingLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	l.calls.Add(1)
	if l.fail.Load() {
		out := make([]rate.Outcome, len(ops))
		for i, op := range ops {
			out[i] = rate.Outcome{Op: op, Fate: rate.NotApplied, At: time.Now()}
		}
		l.outcomes.Report(out)
		return nil, errors.New("connection refused")
	}
	res, err := l.inner.Do(ctx, ops)
	if err == nil {
		l.mu.Lock()
		for _, op := range ops {
			if op.Loosens() {
				l.refunds = append(l.refunds, op)
			}
		}
		l.mu.Unlock()
	}
	return res, err
}

func (l *givingLimiter) refunded() []rate.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rate.Op(nil), l.refunds...)
}

// giveBackFixture is a give-back queue on a memory backend, and a take the
// backend admitted.
type giveBackFixture struct {
	q    *Queue
	lim  *givingLimiter
	rec  *recorder
	mem  *memory.Limiter
	take rate.Op
	res  algorithms.Result
}

// TestNewRefusesInvalidOptions: New refuses a Size or a Timeout that is not
// positive, naming it; nothing stands for a default, which DefaultOptions
// gives.
func TestNewRefusesInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		field  string
		mutate func(*Options)
	}{
		{"Size", func(o *Options) { o.Size = 0 }},
		{"Size", func(o *Options) { o.Size = -1 }},
		{"Timeout", func(o *Options) { o.Timeout = 0 }},
		{"Timeout", func(o *Options) { o.Timeout = -time.Second }},
	} {
		opts := DefaultOptions()
		tc.mutate(&opts)
		_, err := New(memory.New(), opts)
		assert.ErrorContains(t, err, "giveback: "+tc.field)
		require.NotNil(t, option.Of(err))
		assert.Equal(t, tc.field, option.Of(err).Field)
	}
	_, err := New(memory.New(), DefaultOptions())
	assert.NoError(t, err)
}

func newGiveBackFixture(t *testing.T, alg algorithms.Algorithm, mutate func(*Options)) *giveBackFixture {
	t.Helper()
	mem := memory.New()
	t.Cleanup(mem.Close)
	outcomes := new(rate.Outcomes)
	f := &giveBackFixture{lim: &givingLimiter{inner: mem, outcomes: outcomes}, rec: &recorder{}, mem: mem}
	opts := DefaultOptions()
	opts.Observer = f.rec
	if mutate != nil {
		mutate(&opts)
	}
	var err error
	f.q, err = New(f.lim, opts)
	require.NoError(t, err)
	outcomes.Follow(f.q.Settle)
	f.take = rate.Op{
		Key:   rate.Key{Domain: "d", Entries: []rate.Entry{{Key: "k", Value: alg.String()}}},
		Limit: algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Hour},
		Hits:  3,
	}
	res, err := mem.Do(context.Background(), []rate.Op{f.take})
	require.NoError(t, err)
	require.True(t, res[0].Allowed)
	f.res = res[0]
	return f
}

// held returns the hits the take's limit holds.
func (f *giveBackFixture) held(t *testing.T) uint64 {
	t.Helper()
	peek := f.take
	peek.Hits = 0
	res, err := f.mem.Do(context.Background(), []rate.Op{peek})
	require.NoError(t, err)
	return peek.Limit.Requests - res[0].Remaining
}

func (f *giveBackFixture) refund() rate.Op {
	op := f.take
	op.Kind, op.Receipt = rate.Refund, f.res.Receipt
	return op
}

// TestSettleGivesBackTakesAnsweredWithTheFailureMode reports a take that
// Redis admitted after its caller was answered with the failure mode: with
// error or deny, its hits are given back with its receipt; with allow, the
// answer admitted the request, and they stay.
func TestSettleGivesBackTakesAnsweredWithTheFailureMode(t *testing.T) {
	for _, mode := range []rls.FailureMode{rls.FailError, rls.FailDeny, rls.FailAllow} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newGiveBackFixture(t, algorithms.FixedWindow, func(o *Options) { o.KeepFailedTakes = mode == rls.FailAllow })
			require.EqualValues(t, 3, f.held(t))
			f.q.Settle([]rate.Outcome{{Op: f.take, Fate: rate.Applied, Result: f.res, At: time.Now()}})
			if mode == rls.FailAllow {
				time.Sleep(50 * time.Millisecond)
				assert.EqualValues(t, 3, f.held(t), "admitted by the failure mode: the hits stay")
				assert.Empty(t, f.lim.refunded())
				return
			}
			require.Eventually(t, func() bool { return f.held(t) == 0 }, 5*time.Second, time.Millisecond)
			require.Len(t, f.lim.refunded(), 1)
			assert.Equal(t, f.res.Receipt, f.lim.refunded()[0].Receipt, "given back by its receipt")
			require.Eventually(t, func() bool { return f.rec.gaveBack()[GivenBack] == 1 }, time.Second, time.Millisecond)
		})
	}
}

func TestSettleLeavesWhatNeedsNoGivingBack(t *testing.T) {
	f := newGiveBackFixture(t, algorithms.FixedWindow, nil)
	denied := f.take
	f.q.Settle([]rate.Outcome{
		{Op: denied, Fate: rate.Applied, Result: algorithms.Result{Allowed: false}},
		{Op: f.take, Fate: rate.NotApplied},
	})
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, f.lim.calls.Load(), "a denial took nothing, a take that never ran neither")
	f.q.Settle([]rate.Outcome{{Op: f.take, Fate: rate.Unknown}})
	assert.Equal(t, 1, f.rec.gaveBack()[Uncertain], "a take that may have run is counted, not refunded blindly")
	assert.Zero(t, f.lim.calls.Load())
	assert.EqualValues(t, 3, f.held(t))
}

// TestSettleRetriesRefundsOnlyWhenSafe reports refunds of the service's own
// whose calls failed: one that did not run is sent again; one that may have
// run is sent again only for a sliding window log, whose refund by receipt
// gives back nothing the second time.
func TestSettleRetriesRefundsOnlyWhenSafe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alg   algorithms.Algorithm
		fate  rate.Fate
		retry bool
	}{
		{"not applied", algorithms.FixedWindow, rate.NotApplied, true},
		{"unknown, counter", algorithms.FixedWindow, rate.Unknown, false},
		{"unknown, token bucket", algorithms.TokenBucket, rate.Unknown, false},
		{"unknown, sliding window log", algorithms.SlidingWindowLog, rate.Unknown, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newGiveBackFixture(t, tc.alg, nil)
			f.q.Settle([]rate.Outcome{{Op: f.refund(), Fate: tc.fate}})
			if !tc.retry {
				time.Sleep(50 * time.Millisecond)
				assert.Zero(t, f.lim.calls.Load())
				assert.EqualValues(t, 3, f.held(t))
				assert.Equal(t, 1, f.rec.gaveBack()[Uncertain])
				return
			}
			require.Eventually(t, func() bool { return f.held(t) == 0 }, 5*time.Second, time.Millisecond)
			if tc.alg == algorithms.SlidingWindowLog {
				// Running it twice gives back nothing more.
				again, err := f.mem.Do(context.Background(), []rate.Op{f.refund(), f.take})
				require.NoError(t, err)
				assert.True(t, again[1].Allowed)
				assert.EqualValues(t, 3, f.held(t))
			}
		})
	}
}

// TestGiveBacksAreBounded fails every call of the backend: refunds wait at
// most Timeout, the queue holds at most Size, and what is dropped is
// counted.
func TestGiveBacksAreBounded(t *testing.T) {
	f := newGiveBackFixture(t, algorithms.FixedWindow, func(o *Options) {
		o.Size = 2
		o.Timeout = 200 * time.Millisecond
	})
	f.lim.fail.Store(true)
	var outcomes []rate.Outcome
	for i := range 5 {
		op := f.take
		op.Key.Entries = []rate.Entry{{Key: "k", Value: string(rune('a' + i))}}
		outcomes = append(outcomes, rate.Outcome{Op: op, Fate: rate.Applied, Result: f.res})
	}
	f.q.Settle(outcomes)
	assert.Equal(t, 3, f.rec.gaveBack()[Dropped], "three dropped at once for want of room")
	require.Eventually(t, func() bool { return f.rec.gaveBack()[Dropped] == 5 }, 5*time.Second, 5*time.Millisecond,
		"the two others when their time limit passed")
	calls := f.lim.calls.Load()
	assert.Greater(t, calls, int64(1), "tried again while the time limit lasted")
	time.Sleep(3 * giveBackPause)
	assert.Equal(t, calls, f.lim.calls.Load(), "and no more after")
	assert.Zero(t, f.rec.gaveBack()[GivenBack])
}

// lateFixture is a service on a memory backend that answers late, and the
// give-back queue the service leaves what it owes to.
type lateFixture struct {
	svc *rls.Service
	mem *memory.Limiter
}

// newLateFixture returns a late fixture whose service decides under
// testLimits through a lateLimiter that answers after after, with a backend
// timeout of a second and mutate's options.
func newLateFixture(t *testing.T, after time.Duration, mutate func(*rls.Options)) *lateFixture {
	t.Helper()
	mem := memory.New()
	t.Cleanup(mem.Close)
	opts := rls.DefaultOptions()
	opts.BackendTimeout = time.Second
	mutate(&opts)
	qOpts := DefaultOptions()
	qOpts.KeepFailedTakes = opts.FailureMode == rls.FailAllow
	late := lateLimiter{inner: mem, after: after}
	q, err := New(late, qOpts)
	require.NoError(t, err)
	outcomes := new(rate.Outcomes)
	outcomes.Follow(q.Settle)
	return &lateFixture{svc: newService(t, late, outcomes, opts), mem: mem}
}

// heldLate returns the hits that the limit of descriptor fixed=late holds.
func (f *lateFixture) heldLate(t *testing.T) uint64 {
	t.Helper()
	res, err := f.mem.Do(context.Background(), []rate.Op{{
		Key:   rate.Key{Domain: "test", Entries: []rate.Entry{{Key: "fixed", Value: "late"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Window: time.Minute},
	}})
	require.NoError(t, err)
	return 3 - res[0].Remaining
}

// lateLimiter answers every call late, after its context has ended.
type lateLimiter struct {
	inner rate.Limiter
	after time.Duration
}

func (l lateLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	time.Sleep(l.after)
	return l.inner.Do(context.Background(), ops)
}

// TestDecisionsTheCallerNeverSeesKeepNoHits has the backend decide after
// the caller's deadline has passed: the caller gets no answer it can use,
// so with the failure mode error the admitted hits are given back; with
// allow, the caller's own failure mode admitted it, and they stay.
func TestDecisionsTheCallerNeverSeesKeepNoHits(t *testing.T) {
	for _, mode := range []rls.FailureMode{rls.FailError, rls.FailAllow} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newLateFixture(t, 50*time.Millisecond, func(o *rls.Options) { o.FailureMode = mode })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, _ = f.svc.ShouldRateLimit(ctx, request(desc("fixed", "late")))

			if mode == rls.FailAllow {
				assert.EqualValues(t, 1, f.heldLate(t))
				return
			}
			require.Eventually(t, func() bool { return f.heldLate(t) == 0 }, 5*time.Second, time.Millisecond)
		})
	}
}

// TestDecisionsTooLateToArriveKeepNoHits has the backend decide while the
// caller still waits, but with less of its deadline left than the reserve
// kept for the answer's way back: the answer would arrive late, so it is
// the failure mode's, and the admitted hits are given back.
func TestDecisionsTooLateToArriveKeepNoHits(t *testing.T) {
	f := newLateFixture(t, 150*time.Millisecond, func(o *rls.Options) { o.DeadlineReserve = 400 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := f.svc.ShouldRateLimit(ctx, request(desc("fixed", "late")))
	require.Equal(t, codes.Unavailable, status.Code(err), "decided with about 350ms left of the caller's 500, against a reserve of 400")
	require.ErrorContains(t, err, rls.ErrLate.Error())
	require.NoError(t, ctx.Err(), "the caller was still waiting")
	require.Eventually(t, func() bool { return f.heldLate(t) == 0 }, 5*time.Second, time.Millisecond)
}

// TestChargesThatMissTheBackendAreRecordedLater: a charge is usage already
// spent, and Envoy does not send it again. One whose backend call failed
// before running it, and one that the open circuit breaker kept from the
// backend, are both recorded once the backend answers again; one that may
// have run is not sent again.
func TestChargesThatMissTheBackendAreRecordedLater(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	outcomes := new(rate.Outcomes)
	lim := &givingLimiter{inner: mem, outcomes: outcomes}
	rec := &recorder{}
	qOpts := DefaultOptions()
	qOpts.Observer, qOpts.Timeout = rec, time.Minute
	q, err := New(lim, qOpts)
	require.NoError(t, err)
	outcomes.Follow(q.Settle)
	b, err := breaker.New(lim, breaker.Options{Failures: 1, Probes: 3, Cooldown: time.Minute})
	require.NoError(t, err)
	opts := rls.DefaultOptions()
	opts.BackendTimeout = time.Second
	svc := newService(t, b, outcomes, opts)

	lim.fail.Store(true)
	_, err = svc.ShouldRateLimit(context.Background(), request(hits(desc("tokens", "alice"), 30)))
	require.Error(t, err, "the backend failed")
	_, err = svc.ShouldRateLimit(context.Background(), request(hits(desc("tokens", "alice"), 20)))
	require.ErrorContains(t, err, rate.ErrCircuitOpen.Error(), "the breaker opened on the failure")
	lim.fail.Store(false)

	require.Eventually(t, func() bool { return rec.deferredCharges()[GivenBack] == 2 }, 5*time.Second, time.Millisecond,
		"both charges recorded once the backend answers")
	lim.fail.Store(true) // The check below must not reach the backend through the service.
	peek := rate.Op{
		Key:   rate.Key{Domain: "test", Entries: []rate.Entry{{Key: "tokens", Value: "alice"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Window: time.Minute},
		Kind:  rate.Charge,
	}
	res, err := mem.Do(context.Background(), []rate.Op{peek})
	require.NoError(t, err)
	assert.EqualValues(t, 50, res[0].Remaining, "30 + 20 recorded, once each")

	calls := lim.calls.Load()
	uncertain := peek
	uncertain.Hits = 7
	q.Settle([]rate.Outcome{{Op: uncertain, Fate: rate.Unknown, At: time.Now()}})
	assert.Equal(t, 1, rec.deferredCharges()[Uncertain])
	time.Sleep(3 * giveBackPause)
	assert.Equal(t, calls, lim.calls.Load(), "a charge that may have run is not sent again")
	assert.Zero(t, rec.gaveBack()[GivenBack], "charges are not give-backs")
}
