package algorithms

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Algorithm names one of the four rate limit algorithms. The zero value is not
// a valid algorithm; configuration fills in the default.
type Algorithm uint8

// The algorithms, in the order the documentation lists them.
const (
	FixedWindow Algorithm = iota + 1
	SlidingWindowLog
	SlidingWindowCounter
	TokenBucket
)

// Algorithms lists every valid Algorithm.
var Algorithms = []Algorithm{FixedWindow, SlidingWindowLog, SlidingWindowCounter, TokenBucket}

var algorithmNames = [...]string{
	FixedWindow:          "fixed_window",
	SlidingWindowLog:     "sliding_window_log",
	SlidingWindowCounter: "sliding_window_counter",
	TokenBucket:          "token_bucket",
}

// String returns the name used in configuration files, such as "token_bucket".
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// MarshalText returns the algorithm's configuration name.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("algorithms: no such algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText sets a to the algorithm of the configuration name text, as
// ParseAlgorithm reads it: the one parser of algorithm names for the limits
// files and the settings.
func (a *Algorithm) UnmarshalText(text []byte) error {
	v, err := ParseAlgorithm(string(text))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Valid reports whether a is one of the four algorithms.
func (a Algorithm) Valid() bool { return a >= FixedWindow && a <= TokenBucket }

// ParseAlgorithm returns the Algorithm with the given configuration name.
func ParseAlgorithm(name string) (Algorithm, error) {
	for _, a := range Algorithms {
		if algorithmNames[a] == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("algorithms: unknown algorithm %q (want fixed_window, sliding_window_log, sliding_window_counter or token_bucket)", name)
}

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
	if l.Algorithm == TokenBucket && l.Burst != 0 {
		return l.Burst
	}
	return l.Requests
}

// Lifetime returns the longest a state of l lasts after the op that last
// changed it, before it behaves as a new one (its Expiry) and a store may
// drop it: W for a fixed window (the longest of its months or years for a
// calendar one) and a sliding window log, 2W for a sliding
// window counter (its previous window still weighs), and for a token bucket
// the time it takes to refill from empty, W·⌈B/L⌉ at most. It assumes a clock
// that does not go back; l must satisfy Validate.
func (l Limit) Lifetime() time.Duration {
	switch l.Algorithm {
	case FixedWindow:
		return l.windows().longest()
	case SlidingWindowCounter:
		return 2 * l.Window
	case TokenBucket:
		if b := bucketBurst(l); b > l.Requests {
			// Validate keeps this within MaxWindow.
			return time.Duration(ceilDiv(b, l.Requests)) * l.Window
		}
	}
	return l.Window
}

// MaxDebt returns D, the most hits a charge may leave recorded beyond L: L
// for a sliding window log, which stores one entry per hit, and
// min(MaxRequests, L·⌊MaxWindow/W⌋) for the other algorithms, so that every
// debt is paid off within MaxWindow and every number stays below 2^53. A
// limit of 0 pays nothing off, so it takes no debt.
func (l Limit) MaxDebt() uint64 {
	if l.Algorithm == SlidingWindowLog {
		return l.Requests
	}
	if l.Window <= 0 || l.Requests == 0 {
		return 0
	}
	longest := l.Window
	if l.Calendar {
		longest = l.windows().longest()
	}
	windows := uint64(MaxWindow / longest)
	if windows >= ceilDiv(MaxRequests, l.Requests) {
		return MaxRequests
	}
	return l.Requests * windows
}

// WindowMicros returns W in microseconds.
func (l Limit) WindowMicros() int64 { return l.Window.Microseconds() }

// SliceMicros returns q = W / SlicesPerWindow in microseconds.
func (l Limit) SliceMicros() int64 { return l.Window.Microseconds() / SlicesPerWindow }

// Validate reports whether l is within the ranges the algorithms support. Its
// errors wrap ErrInvalidLimit and name the offending field.
func (l Limit) Validate() error {
	switch {
	case !l.Algorithm.Valid():
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, l.Algorithm)
	case l.Window < time.Second || l.Window > MaxWindow:
		return fmt.Errorf("%w: window %s is outside [1s, %s]", ErrInvalidLimit, l.Window, MaxWindow)
	case l.Window%time.Second != 0:
		return fmt.Errorf("%w: window %s is not a whole number of seconds", ErrInvalidLimit, l.Window)
	case l.Requests > MaxRequests:
		return fmt.Errorf("%w: requests_per_unit %d exceeds %d", ErrInvalidLimit, l.Requests, uint64(MaxRequests))
	case l.Algorithm == SlidingWindowLog && l.Requests > MaxLogRequests:
		return fmt.Errorf("%w: requests_per_unit %d exceeds %d, the most a sliding_window_log keeps (use sliding_window_counter or token_bucket)", ErrInvalidLimit, l.Requests, MaxLogRequests)
	case l.Burst != 0 && l.Algorithm != TokenBucket:
		return fmt.Errorf("%w: burst applies only to token_bucket, not %s", ErrInvalidLimit, l.Algorithm)
	case l.Burst > MaxRequests:
		return fmt.Errorf("%w: burst %d exceeds %d", ErrInvalidLimit, l.Burst, uint64(MaxRequests))
	case l.Algorithm == TokenBucket && l.Requests == 0 && l.Burst != 0:
		return fmt.Errorf("%w: a token_bucket with requests_per_unit 0 never refills, so its burst must be 0", ErrInvalidLimit)
	case l.Algorithm == TokenBucket && l.Burst*uint64(l.Window/time.Second) > l.Requests*uint64(MaxWindow/time.Second):
		return fmt.Errorf("%w: a token_bucket with burst %d takes longer than %s to refill at %d per %s", ErrInvalidLimit, l.Burst, MaxWindow, l.Requests, l.Window)
	case l.Calendar && l.Algorithm != FixedWindow:
		return fmt.Errorf("%w: calendar windows apply only to fixed_window, not %s", ErrInvalidLimit, l.Algorithm)
	case l.Calendar && l.Window != calendarDay && l.Window != calendarWeek && l.Window != calendarMonth && l.Window != calendarYear:
		return fmt.Errorf("%w: calendar windows are a day, a week, a month or a year, not %s", ErrInvalidLimit, l.Window)
	}
	return nil
}
