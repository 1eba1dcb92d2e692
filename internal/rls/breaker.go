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
	// BreakerHalfOpen lets one probe call through; its success closes the
	// breaker, its failure opens it again.
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
// for cooldown, during which calls are refused at once; then it lets one
// probe through, whose success closes it and whose failure opens it for
// another cooldown. Time is an argument of every method. It is safe for
// concurrent use; a nil *breaker lets every call through.
type breaker struct {
	threshold int
	cooldown  time.Duration
	// onChange is called after each change of state, in order, with the
	// lock held: it must be quick and must not call the breaker.
	onChange func(from, to BreakerState)

	mu       sync.Mutex
	state    BreakerState
	failures int       // consecutive failures while closed
	openedAt time.Time // when the breaker last opened
	probing  bool      // a half-open breaker's probe is under way
}

// newBreaker returns a closed breaker, or nil when threshold is not
// positive (no breaker).
func newBreaker(threshold int, cooldown time.Duration, onChange func(from, to BreakerState)) *breaker {
	if threshold <= 0 {
		return nil
	}
	if onChange == nil {
		onChange = func(BreakerState, BreakerState) {}
	}
	return &breaker{threshold: threshold, cooldown: cooldown, onChange: onChange}
}

// allow reports whether a call may go to the backend at now. A call it lets
// through must be followed by exactly one of success, failure or abandon.
func (b *breaker) allow(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	switch b.state {
	case BreakerClosed:
		b.mu.Unlock()
		return true
	case BreakerOpen:
		if now.Sub(b.openedAt) < b.cooldown {
			b.mu.Unlock()
			return false
		}
		b.state, b.probing = BreakerHalfOpen, true
		b.onChange(BreakerOpen, BreakerHalfOpen)
		b.mu.Unlock()
		return true
	default: // half-open: one probe at a time
		ok := !b.probing
		b.probing = true
		b.mu.Unlock()
		return ok
	}
}

// success records a call that the backend answered.
func (b *breaker) success() {
	if b == nil {
		return
	}
	b.mu.Lock()
	from := b.state
	switch b.state {
	case BreakerClosed:
		b.failures = 0
	case BreakerHalfOpen:
		b.state, b.failures, b.probing = BreakerClosed, 0, false
	case BreakerOpen:
		// A call let through before the breaker opened: the probe decides.
	}
	if b.state != from {
		b.onChange(from, b.state)
	}
	b.mu.Unlock()
}

// failure records a call that the backend failed at now.
func (b *breaker) failure(now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	from := b.state
	switch b.state {
	case BreakerClosed:
		b.failures++
		if b.failures >= b.threshold {
			b.state, b.openedAt = BreakerOpen, now
		}
	case BreakerHalfOpen:
		b.state, b.openedAt, b.probing = BreakerOpen, now, false
	case BreakerOpen:
		// A call let through before the breaker opened.
	}
	if b.state != from {
		b.onChange(from, b.state)
	}
	b.mu.Unlock()
}

// abandon records a call that ended without saying anything about the
// backend (its caller went away): a half-open breaker lets the next call
// probe instead.
func (b *breaker) abandon() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.state == BreakerHalfOpen {
		b.probing = false
	}
	b.mu.Unlock()
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
