package algorithms

import "time"

// FixedWindowState is the state of one fixed_window limit: the index w of the
// window it counts (epoch-aligned, or of the calendar, see Limit.Calendar), the hits c counted in it, and the debt e,
// the part of c that charges recorded beyond the limit, which the windows
// after w pay off. The zero value is a new state. A FixedWindowState is not
// safe for concurrent use.
type FixedWindowState struct {
	window int64
	count  uint64
	debt   uint64
	// drop is when the state behaves as a new one, in µs, as computed at
	// its last change; it is kept only while debt > 0, when it depends on
	// the limit of that change.
	drop int64
	// epoch names the count of window w to its leases' receipts: the time
	// of the window's first lease, 0 before.
	epoch int64
}

// roll lowers the debt to what l allows, then moves the state to window
// max(index(t), w), one window at a time: each new window starts with the
// debt, (c, e) ← (e, max(0, e − L)). A clock that went backwards keeps
// counting in the current window.
func (s *FixedWindowState) roll(l Limit, x windows, t int64) {
	L := l.Requests
	s.debt = min(s.debt, excess(s.count, L), l.MaxDebt())
	switch i := x.index(t); {
	case s.count == 0:
		if i != s.window {
			// Another window's count, which its old leases' settlements
			// do not name.
			s.window, s.epoch = i, 0
		}
	case i > s.window:
		j := uint64(i - s.window)
		s.count, s.debt = paidDown(s.debt, j-1, L), paidDown(s.debt, j, L)
		s.window, s.epoch = i, 0
	}
}

// Take asks for n hits at now: admitted iff c + n ≤ L, after the state has
// moved to the window holding now.
func (s *FixedWindowState) Take(l Limit, now time.Time, n uint64) Result {
	x, t := l.windows(), now.UnixMicro()
	before := *s
	s.roll(l, x, t)
	var res Result
	switch {
	case n > l.Requests:
		res = Result{Remaining: s.remaining(l), ResetAfter: micros(x.w)}
	case s.count+n > l.Requests:
		res = Result{Remaining: s.remaining(l), ResetAfter: micros(s.retry(l, n, x) - t)}
	default:
		s.count += n
		res = s.admitted(l, x, t, Receipt{At: t})
	}
	s.noteExpiry(before, l, x)
	return res
}

// Charge records n hits at now, up to L + D in the window; the part above L
// becomes debt. It reports what a check would report after it.
func (s *FixedWindowState) Charge(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, true)
}

// Record records n hits at now, up to L + D in the window, as Charge does,
// but owes nothing: the count ends with its window. It reports what a check
// would report after it.
func (s *FixedWindowState) Record(l Limit, now time.Time, n uint64) Result {
	return s.charge(l, now, n, false)
}

// charge is Charge when debt is set, else Record.
func (s *FixedWindowState) charge(l Limit, now time.Time, n uint64, debt bool) Result {
	x, t := l.windows(), now.UnixMicro()
	before := *s
	s.roll(l, x, t)
	L := l.Requests
	within := n <= L && s.count+n <= L
	if debt {
		s.count, s.debt = charged(s.count, s.debt, n, l)
	} else {
		s.count, _ = charged(s.count, s.debt, n, l)
	}
	var res Result
	if s.count <= L {
		res = s.admitted(l, x, t, Receipt{})
	} else {
		res = Result{ResetAfter: micros(s.retry(l, 0, x) - t)}
	}
	res.Allowed = within
	s.noteExpiry(before, l, x)
	return res
}

// retry returns when a take of n ≤ L hits is next admitted, c + n > L: the
// start of the first window w + j whose starting count, max(0, e − (j−1)·L),
// leaves room for n.
func (s *FixedWindowState) retry(l Limit, n uint64, x windows) int64 {
	j := uint64(1)
	if L := l.Requests; s.debt+n > L {
		// e > 0 here, so L > 0.
		j += ceilDiv(s.debt+n-L, L)
	}
	return x.start(s.window + int64(j))
}

