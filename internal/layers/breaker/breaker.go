// Package breaker is the circuit breaker of the request path: a Limiter
// that wraps the Limiter below it, times and classifies each of its calls
// for metrics, and after consecutive failures of the backend refuses calls
// for a cool-down, so that the service answers with its failure mode at
// once instead of waiting for a backend that is down.
package breaker

import (
	"fmt"
	"sync"
	"time"
)

// State is the state of the circuit breaker around the backend.
type State uint8

// The breaker's states.
const (
	// Closed lets every call through.
	Closed State = iota
	// Open refuses every call until the cool-down has passed.
	Open
	// HalfOpen lets a few probe calls through at once; the first success
	// closes the breaker, as many failed probes open it again.
	HalfOpen
)

// String returns the state's label: "closed", "open" or "half_open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// States lists every State.
var States = []State{Closed, Open, HalfOpen}

// breaker is a circuit breaker: after threshold consecutive failures it opens
// for cooldown, during which calls are refused at once; then it turns
// half-open and lets up to probes calls through at once, the first of which
// to succeed closes it, while probes failed probes open it for another
// cooldown. Several probes at once keep one probe that happens to be slow on
// a busy host from costing a whole cool-down.
//
// A failure is a call that the backend failed. A timeout is one only when
// the backend answered nothing while the call waited: when another call
// succeeded after the timed-out one started, the backend was answering, and
// the wait was the host's (a CPU queue, a throttled pod), not the backend's.
// On a host that runs the process and the backend only now and then, the
// answers that came meanwhile are read only after the timers of the calls
// that waited for them have fired, so a timeout is judged settle after it
// happened (the time the backend client keeps reading the answers of calls
// whose callers gave up): an answer read by then, to any call since the
// timed-out one started (one whose caller gave up included, see answered),
// excuses it. So a hung backend opens the breaker, settle late, and an
// overloaded host does not. A half-open probe that timed out keeps its slot
// until it is judged.
//
// Time is an argument of every method. It is safe for concurrent use; a nil
// *breaker lets every call through.
type breaker struct {
	threshold int
	probes    int
	cooldown  time.Duration
	settle    time.Duration
	// onChange is called after each change of state, in order, with the
	// lock held: it must be quick and must not call the breaker.
	onChange func(from, to State)

	mu          sync.Mutex
	state       State
	failures    int       // consecutive failures while closed; failed probes while half-open
	openedAt    time.Time // when the breaker last opened
	probing     int       // probes under way while half-open
	epoch       uint64    // counts openings, so that a probe of an earlier half-open state is told apart
	lastSuccess time.Time // when the backend last answered a call
	pending     []pendingTimeout
}

// breakerTicket is what allow gives a call it lets through, for the call's
// outcome.
type breakerTicket struct {
	// start is when the call was let through.
	start time.Time
	// probe marks a probe of the half-open state of epoch.
	probe bool
	epoch uint64
}

// pendingTimeout is a timeout waiting to be judged.
type pendingTimeout struct {
	t  breakerTicket
	at time.Time
}

// maxPending bounds the timeouts waiting to be judged; more are judged at
// once.
const maxPending = 1024

// newBreaker returns a closed breaker, or nil when threshold is not
// positive (no breaker). probes below 1 mean 1.
func newBreaker(threshold, probes int, cooldown, settle time.Duration, onChange func(from, to State)) *breaker {
	if threshold <= 0 {
		return nil
	}
	if onChange == nil {
		onChange = func(State, State) {}
	}
	return &breaker{threshold: threshold, probes: max(probes, 1), cooldown: cooldown, settle: settle, onChange: onChange}
}

