package algorithms

import "time"

// SlidingWindowCounterState is the state of one sliding_window_counter limit:
// the index w of the current epoch-aligned window, the hits cur counted in
// it, the hits prev counted in the window before, and the debt e, the part
// of cur that charges recorded beyond the limit, which the windows after w
// pay off. The zero value is a new state. A SlidingWindowCounterState is not
// safe for concurrent use.
//
// The estimate of the last W (cur, plus prev weighted by the share of its
// window still inside the last W, rounded up to a slice, so never below
// the exact formula) is exact when prev's hits were evenly spread over their window. When they
// came early it denies hits an exact count would admit; when late, it admits
// more. The worst case is prev's hits all at its window's very end: with
// L = 100 a minute, 100 admitted at 59.9s count as 50 at 1m30s, which then
// admits 50 more, so the minute from 30s to 1m30s holds 150. In general the
// hits admitted in any span of W stay below 2L, reaching near it only when
// one window's hits all come at its end and the next window's as fast as the
// weighting allows. The state stays two numbers whatever L is.
type SlidingWindowCounterState struct {
	window    int64
	cur, prev uint64
	debt      uint64
	// drop is when the state behaves as a new one, in µs, as computed at
	// its last change; it is kept only while debt > 0, when it depends on
	// the limit of that change.
	drop int64
	// epoch names this incarnation of the state to its leases' receipts:
	// the time of its first lease, 0 before.
	epoch int64
}

// roll lowers the debt to what l allows, moves the state to window
// i = max(⌊t/W⌋, w) and returns the elapsed slice s of that window, clamped
// to [0, S−1]. Each new window takes the debt as its count and leaves the
// rest of cur to the previous window: (prev, cur, e) ← (cur − e, e,
// max(0, e − L)). Without debt, the next window makes cur the previous one
// and a later one restarts both.
func (s *SlidingWindowCounterState) roll(l Limit, w, q, t int64) int64 {
	L := l.Requests
	s.debt = min(s.debt, excess(s.cur, L), l.MaxDebt())
	i := max(floorDiv(t, w), s.window)
	switch j := uint64(i - s.window); {
	case j == 1:
		s.prev, s.cur = s.cur-s.debt, s.debt
		s.debt = paidDown(s.debt, 1, L)
	case j > 1:
		// Window i−1 started at max(0, e − (j−2)·L) and carried
		// max(0, e − (j−1)·L) into window i.
		before := paidDown(s.debt, j-2, L)
		s.cur = paidDown(s.debt, j-1, L)
		s.prev = before - s.cur
		s.debt = paidDown(s.debt, j, L)
	}
	s.window = i
	if s.cur == 0 && s.prev == 0 && s.debt == 0 {
		// Both windows are empty: a new state, which its old leases'
		// settlements do not name.
		s.epoch = 0
	}
	return min(max(floorDiv(t-i*w, q), 0), SlicesPerWindow-1)
}

// Take asks for n hits at now: admitted iff cur + n ≤ L and the previous
// window, weighed by the part of it still inside the sliding window, leaves
// room for them: prev·(S−s) ≤ (L−cur−n)·S.
func (s *SlidingWindowCounterState) Take(l Limit, now time.Time, n uint64) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	before := *s
	weight := uint64(SlicesPerWindow - s.roll(l, w, q, t))
	res, ok := s.decide(l, n, w, q, t, weight)
	if ok {
		s.cur += n
		res = s.admitted(l, w, t, weight, Receipt{At: t})
	}
	s.noteExpiry(before, l, w)
	return res
}

// Charge records n hits at now, up to L + D in the current window; the part
// above L becomes debt. It reports what a check would report after it.
func (s *SlidingWindowCounterState) Charge(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, true)
}

// Record records n hits at now, up to L + D in the current window, as
// Charge does, but owes nothing: they weigh as every hit of the window does,
// in it and in the next. It reports what a check would report after it.
func (s *SlidingWindowCounterState) Record(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, false)
}

// charge is Charge when debt is set, else Record.
func (s *SlidingWindowCounterState) charge(l Limit, now time.Time, n uint64, debt bool) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	before := *s
	weight := uint64(SlicesPerWindow - s.roll(l, w, q, t))
	_, within := s.decide(l, n, w, q, t, weight)
	if debt {
		s.cur, s.debt = charged(s.cur, s.debt, n, l)
	} else {
		s.cur, _ = charged(s.cur, s.debt, n, l)
	}
	res, ok := s.decide(l, 0, w, q, t, weight)
	if ok {
		res = s.admitted(l, w, t, weight, Receipt{})
	}
	res.Allowed = within
	s.noteExpiry(before, l, w)
	return res
}

// decide reports whether n hits fit now, and when they do not, the Result
// of their denial. It changes nothing.
func (s *SlidingWindowCounterState) decide(l Limit, n uint64, w, q, t int64, weight uint64) (Result, bool) {
	L := l.Requests
	const S = SlicesPerWindow
	switch {
	case n > L:
		return Result{Remaining: s.remaining(L, weight), ResetAfter: micros(w)}, false
	case s.cur+n <= L && s.prev*weight <= (L-s.cur-n)*S:
		return Result{}, true
	}
	// Denied: wait for the first slice boundary at which the estimate admits
	// n. When cur leaves room, that is in this window, once enough of prev
	// has slid out (prev > 0 here, or the request would fit). Otherwise
	// it is in a later window.
	var at int64
	if s.cur+n <= L {
		at = s.window*w + int64(S-(L-s.cur-n)*S/s.prev)*q
	} else {
		at = s.retry(L, n, w, q)
	}
	return Result{Remaining: s.remaining(L, weight), ResetAfter: micros(at - t)}, false
}