// Refund gives n hits back at now. With a receipt it subtracts only when the
// receipt's Take fell in the current window, and the receipt names no other
// epoch than the window's count; with the zero Receipt it
// subtracts from the current window. What is left beyond L stays debt.
func (s *FixedWindowState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	x, t := l.windows(), now.UnixMicro()
	before := *s
	s.roll(l, x, t)
	if noReceipt(r) || x.index(r.At) == s.window && (r.Epoch == 0 || r.Epoch == s.epoch) {
		s.count -= min(n, s.count)
		s.debt = min(s.debt, excess(s.count, l.Requests))
	}
	res := s.admitted(l, x, t, Receipt{})
	s.noteExpiry(before, l, x)
	return res
}

// Lease is Take: a lease counts in the window it was taken in, as a take
// does, and ends with it (its holder sees to that), so the hold changes
// nothing. Its receipt names the epoch of the window's count, the time of
// the window's first lease.
func (s *FixedWindowState) Lease(l Limit, now time.Time, n uint64, _ time.Duration) Result {
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
// closes did not serve, when its receipt names the epoch of the window's
// count.
func (s *FixedWindowState) Settle(l Limit, now time.Time, leases []Lease) {
	s.Refund(l, now, 0, Receipt{})
	for i := range leases {
		if ls := &leases[i]; ls.Close && ls.Receipt.Epoch != 0 {
			s.Refund(l, now, ls.unused(), ls.Receipt)
		}
	}
}

// Clone returns a copy of the state.
func (s *FixedWindowState) Clone() State {
	c := *s
	return &c
}

// Expiry returns when the state behaves as a new one: the zero Time when
// nothing is counted, the end of the counted window when nothing is owed,
// and otherwise the end of the last window the debt reaches, as computed
// at the state's last change.
func (s *FixedWindowState) Expiry(l Limit) time.Time {
	switch {
	case s.count == 0:
		return time.Time{}
	case s.debt > 0:
		return time.UnixMicro(s.drop)
	}
	return time.UnixMicro(l.windows().start(s.window + 1))
}

// noteExpiry records, when an operation changed the state, when it behaves as a
// new one: at (w + 1 + ⌈e/L⌉)·W, after the last window the debt reaches.
func (s *FixedWindowState) noteExpiry(before FixedWindowState, l Limit, x windows) {
	if s.window == before.window && s.count == before.count && s.debt == before.debt {
		return
	}
	s.drop = 0
	if s.debt > 0 {
		s.drop = s.replenished(l, x)
	}
}

// replenished returns when the whole limit is available again, c > 0.
func (s *FixedWindowState) replenished(l Limit, x windows) int64 {
	return x.start(s.window + 1 + windowsOwed(s.debt, l.Requests))
}

func (s *FixedWindowState) admitted(l Limit, x windows, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(l), Receipt: r}
	if s.count > 0 {
		res.ResetAfter = micros(s.replenished(l, x) - t)
	}
	return res
}

func (s *FixedWindowState) remaining(l Limit) uint64 {
	if s.count >= l.Requests {
		return 0
	}
	return l.Requests - s.count
}

// fixedWindowLifetime is Limit.Lifetime of a fixed_window: W, or the longest
// of its months or years for a calendar one.
func fixedWindowLifetime(l Limit) time.Duration { return l.windows().longest() }

// FixedWindowStateOf returns the state counting count hits in window, owing
// debt, which behaves as a new one at drop (in µs) while it owes: the
// fields a store keeps, as Fields returns them.
func FixedWindowStateOf(window int64, count, debt uint64, drop int64) FixedWindowState {
	return FixedWindowState{window: window, count: count, debt: debt, drop: drop}
}

// WithEpoch returns s with the epoch of its window's count set to epoch,
// for a store whose counts name their epochs otherwise (see Receipt.Epoch).
func (s FixedWindowState) WithEpoch(epoch int64) *FixedWindowState {
	s.epoch = epoch
	return &s
}

// Fields returns what a store keeps of s: its window, its count, its debt,
// and when it behaves as a new one while it owes (0 when it owes nothing).
func (s *FixedWindowState) Fields() (window int64, count, debt uint64, drop int64) {
	return s.window, s.count, s.debt, s.drop
}
