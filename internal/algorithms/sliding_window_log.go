package algorithms

import (
	"math"
	"slices"
	"sort"
	"time"
)

// SlidingWindowLogState is the state of one sliding_window_log limit: one
// entry (ts, seq) per admitted hit, ordered by ts then seq, and the last
// sequence number issued. Hits a Take adds in one microsecond with
// consecutive sequence numbers are kept as one run, so a Take of n hits costs
// one run however large n is. The zero value is a new state. A
// SlidingWindowLogState is not safe for concurrent use.
type SlidingWindowLogState struct {
	// runs is a deque, oldest first: expired runs leave from the front, new
	// ones join at the back, in the middle only when later entries are
	// logged already (a lease's, or before a clock that went back).
	runs  []logRun
	count uint64 // entries in runs
	seq   uint64 // last sequence number issued
}

// logRun is n entries (ts, seq), (ts, seq+1) … (ts, seq+n−1).
type logRun struct {
	ts  int64
	seq uint64
	n   uint64
}

func (r logRun) end() uint64 { return r.seq + r.n }

// Take asks for n hits at now: admitted iff c + n ≤ L once the entries with
// ts ≤ now − W are dropped; then n entries (now, seq+1 … seq+n) are added.
func (s *SlidingWindowLogState) Take(l Limit, now time.Time, n uint64) Result {
	return s.take(l, now.UnixMicro(), n, 0)
}

// Lease asks for n hits at now as Take does, for a lease that serves them
// until now + hold: the entries (now + hold, seq+1 … seq+n) are logged
// then, so none leaves the window before a hit served from the lease would.
// Every entry in (now − W, ∞) counts, those of other leases too; the
// receipt's time is now + hold, so that a refund by it removes exactly
// these entries.
func (s *SlidingWindowLogState) Lease(l Limit, now time.Time, n uint64, hold time.Duration) Result {
	return s.take(l, now.UnixMicro(), n, holdMicros(hold))
}

// take asks for n hits at t, to be logged at t + hold.
func (s *SlidingWindowLogState) take(l Limit, t int64, n uint64, hold int64) Result {
	w := l.WindowMicros()
	s.expire(t - w)
	switch {
	case n > l.Requests:
		return Result{Remaining: s.remaining(l), ResetAfter: micros(w)}
	case s.count+n > l.Requests:
		k := s.count + n - l.Requests
		return Result{Remaining: s.remaining(l), ResetAfter: micros(s.kth(k) + w - t)}
	}
	r := Receipt{At: t + hold, Seq: s.seq + 1}
	if n > 0 {
		s.add(t+hold, n)
	}
	return s.admitted(l, w, t, r)
}

// Charge logs n entries at now, as a take would, even past L, but never more
// than the log can hold: at most L + D = 2L entries. It reports what a check
// would report after it.
func (s *SlidingWindowLogState) Charge(l Limit, now time.Time, n uint64) Result {
	w, t := l.WindowMicros(), now.UnixMicro()
	s.expire(t - w)
	within := n <= l.Requests && s.count+n <= l.Requests
	if most := l.Requests + l.MaxDebt(); s.count < most && n > 0 {
		s.add(t, min(n, most-s.count))
	}
	var res Result
	if s.count <= l.Requests {
		res = s.admitted(l, w, t, Receipt{})
	} else {
		res = Result{ResetAfter: micros(s.kth(s.count-l.Requests) + w - t)}
	}
	res.Allowed = within
	return res
}

// Record is Charge: the entries a charge logs leave the window W after it,
// so a log never owes beyond its window.
func (s *SlidingWindowLogState) Record(l Limit, now time.Time, n uint64) Result {
	return s.Charge(l, now, n)
}

// Refund gives n hits back at now: with a receipt, the entries (r.At,
// r.Seq … r.Seq+n−1) that are still logged; with the zero Receipt, the
// newest n entries.
func (s *SlidingWindowLogState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	w, t := l.WindowMicros(), now.UnixMicro()
	s.expire(t - w)
	if noReceipt(r) {
		s.removeNewest(n)
	} else {
		s.removeRange(r.At, r.Seq, n)
	}
	return s.admitted(l, w, t, Receipt{})
}

// Release is Refund: the receipt of a lease names its entries where they
// were logged.
func (s *SlidingWindowLogState) Release(l Limit, now time.Time, n uint64, r Receipt, _ time.Duration) Result {
	return s.Refund(l, now, n, r)
}

