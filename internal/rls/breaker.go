package rls

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrCircuitOpen is the error of a backend call that the circuit breaker
// refused without trying: the backend failed too often just before.
var ErrCircuitOpen = errors.New("rls: circuit breaker open: backend calls suspended after consecutive failures")

// BreakerState is the state of the circuit breaker around the backend.
type BreakerState uint8

// The breaker's states.
const (
	// BreakerClosed lets every call through.
	BreakerClosed BreakerState = iota
	// BreakerOpen refuses every call until the cool-down has passed.
	BreakerOpen
	// BreakerHalfOpen lets a few probe calls through at once; the first
	// success closes the breaker, as many failed probes open it again.
	BreakerHalfOpen
)

// String returns the state's label: "closed", "open" or "half_open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// BreakerStates lists every BreakerState.
var BreakerStates = []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen}

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
// the wait was the host's (a CPU queue, a throttled pod), not the backend's;
// such a timeout changes nothing. So a hung backend opens the breaker, and an
// overloaded host does not.
//
// Time is an argument of every method. It is safe for concurrent use; a nil
// *breaker lets every call through.
type breaker struct {
	threshold int
	probes    int
	cooldown  time.Duration
	// onChange is called after each change of state, in order, with the
	// lock held: it must be quick and must not call the breaker.
	onChange func(from, to BreakerState)

	mu          sync.Mutex
	state       BreakerState
	failures    int       // consecutive failures while closed; failed probes while half-open
	openedAt    time.Time // when the breaker last opened
	probing     int       // probes under way while half-open
	epoch       uint64    // counts openings, so that a probe of an earlier half-open state is told apart
	lastSuccess time.Time // when a call last succeeded
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

// newBreaker returns a closed breaker, or nil when threshold is not
// positive (no breaker). probes below 1 mean 1.
func newBreaker(threshold, probes int, cooldown time.Duration, onChange func(from, to BreakerState)) *breaker {
	if threshold <= 0 {
		return nil
	}
	if onChange == nil {
		onChange = func(BreakerState, BreakerState) {}
	}
	return &breaker{threshold: threshold, probes: max(probes, 1), cooldown: cooldown, onChange: onChange}
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
	switch b.state {
	case BreakerClosed:
		return t, true
	case BreakerOpen:
		if now.Sub(b.openedAt) < b.cooldown {
			return t, false
		}
		b.state, b.failures, b.probing = BreakerHalfOpen, 0, 0
		b.onChange(BreakerOpen, BreakerHalfOpen)
	}
	// Half-open: up to probes at a time.
	if b.probing >= b.probes {
		return t, false
	}
	b.probing++
	t.probe, t.epoch = true, b.epoch
	return t, true
}

// success records a call that the backend answered at now. Any answer
// closes a half-open breaker: the backend answers.
func (b *breaker) success(t breakerTicket, now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.lastSuccess) {
		b.lastSuccess = now
	}
	switch b.state {
	case BreakerClosed:
		b.failures = 0
	case BreakerHalfOpen:
		b.state, b.failures, b.probing = BreakerClosed, 0, 0
		b.onChange(BreakerHalfOpen, BreakerClosed)
	case BreakerOpen:
		// A call let through before the breaker opened: the probes decide.
	}
}

// failure records a call that failed at now; timeout says that it failed
// for want of an answer in time, which counts only when no call succeeded
// since t's call started.
func (b *breaker) failure(t breakerTicket, now time.Time, timeout bool) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	answered := timeout && b.lastSuccess.After(t.start)
	switch b.state {
	case BreakerClosed:
		if answered {
			return
		}
		b.failures++
		if b.failures >= b.threshold {
			b.open(BreakerClosed, now)
		}
	case BreakerHalfOpen:
		if !t.probe || t.epoch != b.epoch {
			return // not a probe of this half-open state
		}
		b.probing--
		if answered {
			return
		}
		b.failures++
		if b.failures >= b.probes {
			b.open(BreakerHalfOpen, now)
		}
	case BreakerOpen:
		// A call let through before the breaker opened.
	}
}

// open opens the breaker at now, from state from. The lock is held.
func (b *breaker) open(from BreakerState, now time.Time) {
	b.state, b.openedAt, b.failures, b.probing = BreakerOpen, now, 0, 0
	b.epoch++
	b.onChange(from, BreakerOpen)
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
	if b.state == BreakerHalfOpen && t.probe && t.epoch == b.epoch {
		b.probing--
	}
}

// current returns the breaker's state.
func (b *breaker) current() BreakerState {
	if b == nil {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
