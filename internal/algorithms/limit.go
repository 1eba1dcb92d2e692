package algorithms

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Ranges of the numbers a Limit may hold. They keep every intermediate value
// of the maths below 2^53, so the Lua scripts compute exactly what Go does.
const (
	// MaxRequests is the largest Limit.Requests and Limit.Burst: the range of
	// requests_per_unit in Envoy's API.
	MaxRequests = math.MaxUint32
	// MaxLogRequests is the largest Limit.Requests of a sliding window log,
	// which stores one entry per admitted hit.
	MaxLogRequests = 100_000
	// MaxWindow is the longest window: ten 365-day years.
	MaxWindow = 3650 * 24 * time.Hour
	// SlicesPerWindow is the number of equal slices a window is cut into by
	// the sliding window counter and the token bucket.
	SlicesPerWindow = 1_000_000
	// MaxHold is the longest hold of a lease (rate.Op.Hold): a longer one is
	// cut to it, so that now + hold + W stays below 2^53 µs as every time
	// of the windows' maths does.
	MaxHold = MaxWindow
)

// ErrInvalidLimit is wrapped by every error Limit.Validate returns.
var ErrInvalidLimit = errors.New("invalid limit")

// Limit is one rate limit: Requests hits per Window, enforced by Algorithm.
type Limit struct {
	Algorithm Algorithm
	// Requests is L, the hits admitted per window.
	Requests uint64
	// Window is W, a whole number of seconds in [1s, MaxWindow].
	Window time.Duration
	// Burst is B, the token bucket's capacity; 0 means Requests. Other
	// algorithms require 0.
	Burst uint64
	// Calendar makes a fixed_window count in the windows of the UTC
	// calendar that Window names by its nominal length: a day (24h), an ISO
	// week from Monday (7 days), a month (30 days) or a year (365 days).
	// The window holding a time is then that day, week, month or year, of
	// 28 to 31 days for a month and 365 or 366 for a year.
	Calendar bool
}

// Capacity returns the most hits one request can ever be granted: the burst of
// a token bucket, the limit otherwise.
func (l Limit) Capacity() uint64 {
	if l.Algorithm.spec().Burst && l.Burst != 0 {
		return l.Burst
	}
	return l.Requests
}

// Lifetime returns the longest a state of l lasts after the op that last
// changed it, before it behaves as a new one (its Expiry) and a store may
// drop it: W for a fixed window (the longest of its months or years for a
// calendar one) and a sliding window log, 2W for a sliding
// window counter (its previous window still weighs), and for a token bucket
// the time it takes to refill from empty, W·⌈B/L⌉ at most. A lease's take
// (rate.Op.Hold) makes a log last longer by its hold, and a bucket by its hold
// and the slot its end is rounded up to, ⌈hold/8⌉ at most. It assumes a
// clock that does not go back; l must satisfy Validate. Each algorithm's row of
// the table of algorithms says how; it is 0 for an invalid algorithm.
func (l Limit) Lifetime() time.Duration {
	if life := l.Algorithm.spec().lifetime; life != nil {
		return life(l)
	}
	return 0
}

// MaxDebt returns D, the most hits a charge may leave recorded beyond L: L
// for a sliding window log, which stores one entry per hit, and
// min(MaxRequests, L·⌊MaxWindow/W⌋) for the other algorithms, so that every
// debt is paid off within MaxWindow and every number stays below 2^53. A
// limit of 0 pays nothing off, so it takes no debt. Each algorithm's row of
// the table of algorithms says how; it is 0 for an invalid algorithm.
func (l Limit) MaxDebt() uint64 {
	if debt := l.Algorithm.spec().maxDebt; debt != nil {
		return debt(l)
	}
	return 0
}

// WindowMicros returns W in microseconds.
func (l Limit) WindowMicros() int64 { return l.Window.Microseconds() }

// SliceMicros returns q = W / SlicesPerWindow in microseconds.
func (l Limit) SliceMicros() int64 { return l.Window.Microseconds() / SlicesPerWindow }

// Validate reports whether l is within the ranges the algorithms support. Its
// errors wrap ErrInvalidLimit and name the offending field.
func (l Limit) Validate() error {
	spec := l.Algorithm.spec()
	switch {
	case !l.Algorithm.Valid():
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, l.Algorithm)
	case l.Window < time.Second || l.Window > MaxWindow:
		return fmt.Errorf("%w: window %s is outside [1s, %s]", ErrInvalidLimit, l.Window, MaxWindow)
	case l.Window%time.Second != 0:
		return fmt.Errorf("%w: window %s is not a whole number of seconds", ErrInvalidLimit, l.Window)
	case l.Requests > MaxRequests:
		return fmt.Errorf("%w: requests_per_unit %d exceeds %d", ErrInvalidLimit, l.Requests, uint64(MaxRequests))
	case spec.EntryPerHit && l.Requests > MaxLogRequests:
		return fmt.Errorf("%w: requests_per_unit %d exceeds %d, the most a %s keeps (use sliding_window_counter or token_bucket)", ErrInvalidLimit, l.Requests, MaxLogRequests, l.Algorithm)
	case l.Burst != 0 && !spec.Burst:
		return fmt.Errorf("%w: burst applies only to %s, not %s", ErrInvalidLimit, Names(func(s Spec) bool { return s.Burst }), l.Algorithm)
	case l.Burst > MaxRequests:
		return fmt.Errorf("%w: burst %d exceeds %d", ErrInvalidLimit, l.Burst, uint64(MaxRequests))
	case spec.Burst && l.Requests == 0 && l.Burst != 0:
		return fmt.Errorf("%w: a %s with requests_per_unit 0 never refills, so its burst must be 0", ErrInvalidLimit, l.Algorithm)
	case spec.Burst && l.Burst*uint64(l.Window/time.Second) > l.Requests*uint64(MaxWindow/time.Second):
		return fmt.Errorf("%w: a %s with burst %d takes longer than %s to refill at %d per %s", ErrInvalidLimit, l.Algorithm, l.Burst, MaxWindow, l.Requests, l.Window)
	case l.Calendar && !spec.Calendar:
		return fmt.Errorf("%w: calendar windows apply only to %s, not %s", ErrInvalidLimit, Names(func(s Spec) bool { return s.Calendar }), l.Algorithm)
	case l.Calendar && l.Window != calendarDay && l.Window != calendarWeek && l.Window != calendarMonth && l.Window != calendarYear:
		return fmt.Errorf("%w: calendar windows are a day, a week, a month or a year, not %s", ErrInvalidLimit, l.Window)
	}
	return nil
}
