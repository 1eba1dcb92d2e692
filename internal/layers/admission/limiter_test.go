package admission

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// The limits the services of these tests decide under.
const testLimits = `
domain: test
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window, name: fixed_limit}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
`

func desc(k, v string) *ratelimitv3.RateLimitDescriptor { return rlstest.Descriptor(k, v) }

func request(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return rlstest.Request("test", descs...)
}

// newService returns a service with opts over limiter, deciding under
// testLimits.
func newService(t *testing.T, limiter rate.Limiter, opts rls.Options) *rls.Service {
	t.Helper()
	svc, err := rls.New(limiter, rlstest.Limits(t, testLimits), opts)
	require.NoError(t, err)
	return svc
}

// recorder is an Observer that keeps the reasons of what was shed.
type recorder struct {
	mu   sync.Mutex
	shed []ShedReason
}

func (r *recorder) ObserveShed(reason ShedReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shed = append(r.shed, reason)
}

func (r *recorder) ObserveInflightLimit(int) {}

// stallingLimiter blocks every call until its context ends or release is
// closed, and counts the calls it got.
type stallingLimiter struct {
	calls   atomic.Int64
	release chan struct{}
	inner   rate.Limiter
}

func (l *stallingLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	l.calls.Add(1)
	select {
	case <-l.release:
		return l.inner.Do(ctx, ops)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestShedRequestsNeverReachTheBackend fills a service whose in-flight
// limit is one with a call the backend holds: a request that arrives with
// less time than the backend's latency is answered with the failure mode at
// once and never reaches the backend.
func TestShedRequestsNeverReachTheBackend(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &stallingLimiter{release: make(chan struct{}), inner: mem}
	rec := &recorder{}
	a, err := New(lim, Options{MaxInflight: 1, Observer: rec})
	require.NoError(t, err)
	opts := rls.DefaultOptions()
	opts.BackendTimeout = time.Minute
	svc := newService(t, a, opts)
	a.gate.observe(50*time.Millisecond, false, time.Now()) // the backend's recent latency

	first := make(chan error, 1)
	go func() {
		_, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "a")))
		first <- err
	}()
	require.Eventually(t, func() bool { return lim.calls.Load() == 1 }, time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = svc.ShouldRateLimit(ctx, request(desc("fixed", "b")))
	assert.Equal(t, codes.Unavailable, status.Code(err), "the failure mode's answer")
	assert.NoError(t, ctx.Err(), "…before the caller's deadline")
	assert.EqualValues(t, 1, lim.calls.Load(), "the shed request never reached the backend")
	rec.mu.Lock()
	assert.Equal(t, []ShedReason{ShedDeadline}, rec.shed)
	rec.mu.Unlock()

	close(lim.release)
	require.NoError(t, <-first)
	res, err := mem.Do(context.Background(), []rate.Op{{
		Key:   rate.Key{Domain: "test", Entries: []rate.Entry{{Key: "fixed", Value: "b"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Window: time.Minute},
	}})
	require.NoError(t, err)
	assert.EqualValues(t, 3, res[0].Remaining, "the shed request consumed nothing")
}

// TestShortDeadlineBesideLongOnes has callers that allow 2s fill the only
// slot of a backend that answers in 50ms: they get decisions, while a
// caller that allows 20ms, shorter than the backend's latency, is shed with
// the failure mode's answer before its deadline and takes nothing; one that
// gets a slot but not an answer in time gets it at its deadline less the
// reserve.
func TestShortDeadlineBesideLongOnes(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &rlstest.DelayLimiter{Inner: mem, Delay: 50 * time.Millisecond}
	b, err := breaker.New(lim, breaker.Options{Failures: 20, Probes: 3, Cooldown: time.Second})
	require.NoError(t, err)
	rec := &recorder{}
	a, err := New(b, Options{MaxInflight: 1, Observer: rec})
	require.NoError(t, err)
	opts := rls.DefaultOptions()
	// A reserve that a loaded test machine cannot eat.
	opts.DeadlineReserve = 8 * time.Millisecond
	svc := newService(t, a, opts)
	long := func(value string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := svc.ShouldRateLimit(ctx, request(desc("fixed", value)))
		if err == nil && !rlstest.Decided(resp) {
			err = errors.New("not decided")
		}
		return err
	}
	short := func(value string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := svc.ShouldRateLimit(ctx, request(desc("fixed", value)))
		assert.NoError(t, ctx.Err(), "answered before the caller's deadline")
		return err
	}

	// Alone, the short caller gets a slot, and the failure mode's answer
	// at its deadline less the reserve.
	before := time.Now()
	assert.Equal(t, codes.Unavailable, status.Code(short("s")))
	d := lim.LastDeadline(t)
	assert.False(t, d.Before(before.Add(12*time.Millisecond)), "20ms less the 8ms reserve")
	assert.Less(t, d.Sub(before), 20*time.Millisecond)
	require.NoError(t, long("warm"), "the backend's latency is known")

	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { assert.NoError(t, long(fmt.Sprint("l", i))) })
	}
	require.Eventually(t, func() bool {
		a.gate.mu.Lock()
		defer a.gate.mu.Unlock()
		return a.gate.inflight == 1 && a.gate.queued == 2
	}, time.Second, time.Millisecond)
	calls := len(lim.Deadlines())
	assert.Equal(t, codes.Unavailable, status.Code(short("x")), "shed")
	wg.Wait()
	rec.mu.Lock()
	assert.Equal(t, []ShedReason{ShedDeadline}, rec.shed)
	rec.mu.Unlock()
	assert.Len(t, lim.Deadlines(), calls+2, "the shed request never reached the backend")
	assert.Equal(t, breaker.Closed, b.State())

	res, err := lim.Inner.Do(context.Background(), []rate.Op{{
		Key:   rate.Key{Domain: "test", Entries: []rate.Entry{{Key: "fixed", Value: "x"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Window: time.Minute},
	}})
	require.NoError(t, err)
	assert.EqualValues(t, 3, res[0].Remaining, "the shed request took nothing")
}

// orderLimiter passes ops to inner, holding the first call until hold is
// closed, and records the calls in the order they reached it: the first
// op's kind ("take" or "refund") and the value of its entry.
type orderLimiter struct {
	inner rate.Limiter
	hold  chan struct{}
	calls atomic.Int64

	mu    sync.Mutex
	order []string
}

func (l *orderLimiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	l.mu.Lock()
	l.order = append(l.order, ops[0].Kind.String()+" "+ops[0].Key.Entries[0].Value)
	l.mu.Unlock()
	if l.calls.Add(1) == 1 {
		<-l.hold
	}
	return l.inner.Do(ctx, ops)
}

// TestARefundNeverWaitsForASlot: the refund of what a denied request took
// gives room back, and goes to the backend at once, ahead of a request
// that waits for the only slot, which the take held; the waiting request
// then gets it.
func TestARefundNeverWaitsForASlot(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &orderLimiter{inner: mem, hold: make(chan struct{})}
	a, err := New(lim, Options{MaxInflight: 1})
	require.NoError(t, err)
	opts := rls.DefaultOptions()
	opts.BackendTimeout = time.Minute
	svc := newService(t, a, opts)

	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "a"), desc("zero", "a")))
		if assert.NoError(t, err) {
			assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		}
	})
	require.Eventually(t, func() bool { return lim.calls.Load() == 1 }, time.Second, time.Millisecond)
	wg.Go(func() {
		_, err := svc.ShouldRateLimit(context.Background(), request(desc("fixed", "b")))
		assert.NoError(t, err)
	})
	require.Eventually(t, func() bool {
		a.gate.mu.Lock()
		defer a.gate.mu.Unlock()
		return a.gate.queued == 1
	}, time.Second, time.Millisecond, "the second request waits for the slot")
	close(lim.hold)
	wg.Wait()
	assert.Equal(t, []string{"take a", "refund a", "take b"}, lim.order)
}

// TestNewRefusesBadOptions: a negative MaxInflight is refused, naming it;
// DefaultOptions are valid.
func TestNewRefusesBadOptions(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	_, err := New(mem, Options{MaxInflight: -1})
	require.Error(t, err)
	assert.Equal(t, "MaxInflight", option.Of(err).Field)
	_, err = New(mem, DefaultOptions())
	assert.NoError(t, err)
}