// retry returns when a take of n ≤ L hits is next admitted, cur + n > L: in
// the first window i + m whose count, max(0, e − (m−1)·L), leaves room for
// n, at the first slice at which the previous window, weighed, leaves room
// too (slice S meaning the start of window i + m + 1).
func (s *SlidingWindowCounterState) retry(L, n uint64, w, q int64) int64 {
	const S = SlicesPerWindow
	m, prev := uint64(1), s.cur-s.debt
	if s.debt+n > L {
		// e > 0 here, so L > 0; window i + m − 1 started at
		// max(0, e − (m−2)·L) > L − n, and kept at most L of it.
		m += ceilDiv(s.debt+n-L, L)
		prev = min(L, paidDown(s.debt, m-2, L))
	}
	cur := paidDown(s.debt, m-1, L)
	return (s.window+int64(m))*w + int64(S-(L-cur-n)*S/prev)*q
}

// Refund gives n hits back at now. With a receipt it subtracts from the
// count of the window the receipt's Take fell in, when that is the current
// or the previous window, and the receipt names no other epoch than the
// state's. With the zero Receipt it subtracts from cur, then what cur
// cannot cover from prev: the newest hits first. What cur keeps beyond L
// stays debt.
func (s *SlidingWindowCounterState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	w, q, t := l.WindowMicros(), l.SliceMicros(), now.UnixMicro()
	before := *s
	weight := uint64(SlicesPerWindow - s.roll(l, w, q, t))
	switch {
	case r.Epoch != 0 && r.Epoch != s.epoch:
	case noReceipt(r):
		fromCur := min(n, s.cur)
		s.cur -= fromCur
		s.prev -= min(n-fromCur, s.prev)
	case floorDiv(r.At, w) == s.window:
		s.cur -= min(n, s.cur)
	case floorDiv(r.At, w) == s.window-1:
		s.prev -= min(n, s.prev)
	}
	s.debt = min(s.debt, excess(s.cur, l.Requests))
	res := s.admitted(l, w, t, weight, Receipt{})
	s.noteExpiry(before, l, w)
	return res
}

// Lease is Take: a lease counts in the window it was taken in, as a take
// does, and ends with it (its holder sees to that), so the hold changes
// nothing. Its receipt names the state's epoch, the time of its first
// lease.
func (s *SlidingWindowCounterState) Lease(l Limit, now time.Time, n uint64, _ time.Duration) Result {
	res := s.Take(l, now, n)
	if res.Allowed {
		if s.epoch == 0 {
			s.epoch = max(now.UnixMicro(), 1)
		}
		res.Receipt.Epoch = s.epoch
	}
	return res
}

// Settle gives back, as a refund by its receipt does, what each lease that
// closes did not serve, when its receipt names the state's epoch.
func (s *SlidingWindowCounterState) Settle(l Limit, now time.Time, leases []Lease) {
	s.Refund(l, now, 0, Receipt{})
	for i := range leases {
		if ls := &leases[i]; ls.Close && s.epoch != 0 && ls.Receipt.Epoch == s.epoch {
			s.Refund(l, now, ls.unused(), ls.Receipt)
		}
	}
}

// Clone returns a copy of the state.
func (s *SlidingWindowCounterState) Clone() State {
	c := *s
	return &c
}

// SlidingWindowCounterStateOf returns the state a store keeps of a limit
// that owes nothing: its window, the counts of that window and the one
// before, and its epoch.
func SlidingWindowCounterStateOf(window int64, cur, prev uint64, epoch int64) *SlidingWindowCounterState {
	return &SlidingWindowCounterState{window: window, cur: cur, prev: prev, epoch: epoch}
}

// Expiry returns when both counts have left the sliding window: the end of
// the next window while cur > 0 and nothing is owed, the end of the window
// after the last one the debt reaches while it is (as computed at the
// state's last change), the end of the current one while only prev is
// non-zero, and the start of the current one when both are zero.
func (s *SlidingWindowCounterState) Expiry(l Limit) time.Time {
	w := l.WindowMicros()
	switch {
	case s.debt > 0:
		return time.UnixMicro(s.drop)
	case s.cur > 0:
		return time.UnixMicro((s.window + 2) * w)
	case s.prev > 0:
		return time.UnixMicro((s.window + 1) * w)
	}
	return time.UnixMicro(s.window * w)
}

// noteExpiry records, when an operation changed the state, when it behaves as a
// new one while it owes a debt: at (w + 2 + ⌈e/L⌉)·W.
func (s *SlidingWindowCounterState) noteExpiry(before SlidingWindowCounterState, l Limit, w int64) {
	if s.window == before.window && s.cur == before.cur && s.prev == before.prev && s.debt == before.debt {
		return
	}
	s.drop = 0
	if s.debt > 0 {
		s.drop = s.replenished(l, w)
	}
}

// replenished returns when cur has left the sliding window, cur > 0: the
// end of the window after the last one the debt reaches.
func (s *SlidingWindowCounterState) replenished(l Limit, w int64) int64 {
	return (s.window + 2 + windowsOwed(s.debt, l.Requests)) * w
}

func (s *SlidingWindowCounterState) admitted(l Limit, w, t int64, weight uint64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(l.Requests, weight), Receipt: r}
	switch {
	case s.cur > 0:
		res.ResetAfter = micros(s.replenished(l, w) - t)
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

// counterLifetime is Limit.Lifetime of a sliding_window_counter: 2W, since
// its previous window still weighs.
func counterLifetime(l Limit) time.Duration { return 2 * l.Window }
