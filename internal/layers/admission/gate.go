// Package admission is the admission gate of the request path: a Limiter
// that wraps the Limiter below it, bounds the requests whose calls are under
// way, and sheds the requests that could not be answered before their
// deadline instead of queueing them into timeouts.
package admission

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"
)

// ErrShed is the error of a request the gate did not send to the backend
// because it could not have been answered before its deadline: the backend
// was busy with as much as it should carry, and the request's time ran out
// while it waited, or was too short for the backend's recent latency from
// the start. The service answers it with its failure mode. The error
// Limiter.Do returns for it matches rate.ErrNotSent too.
var ErrShed = errors.New("admission: request shed: the backend could not answer it before its deadline")

// ShedReason says why a request was shed.
type ShedReason uint8

// The reasons for shedding.
const (
	// ShedDeadline is a request whose time left was shorter than the
	// backend's recent latency, at arrival or while it waited for a slot.
	ShedDeadline ShedReason = iota
	// ShedQueue is a request that found the waiting list full.
	ShedQueue
)

// ShedReasons lists every ShedReason.
var ShedReasons = []ShedReason{ShedDeadline, ShedQueue}

// String returns the reason's label: "deadline" or "queue".
func (r ShedReason) String() string {
	switch r {
	case ShedDeadline:
		return "deadline"
	case ShedQueue:
		return "queue"
	}
	return "unknown"
}

// The admission gate's fixed choices.
const (
	// minInflight and maxInflight bound the adaptive limit.
	minInflight = 4
	maxInflight = 4096
	// initialInflight is the adaptive limit at start.
	initialInflight = 64
	// maxWaiting bounds the waiting list, as a multiple of the limit.
	maxWaiting = 4
	// backoff is the factor of a decrease of the adaptive limit.
	backoff = 0.9
	// latencyWeight is the weight of a new sample in the latency estimate.
	latencyWeight = 0.1
)

// gate bounds the requests whose backend calls are under way, and sheds the
// requests that cannot be answered before their deadline instead of
// queueing them into timeouts. A request that finds fewer than limit under
// way (and nobody waiting) goes at once. Otherwise it waits for a slot,
// until the last moment at which the backend's recent latency (an
// exponentially weighted mean of its calls' durations) still fits before
// its deadline, and is shed then; one whose time left is shorter than that
// latency from the start is shed at once. While waiters keep the list from
// emptying for longer than that latency, slots go to the newest waiter
// first (adaptive LIFO): under overload it has the most time left, and the
// oldest are those that would time out anyway.
//
// The limit adapts unless fixed, as a TCP congestion window does: every
// backend call that ends in time adds 1/limit to it, and a call that timed
// out takes a tenth off it, at most once per recent latency, within
// [minInflight, maxInflight]. So it settles where the calls under way still
// end in time, whatever the host's speed; a latency that is high but within
// the budget (a slow host) does not shrink it, since fewer calls under way
// would only make smaller pipelines.
//
// It is safe for concurrent use.
type gate struct {
	fixed bool
	// onLimit is told the limit when its integer part changes.
	onLimit func(int)

	mu       sync.Mutex
	limit    float64
	inflight int
	// waiters holds the waiting requests in arrival order from head on;
	// those that left are marked gone and skipped.
	waiters []*waiter
	head    int
	queued  int // waiters not gone
	// busySince is when the waiting list last became non-empty.
	busySince    time.Time
	latency      time.Duration // the estimate
	lastDecrease time.Time
	reported     int
}

// waiter is a request waiting for a slot.
type waiter struct {
	ready    chan struct{} // closed when decided
	deadline time.Time
	granted  bool
	gone     bool
}

// newGate returns a gate whose limit is fixed at limit, or adapts when limit
// is 0. onLimit is told the limit now and whenever its integer part changes.
func newGate(limit int, onLimit func(int)) *gate {
	g := &gate{fixed: limit > 0, onLimit: onLimit, limit: initialInflight}
	if g.fixed {
		g.limit = float64(limit)
	}
	g.reported = int(g.limit)
	onLimit(g.reported)
	return g
}

// acquire waits for a slot for a request with ctx's deadline, at the latest
// until the backend's recent latency no longer fits before it. It returns
// nil when the request may go, ErrShed with the reason when it was shed, or
// ctx's error when the caller went away first. A request that may go must
// call release once its backend calls are done.
func (g *gate) acquire(ctx context.Context, now time.Time) (ShedReason, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(time.Duration(math.MaxInt64))
	}
	g.mu.Lock()
	if g.queued == 0 && float64(g.inflight) < g.limit {
		g.inflight++
		g.mu.Unlock()
		return 0, nil
	}
	if deadline.Sub(now) < g.latency {
		g.mu.Unlock()
		return ShedDeadline, ErrShed
	}
	if g.queued >= maxWaiting*int(g.limit) {
		g.mu.Unlock()
		return ShedQueue, ErrShed
	}
	w := &waiter{ready: make(chan struct{}), deadline: deadline}
	if g.queued == 0 {
		g.busySince = now
	}
	g.waiters = append(g.waiters, w)
	g.queued++
	wait := deadline.Sub(now) - g.latency
	g.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case w.granted:
		return 0, nil
	case !w.gone:
		w.gone = true
		g.queued--
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	return ShedDeadline, ErrShed
}

// release returns a slot at now and hands it on.
func (g *gate) release(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.grant(now)
}

// observe takes the duration of a backend call that ended at now; timedOut
// says that it did not end in time.
func (g *gate) observe(d time.Duration, timedOut bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.latency == 0 {
		g.latency = d
	} else {
		g.latency += time.Duration(latencyWeight * float64(d-g.latency))
	}
	if g.fixed {
		return
	}
	if timedOut {
		if now.Sub(g.lastDecrease) >= g.latency {
			g.limit = max(minInflight, g.limit*backoff)
			g.lastDecrease = now
		}
	} else {
		g.limit = min(maxInflight, g.limit+1/g.limit)
	}
	if n := int(g.limit); n != g.reported {
		g.reported = n
		g.onLimit(n)
	}
	g.grant(now)
}

// grant hands free slots to waiters at now: the oldest first, or the newest
// while the list has not emptied for longer than the recent latency; a
// waiter whose time left no longer fits the latency is shed instead. The
// lock is held.
func (g *gate) grant(now time.Time) {
	for g.queued > 0 && float64(g.inflight) < g.limit {
		lifo := now.Sub(g.busySince) > g.latency
		w := g.pop(lifo)
		g.queued--
		if g.queued == 0 {
			g.busySince = time.Time{}
		}
		w.gone = true
		if w.deadline.Sub(now) >= g.latency {
			w.granted = true
			g.inflight++
		}
		close(w.ready)
	}
}

// pop removes and returns the oldest waiter, or the newest with lifo. The
// lock is held and a waiter is queued.
func (g *gate) pop(lifo bool) *waiter {
	for {
		var w *waiter
		if lifo {
			w = g.waiters[len(g.waiters)-1]
			g.waiters[len(g.waiters)-1] = nil
			g.waiters = g.waiters[:len(g.waiters)-1]
		} else {
			w = g.waiters[g.head]
			g.waiters[g.head] = nil
			g.head++
		}
		if g.head == len(g.waiters) || g.head > len(g.waiters)/2 {
			g.waiters = append(g.waiters[:0], g.waiters[g.head:]...)
			g.head = 0
		}
		if !w.gone {
			return w
		}
	}
}
