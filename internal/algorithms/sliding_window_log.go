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
	return s.take(l, now.UnixMicro(), n, HoldMicros(hold))
}

// take asks for n hits at t, to be logged at t + hold.
func (s *SlidingWindowLogState) take(l Limit, t int64, n uint64, hold int64) Result {
	w := l.WindowMicros()
	s.begin(t, w)
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
	s.begin(t, w)
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
// newest n entries logged by now. Entries logged after now are leases',
// which may serve them after the refund: removing one would let a hit
// served later go uncounted.
func (s *SlidingWindowLogState) Refund(l Limit, now time.Time, n uint64, r Receipt) Result {
	w, t := l.WindowMicros(), now.UnixMicro()
	s.begin(t, w)
	if noReceipt(r) {
		s.removeNewest(n, t)
	} else {
		s.removeRange(r.At, r.Seq, n)
	}
	return s.admitted(l, w, t, Receipt{})
}

// Settle settles leases whose receipts name their entries (r.At, r.Seq …
// r.Seq+Size−1), logged at their ends: the entries each served since the
// last settlement (by sequence number) move to the times they were served
// at, and a lease that closes removes the others. Only entries still logged
// at r.At move or go, so that a settlement of a lease the log lost, or
// settled already, changes nothing. An entry served at a time that has left
// the window is dropped.
func (s *SlidingWindowLogState) Settle(l Limit, now time.Time, leases []Lease) {
	w, t := l.WindowMicros(), now.UnixMicro()
	s.begin(t, w)
	for i := range leases {
		ls := &leases[i]
		r := ls.Receipt
		var move []logRun
		for _, sv := range ls.Served {
			from, to := max(sv.Seq, r.Seq), min(sv.Seq+sv.N, r.Seq+ls.Size)
			if from >= to {
				continue
			}
			for _, m := range s.extract(r.At, from, to-from) {
				if sv.At > t-w {
					m.ts = sv.At
					move = append(move, m)
				}
			}
		}
		if ls.Close {
			s.extract(r.At, r.Seq, ls.Size)
		}
		for _, m := range move {
			s.insert(m)
		}
	}
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

// begin starts an operation at t: the entries with ts ≤ t − w leave, and a
// log left empty is a new one, whose sequence numbers start again at t (at
// least 0). Sequence numbers grow slower than the clock (a log admits fewer
// than 10^6 hits a second), so a new log's never meet those of the log it
// replaces, and a receipt of the lost one names none of its entries.
func (s *SlidingWindowLogState) begin(t, w int64) {
	s.expire(t - w)
	if s.count == 0 {
		s.seq = uint64(max(t, 0))
	}
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

// removeNewest removes the newest n entries logged at or before t.
func (s *SlidingWindowLogState) removeNewest(n uint64, t int64) {
	i := sort.Search(len(s.runs), func(j int) bool { return s.runs[j].ts > t })
	for n > 0 && i > 0 {
		last := &s.runs[i-1]
		if last.n > n {
			last.n -= n
			s.count -= n
			return
		}
		n -= last.n
		s.count -= last.n
		s.runs = slices.Delete(s.runs, i-1, i)
		i--
	}
}

// removeRange removes the entries (ts, seq) with seq in [first, first+n).
func (s *SlidingWindowLogState) removeRange(ts int64, first, n uint64) { s.extract(ts, first, n) }

// extract removes the entries (ts, seq) with seq in [first, first+n) and
// returns them, as runs in order of sequence number.
func (s *SlidingWindowLogState) extract(ts int64, first, n uint64) []logRun {
	end := uint64(math.MaxUint64)
	if n < end-first {
		end = first + n
	}
	var out []logRun
	// The runs of one timestamp are ordered by sequence number and disjoint.
	lo := sort.Search(len(s.runs), func(j int) bool {
		r := s.runs[j]
		return r.ts > ts || r.ts == ts && r.end() > first
	})
	kept, j := lo, lo
	for ; j < len(s.runs) && s.runs[j].ts == ts && s.runs[j].seq < end; j++ {
		r := s.runs[j]
		lo, hi := max(r.seq, first), min(r.end(), end)
		out = append(out, logRun{ts: ts, seq: lo, n: hi - lo})
		s.count -= hi - lo
		if r.seq < first && r.end() > end {
			// The range lies inside this run: split it around the range.
			s.runs[j].n = first - r.seq
			s.runs = slices.Insert(s.runs, j+1, logRun{ts: ts, seq: end, n: r.end() - end})
			return out
		}
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
	return out
}

// insert logs run m, whose sequence numbers were issued already, in order
// of time then sequence number, joined to a run it continues.
func (s *SlidingWindowLogState) insert(m logRun) {
	s.count += m.n
	i := sort.Search(len(s.runs), func(j int) bool {
		r := s.runs[j]
		return r.ts > m.ts || r.ts == m.ts && r.seq > m.seq
	})
	if i > 0 && s.runs[i-1].ts == m.ts && s.runs[i-1].end() == m.seq {
		s.runs[i-1].n += m.n
		if i < len(s.runs) && s.runs[i].ts == m.ts && s.runs[i].seq == s.runs[i-1].end() {
			s.runs[i-1].n += s.runs[i].n
			s.runs = slices.Delete(s.runs, i, i+1)
		}
		return
	}
	if i < len(s.runs) && s.runs[i].ts == m.ts && s.runs[i].seq == m.end() {
		s.runs[i].seq, s.runs[i].n = m.seq, s.runs[i].n+m.n
		return
	}
	s.runs = slices.Insert(s.runs, i, m)
}

// Clone returns a copy of the log.
func (s *SlidingWindowLogState) Clone() State {
	c := *s
	c.runs = slices.Clone(s.runs)
	return &c
}

// LogRun is a run of a sliding window log's entries: N hits logged at At
// (µs) with the sequence numbers Seq … Seq+N−1.
type LogRun struct {
	At  int64
	Seq uint64
	N   uint64
}

// SlidingWindowLogStateOf returns the log a store keeps: its runs, in order
// of time then sequence number, and the last sequence number issued.
func SlidingWindowLogStateOf(runs []LogRun, seq uint64) *SlidingWindowLogState {
	s := &SlidingWindowLogState{seq: seq}
	for _, r := range runs {
		if r.N > 0 {
			s.insert(logRun{ts: r.At, seq: r.Seq, n: r.N})
		}
	}
	return s
}

// logLifetime is Limit.Lifetime of a sliding_window_log: W, after which its
// newest entry has left the window.
func logLifetime(l Limit) time.Duration { return l.Window }

// logDebt is Limit.MaxDebt of a sliding_window_log: L, since it keeps one
// entry per hit and never holds more than 2L of them.
func logDebt(l Limit) uint64 { return l.Requests }
