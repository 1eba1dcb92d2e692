package algorithms

import "time"

// FixedWindowState is the state of one fixed_window limit: the index w of the
// epoch-aligned window it counts and the hits c admitted in it. The zero value
// is a new state. A FixedWindowState is not safe for concurrent use.
type FixedWindowState struct {
	window int64
	count  uint64
}

// roll moves the state to window max(⌊t/W⌋, w) and returns that window's
// end: a later window restarts the count, a clock that went backwards keeps
// counting in the current one.
func (s *FixedWindowState) roll(w, t int64) (end int64) {
	if i := floorDiv(t, w); i > s.window || s.count == 0 {
		s.window, s.count = i, 0
	}
	return (s.window + 1) * w
}

// Take asks for n hits at now: admitted iff c + n ≤ L, after the state has
// moved to the window holding now.
func (s *FixedWindowState) Take(l Limit, now time.Time, n uint64) Result {
	w, t := l.WindowMicros(), now.UnixMicro()
	end := s.roll(w, t)
	switch {
	case n > l.Requests:
		return Result{Remaining: s.remaining(l), ResetAfter: micros(w)}
	case s.count+n > l.Requests:
		return Result{Remaining: s.remaining(l), ResetAfter: micros(end - t)}
	}
	s.count += n
	return s.admitted(l, end, t, Receipt{At: t})
}

// Refund gives n hits back at now. With a receipt it subtracts only when the
// receipt's Take fell in the current window; with the zero Receipt it
// subtracts from the current window.
func (s *FixedWindowState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	w, t := l.WindowMicros(), now.UnixMicro()
	end := s.roll(w, t)
	if noReceipt(r) || floorDiv(r.At, w) == s.window {
		s.count -= min(n, s.count)
	}
	return s.admitted(l, end, t, Receipt{})
}

// Expiry returns the end of the counted window, or the zero Time when nothing
// is counted.
func (s *FixedWindowState) Expiry(l Limit) time.Time {
	if s.count == 0 {
		return time.Time{}
	}
	return time.UnixMicro((s.window + 1) * l.WindowMicros())
}

func (s *FixedWindowState) admitted(l Limit, end, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(l), Receipt: r}
	if s.count > 0 {
		res.ResetAfter = micros(end - t)
	}
	return res
}

func (s *FixedWindowState) remaining(l Limit) uint64 {
	if s.count >= l.Requests {
		return 0
	}
	return l.Requests - s.count
}
