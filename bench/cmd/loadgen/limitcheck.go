package main

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// span is when an admitted answer was decided, as its caller can know it:
// after the call was sent and before its answer was received, in
// nanoseconds since the epoch (the wall clock, which Redis's TIME reads
// too). The server decided at some instant of [Send, Recv].
type span struct {
	Send, Recv int64
}

// The checks of a binding run, by what the algorithm promises.
const (
	// checkWindows: at most L in each window of W aligned to the epoch (the
	// fixed window, and the sliding window counter, which never lets its
	// current window's count pass L).
	checkWindows = "windows"
	// checkSliding: at most L in any W (the sliding window log).
	checkSliding = "sliding"
	// checkBucket: at most burst + rate·t admitted in [0, t], the bucket
	// starting full at 0 (the token bucket).
	checkBucket = "bucket"
)

// clockGrain is the resolution of Redis's TIME, in which the scripts and the
// fixed window place a decision: a decision at real time t is made at t
// rounded down to it, which can bring two decisions up to one grain closer
// than they were. The sliding and bucket checks allow for it.
const clockGrain = 1000 // ns

// limitCheck is what a check of the admitted answers of a binding run
// found. Only an excess that no decision times within the answers' spans
// could avoid is proven; the figures say how close the run came both ways.
type limitCheck struct {
	// Kind is the check: checkWindows, checkSliding or checkBucket.
	Kind string `json:"kind"`
	// Certain is the most admissions one window (a W anywhere, for the log)
	// certainly holds: those whose whole span lies in it. For the bucket, the
	// most that the admissions received by t exceed burst + rate·t.
	Certain float64 `json:"certain"`
	// Loose is, for the windows, the least over every assignment of the
	// answers that straddle a boundary to a window they overlap of the most
	// in one window; for the log, the most answers that overlap one W; for the
	// bucket, the most that the admissions sent by t exceed burst + rate·t.
	Loose float64 `json:"loose"`
	// Straddling counts the answers whose span crosses a window's boundary
	// (the windows' check).
	Straddling int `json:"straddling,omitempty"`
	// Above reports a proven excess: for the windows, no assignment keeps
	// every window within L; for the log, a W certainly holds more than L;
	// for the bucket, the admissions received by some t exceed
	// burst + rate·t.
	Above bool `json:"above"`
}

// checkFixedWindows checks that no window of length w (ns) aligned to the
// epoch holds more than limit of the decisions in spans. An answer counts
// in a window only if its whole span lies in it; those that straddle a
// boundary are assigned to one of the windows they overlap so that the
// most in one window is least (spans are short, so they overlap two
// windows, but any number is handled), and the excess is proven only when
// that least is above limit.
func checkFixedWindows(spans []span, w int64, limit uint64) limitCheck {
	c := limitCheck{Kind: checkWindows}
	if len(spans) == 0 {
		return c
	}
	items := make([]windowRange, len(spans))
	certain := map[int64]int{}
	for i, s := range spans {
		it := windowRange{first: floorDiv(s.Send, w), last: floorDiv(s.Recv, w)}
		items[i] = it
		if it.first == it.last {
			certain[it.first]++
		} else {
			c.Straddling++
		}
	}
	most := 0
	for _, n := range certain {
		most = max(most, n)
	}
	c.Certain = float64(most)
	slices.SortFunc(items, func(a, b windowRange) int {
		return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.last, b.last))
	})
	// The least capacity that an assignment fits in lies in
	// [most, len(items)]: search it.
	lo, hi := most, len(items)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if assignable(items, mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	c.Loose = float64(lo)
	c.Above = uint64(lo) > limit
	return c
}

// windowRange is the windows, first to last, that an answer's span
// overlaps.
type windowRange struct {
	first, last int64
}

