package algorithms

import (
	"math"
	"time"
)

// ServedSlot returns the slots in which a lease of l held for a lease time
// tau records the times it served its hits (Lease.Served): a hit served at t
// is recorded at the end of its slot, no earlier than t and less than a slot
// after. A log logs served hits at those times, so that a lease's hits take
// no more members than its time has slots: a thousandth of the window or an
// eighth of the lease time, whichever is shorter (1ms for a window of a
// second, 6.25ms at a lease time of 50ms for a minute or longer). The other
// algorithms record them to the microsecond: a bucket's settlement needs
// their slices, and a window only their number.
func ServedSlot(l Limit, tau time.Duration) time.Duration {
	if l.Algorithm.spec().EntryPerHit {
		return max(min(l.Window/1000, tau/8), time.Microsecond).Truncate(time.Microsecond)
	}
	return time.Microsecond
}

// CompactServed returns the runs served (in order of time) as few runs as
// a settlement of a lease of l needs to give back what all of them would:
// a window needs only their number; a log needs every run (its members);
// a bucket needs the runs at which what was served before them, less the
// refill of the slices up to them, is lower than at every later run
// (TokenBucketState.reclaim takes the least of those), the hits of the others
// moved to the run kept before them. The runs from recent on (µs) are kept
// as they are: the backend may settle them before their slices start. It
// keeps at most max runs: beyond them, the earliest go into the next, which
// gives back no more than they would. It does not change served.
func CompactServed(l Limit, served []Served, recent int64, max int) []Served {
	if len(served) <= 1 {
		return served
	}
	switch spec := l.Algorithm.spec(); {
	case spec.Windowed:
		var n uint64
		for _, s := range served {
			n += s.N
		}
		return []Served{{At: served[len(served)-1].At, Seq: served[0].Seq, N: n}}
	case spec.Burst:
		served = bucketStaircase(l, served, recent)
	}
	if len(served) > max {
		// The earliest go into the run after them, in a copy: served is
		// the caller's.
		extra := len(served) - max
		first := served[extra]
		for _, s := range served[:extra] {
			first.N += s.N
		}
		first.Seq = served[0].Seq
		served = append([]Served{first}, served[extra+1:]...)
	}
	return served
}

// bucketStaircase keeps, of the runs before recent, those at which
// v = (tokens served before the run)·S − L·(its slice) is below v at every
// later run before recent, and the first; the hits of the others go to the
// run kept before them, which leaves the tokens served before every kept run,
// and so TokenBucketState.reclaim, as they were.
func bucketStaircase(l Limit, served []Served, recent int64) []Served {
	q, L := l.SliceMicros(), int64(l.Requests)
	old := 0
	for old < len(served) && served[old].At < recent {
		old++
	}
	if old <= 1 {
		return served
	}
	// v[i] for the old runs, then which of them are kept: from the last
	// one back, those below every v after them.
	// v is formed from the first run's slice on: a difference of slices
	// so large that L of each passes 2^53 (more than a bucket ever holds)
	// makes v as low as it goes.
	v := make([]int64, old)
	var before int64
	b0 := floorDiv(served[0].At, q)
	for i := range old {
		d := floorDiv(served[i].At, q) - b0
		if L > 0 && d >= (1<<53)/L {
			v[i] = math.MinInt64 / 2
		} else {
			v[i] = before*SlicesPerWindow - L*d
		}
		before += int64(served[i].N)
	}
	keep := make([]bool, old)
	keep[0] = true
	low := v[old-1]
	keep[old-1] = true
	for i := old - 2; i > 0; i-- {
		if v[i] < low {
			keep[i], low = true, v[i]
		}
	}
	out := make([]Served, 0, old)
	for i := range old {
		if keep[i] {
			out = append(out, served[i])
		} else {
			out[len(out)-1].N += served[i].N
		}
	}
	return append(out, served[old:]...)
}