// Expiry returns when the newest entry leaves the window, or the zero Time
// when the log is empty.
func (s *SlidingWindowLogState) Expiry(l Limit) time.Time {
	if len(s.runs) == 0 {
		return time.Time{}
	}
	return time.UnixMicro(s.runs[len(s.runs)-1].ts + l.WindowMicros())
}

func (s *SlidingWindowLogState) admitted(l Limit, w, t int64, r Receipt) Result {
	res := Result{Allowed: true, Remaining: s.remaining(l), Receipt: r}
	if len(s.runs) > 0 {
		res.ResetAfter = micros(s.runs[len(s.runs)-1].ts + w - t)
	}
	return res
}

func (s *SlidingWindowLogState) remaining(l Limit) uint64 {
	if s.count >= l.Requests {
		return 0
	}
	return l.Requests - s.count
}

// expire drops the entries with ts ≤ cutoff.
func (s *SlidingWindowLogState) expire(cutoff int64) {
	k := 0
	for k < len(s.runs) && s.runs[k].ts <= cutoff {
		s.count -= s.runs[k].n
		k++
	}
	if k == len(s.runs) {
		s.runs = s.runs[:0]
		return
	}
	s.runs = s.runs[k:]
}

// kth returns the timestamp of the k-th oldest entry, 1 ≤ k ≤ count.
func (s *SlidingWindowLogState) kth(k uint64) int64 {
	for _, r := range s.runs {
		if k <= r.n {
			return r.ts
		}
		k -= r.n
	}
	return s.runs[len(s.runs)-1].ts
}

// add logs n > 0 entries at ts with the next sequence numbers.
func (s *SlidingWindowLogState) add(ts int64, n uint64) {
	r := logRun{ts: ts, seq: s.seq + 1, n: n}
	s.seq += n
	s.count += n
	// The new entries follow every entry with ts' ≤ ts: their sequence
	// numbers are the largest. Only entries logged later than ts (a
	// lease's, logged at its end, or before a clock that went back) put
	// them before the end.
	i := len(s.runs)
	if i > 0 && s.runs[i-1].ts > ts {
		i = sort.Search(len(s.runs), func(j int) bool { return s.runs[j].ts > ts })
	}
	if i > 0 && s.runs[i-1].ts == ts && s.runs[i-1].end() == r.seq {
		s.runs[i-1].n += n
		return
	}
	s.runs = slices.Insert(s.runs, i, r)
}

// removeNewest removes the newest n entries.
func (s *SlidingWindowLogState) removeNewest(n uint64) {
	for n > 0 && len(s.runs) > 0 {
		last := &s.runs[len(s.runs)-1]
		if last.n > n {
			last.n -= n
			s.count -= n
			return
		}
		n -= last.n
		s.count -= last.n
		s.runs = s.runs[:len(s.runs)-1]
	}
}

// removeRange removes the entries (ts, seq) with seq in [first, first+n).
func (s *SlidingWindowLogState) removeRange(ts int64, first, n uint64) {
	end := uint64(math.MaxUint64)
	if n < end-first {
		end = first + n
	}
	// The runs of one timestamp are ordered by sequence number and disjoint.
	lo := sort.Search(len(s.runs), func(j int) bool {
		r := s.runs[j]
		return r.ts > ts || r.ts == ts && r.end() > first
	})
	kept, j := lo, lo
	for ; j < len(s.runs) && s.runs[j].ts == ts && s.runs[j].seq < end; j++ {
		r := s.runs[j]
		if r.seq < first && r.end() > end {
			// The range lies inside this run: split it around the range.
			s.count -= end - first
			s.runs[j].n = first - r.seq
			s.runs = slices.Insert(s.runs, j+1, logRun{ts: ts, seq: end, n: r.end() - end})
			return
		}
		s.count -= min(r.end(), end) - max(r.seq, first)
		switch {
		case r.seq < first:
			r.n = first - r.seq
		case r.end() > end:
			r.seq, r.n = end, r.end()-end
		default:
			r.n = 0
		}
		if r.n > 0 {
			s.runs[kept] = r
			kept++
		}
	}
	s.runs = slices.Delete(s.runs, kept, j)
}

// logLifetime is Limit.Lifetime of a sliding_window_log: W, after which its
// newest entry has left the window.
func logLifetime(l Limit) time.Duration { return l.Window }

// logDebt is Limit.MaxDebt of a sliding_window_log: L, since it keeps one
// entry per hit and never holds more than 2L of them.
func logDebt(l Limit) uint64 { return l.Requests }
