package algorithms

import "time"

// SlidingWindowCounterState is the state of one sliding_window_counter limit:
// the index w of the current epoch-aligned window, the hits cur admitted in
// it and the hits prev admitted in the window before. The zero value is a new
// state. A SlidingWindowCounterState is not safe for concurrent use.
type SlidingWindowCounterState struct {
	window    int64
	cur, prev uint64
}

// roll moves the state to window i = max(⌊t/W⌋, w) and returns the elapsed
// slice s of that window, clamped to [0, S−1].
func (s *SlidingWindowCounterState) roll(w, q, t int64) int64 {
	i := max(floorDiv(t, w), s.window)
	switch {
	case i == s.window+1:
		s.prev, s.cur = s.cur, 0
	case i > s.window+1:
		s.prev, s.cur = 0, 0
	}
	s.window = i
	return min(max(floorDiv(t-i*w, q), 0), SlicesPerWindow-1)
}

// Take asks for n hits at now: admitted iff cur + n ≤ L and the previous
// window, weighed by the part of it still inside the sliding window, leaves
// room for them: prev·(S−s) ≤ (L−cur−n)·S.
func (s *SlidingWindowCounterState) Take(l Limit, now time.Time, n uint64) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	weight := uint64(SlicesPerWindow - s.roll(w, q, t))
	L := l.Requests
	const S = SlicesPerWindow
	switch {
	case n > L:
		return Result{Remaining: s.remaining(L, weight), ResetAfter: micros(w)}
	case s.cur+n <= L && s.prev*weight <= (L-s.cur-n)*S:
		s.cur += n
		return s.admitted(L, w, t, weight, Receipt{At: t})
	}
	// Denied: wait for the first slice boundary at which the estimate admits
	// n. When cur leaves room, that is in this window, once enough of prev
	// has slid out (prev > 0 here, or the request would fit). Otherwise cur
	// must become prev first (cur > L − n ≥ 0 here).
	var at int64
	if s.cur+n <= L {
		at = s.window*w + int64(S-(L-s.cur-n)*S/s.prev)*q
	} else {
		at = (s.window+1)*w + int64(S-(L-n)*S/s.cur)*q
	}
	return Result{Remaining: s.remaining(L, weight), ResetAfter: micros(at - t)}
}

// Refund gives n hits back at now. With a receipt it subtracts from the
// count of the window the receipt's Take fell in, when that is the current
// or the previous window. With the zero Receipt it subtracts from cur, then
// what cur cannot cover from prev: the newest hits first.
func (s *SlidingWindowCounterState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	weight := uint64(SlicesPerWindow - s.roll(w, q, t))
	switch {
	case noReceipt(r):
		fromCur := min(n, s.cur)
		s.cur -= fromCur
		s.prev -= min(n-fromCur, s.prev)
	case floorDiv(r.At, w) == s.window:
		s.cur -= min(n, s.cur)
	case floorDiv(r.At, w) == s.window-1:
		s.prev -= min(n, s.prev)
	}
	return s.admitted(l.Requests, w, t, weight, Receipt{})
}

// Expiry returns when both counts have left the sliding window: the end of
// the next window while cur > 0, the end of the current one while only prev
// is non-zero, and the start of the current one when both are zero.
func (s *SlidingWindowCounterState) Expiry(l Limit) time.Time {
	w := l.WindowMicros()
	switch {
	case s.cur > 0:
		return time.UnixMicro((s.window + 2) * w)
	case s.prev > 0:
		return time.UnixMicro((s.window + 1) * w)
	}
	return time.UnixMicro(s.window * w)
}

func (s *SlidingWindowCounterState) admitted(L uint64, w, t int64, weight uint64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(L, weight), Receipt: r}
	switch {
	case s.cur > 0:
		res.ResetAfter = micros((s.window+2)*w - t)
	case s.prev > 0:
		res.ResetAfter = micros((s.window+1)*w - t)
	}
	return res
}

// remaining returns L − cur − ⌈prev·(S−s)/S⌉, or 0 when that is negative.
func (s *SlidingWindowCounterState) remaining(L, weight uint64) uint64 {
	used := s.cur + ceilDiv(s.prev*weight, SlicesPerWindow)
	if used >= L {
		return 0
	}
	return L - used
}