// assignable reports whether items (sorted by first window) can each be
// assigned a window of their range with at most capacity in each. It fills
// the windows in order, each with the items whose range ends first (an
// earliest-deadline-first schedule, which fits whenever any assignment
// does).
func assignable(items []windowRange, capacity int) bool {
	var due int64Heap
	i := 0
	for win := items[0].first; i < len(items) || due.Len() > 0; win++ {
		if due.Len() == 0 {
			win = items[i].first
		}
		for ; i < len(items) && items[i].first == win; i++ {
			heap.Push(&due, items[i].last)
		}
		for range capacity {
			if due.Len() == 0 {
				break
			}
			heap.Pop(&due)
		}
		if due.Len() > 0 && due[0] <= win {
			return false // an item whose range ends here is left
		}
	}
	return true
}

// checkSlidingWindows checks that no interval of length w (ns) holds more
// than limit of the decisions in spans, as the sliding window log promises:
// for every decision, the decisions in the W up to it, itself included. A
// W is proven to hold more only when more than limit spans lie wholly in it,
// less clockGrain (see clockGrain).
func checkSlidingWindows(spans []span, w int64, limit uint64) limitCheck {
	c := limitCheck{Kind: checkSliding}
	n := len(spans)
	if n == 0 {
		return c
	}
	bySend := slices.Clone(spans)
	slices.SortFunc(bySend, func(a, b span) int { return cmp.Compare(a.Send, b.Send) })
	var longest int64
	for _, s := range bySend {
		longest = max(longest, s.Recv-s.Send)
	}
	// Certain: windows [a, a+inner) starting at each send; the spans in one
	// are those sent from a on and received before its end.
	inner := w - clockGrain
	most, hi := 0, 0
	for lo := range bySend {
		a := bySend[lo].Send
		if lo > 0 && bySend[lo-1].Send == a {
			continue // the window of the first span sent at a counted these
		}
		end := a + inner
		for hi < n && bySend[hi].Send < end {
			hi++
		}
		inside := hi - lo
		// Only spans sent within longest of the end can reach past it.
		for j := hi - 1; j >= lo && bySend[j].Send >= end-longest; j-- {
			if bySend[j].Recv >= end {
				inside--
			}
		}
		most = max(most, inside)
	}
	c.Certain = float64(most)
	c.Above = uint64(most) > limit
	// Loose: windows [a, a+w) starting at each receipt; the spans that
	// overlap one are those received from a on, less those sent from its end
	// on (all of which are received after a).
	sends, recvs := make([]int64, n), make([]int64, n)
	for i, s := range spans {
		sends[i], recvs[i] = s.Send, s.Recv
	}
	slices.Sort(sends)
	slices.Sort(recvs)
	loose := 0
	for i, a := range recvs {
		if i > 0 && recvs[i-1] == a {
			continue
		}
		from, _ := slices.BinarySearch(sends, a+w)
		loose = max(loose, (n-i)-(n-from)) // i spans were received before a
	}
	c.Loose = float64(loose)
	return c
}

// checkTokenBucket checks that the decisions in spans never took more than
// a bucket of burst refilled with rate tokens per w (ns) gives, starting
// full: for every t, at most burst + rate·(t−t0)/w admitted in [t0, t],
// where t0 is the first send (no decision was earlier, so the bucket
// started full no later). An answer was certainly admitted by t when it was
// received by t; the refill is allowed one clockGrain more (see
// clockGrain).
func checkTokenBucket(spans []span, burst, rate uint64, w int64) limitCheck {
	c := limitCheck{Kind: checkBucket}
	n := len(spans)
	if n == 0 {
		return c
	}
	sends, recvs := make([]int64, n), make([]int64, n)
	for i, s := range spans {
		sends[i], recvs[i] = s.Send, s.Recv
	}
	slices.Sort(sends)
	slices.Sort(recvs)
	t0 := sends[0]
	allowed := func(t int64) float64 {
		return float64(burst) + float64(rate)*float64(t-t0+clockGrain)/float64(w)
	}
	excess := func(times []int64) float64 {
		most := math.Inf(-1)
		for k, t := range times {
			most = max(most, float64(k+1)-allowed(t))
		}
		return most
	}
	c.Certain = excess(recvs)
	c.Loose = excess(sends)
	c.Above = c.Certain > 0
	return c
}

// floorDiv returns a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// int64Heap is a min-heap of int64 for container/heap.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