// allow reports whether a call may go to the backend at now. A call it lets
// through must be followed by exactly one of success, failure or abandon,
// with the ticket.
func (b *breaker) allow(now time.Time) (breakerTicket, bool) {
	t := breakerTicket{start: now}
	if b == nil {
		return t, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.judge(now)
	switch b.state {
	case Closed:
		return t, true
	case Open:
		if now.Sub(b.openedAt) < b.cooldown {
			return t, false
		}
		b.state, b.failures, b.probing = HalfOpen, 0, 0
		b.onChange(Open, HalfOpen)
	}
	// Half-open: up to probes at a time.
	if b.probing >= b.probes {
		return t, false
	}
	b.probing++
	t.probe, t.epoch = true, b.epoch
	return t, true
}

// success records a call that the backend answered at now.
func (b *breaker) success(t breakerTicket, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(t)
	b.answer(now)
	if b.state == Closed {
		b.failures = 0
	}
}

// answered records that the backend answered, at at, a call whose caller
// had stopped waiting: it was answering.
func (b *breaker) answered(at time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answer(at)
}

// answer records an answer at at: any answer closes a half-open breaker.
// The lock is held.
func (b *breaker) answer(at time.Time) {
	if at.After(b.lastSuccess) {
		b.lastSuccess = at
	}
	b.judge(at)
	if b.state == HalfOpen {
		b.state, b.failures, b.probing = Closed, 0, 0
		b.onChange(HalfOpen, Closed)
	}
	// Open: an answer to a call let through before it opened; the probes
	// decide.
}

// failure records a call that failed at now; timeout says that it failed
// for want of an answer in time, which is judged settle later.
func (b *breaker) failure(t breakerTicket, now time.Time, timeout bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.judge(now)
	if !b.counts(t) {
		return
	}
	if timeout && !b.lastSuccess.After(t.start) {
		b.pending = append(b.pending, pendingTimeout{t: t, at: now})
		if len(b.pending) > maxPending {
			b.judge(now.Add(b.settle))
		}
		return
	}
	b.release(t)
	if !timeout {
		b.fail(now)
	}
}

// counts reports whether the outcome of t's call bears on the state: a call
// while closed, or a probe of the current half-open state. The lock is
// held.
func (b *breaker) counts(t breakerTicket) bool {
	switch b.state {
	case Closed:
		return true
	case HalfOpen:
		return t.probe && t.epoch == b.epoch
	}
	return false // open: a call let through before it opened
}

// release frees the probe slot of t's call. The lock is held.
func (b *breaker) release(t breakerTicket) {
	if b.state == HalfOpen && t.probe && t.epoch == b.epoch {
		b.probing--
	}
}

// fail counts a failure at now. The lock is held.
func (b *breaker) fail(now time.Time) {
	switch b.state {
	case Closed:
		b.failures++
		if b.failures >= b.threshold {
			b.open(Closed, now)
		}
	case HalfOpen:
		b.failures++
		if b.failures >= b.probes {
			b.open(HalfOpen, now)
		}
	}
}

// judge counts the timeouts that happened settle or longer before now with
// no answer since their calls started, and forgets those excused by one.
// The lock is held.
func (b *breaker) judge(now time.Time) {
	kept := b.pending[:0]
	for _, p := range b.pending {
		answered := b.lastSuccess.After(p.t.start)
		if !answered && now.Sub(p.at) < b.settle {
			kept = append(kept, p)
			continue
		}
		if !b.counts(p.t) {
			continue
		}
		b.release(p.t)
		if !answered {
			b.fail(p.at)
		}
	}
	clear(b.pending[len(kept):])
	b.pending = kept
}

// open opens the breaker at now, from state from. The lock is held.
func (b *breaker) open(from State, now time.Time) {
	b.state, b.openedAt, b.failures, b.probing = Open, now, 0, 0
	b.epoch++
	b.onChange(from, Open)
}

// abandon records a call that ended without saying anything about the
// backend (its caller went away, or it was shed before reaching the
// backend): a half-open breaker lets another call probe instead.
func (b *breaker) abandon(t breakerTicket) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.release(t)
}

// current returns the breaker's state.
func (b *breaker) current() State {
	if b == nil {
		return Closed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
