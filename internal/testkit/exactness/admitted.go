package exactness

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// CheckAdmitted reports the intervals in which the server admitted more
// hits than the limit allows there. It counts only the admitted calls
// (takes answered OK, charges answered OK) wholly inside an interval, Sent
// at or after its start and Received before its end, so what it counts is a
// lower bound on what the server admitted there: timing noise may hide an
// excess, never invent one. Per algorithm, with L hits per window W:
//
//   - fixed_window: at most L per window of the limit (epoch-aligned, or of
//     the calendar);
//   - sliding_window_log: at most L in any [a, a+W), a the Sent of an
//     admitted call;
//   - sliding_window_counter: at most L per window, as fixed_window, and
//     at most 2L in any [a, a+W): it is approximate by design;
//   - token_bucket (capacity B, refilled L per W in slices of W/10^6): at
//     most B + the refill of [a, b] in any [a, b], a a Sent and b a
//     Received.
//
// The hits of refunds that may have been decided in an interval (Sent
// before its end, Received after its start) are added to its bound. Where a
// reload's window overlaps an interval, the larger numbers bound it. Calls
// on both sides of a Loss are never counted together: an interval holds
// only calls Received before the loss started or Sent once it and
// tol.Hold after it have passed, so forgetting is allowed, admitting more
// after it is not. Only tol.Hold is read.
func CheckAdmitted(h History, tol Tolerance) []Violation {
	_, _, hold := tol.micros()
	var out []Violation
	for _, tl := range h.timelines() {
		out = append(out, tl.checkAdmitted(hold)...)
	}
	return out
}

// interval is an interval counted, and what it holds.
type interval struct {
	from, to     int64 // [from, to]: to is the last microsecond counted
	count, bound int64
	excess       int64
	detail       string
	seg          []int // the calls it may count
}

func (tl *timeline) checkAdmitted(hold int64) []Violation {
	var found []interval
	for _, seg := range tl.segments(hold) {
		var ivs []interval
		switch tl.initial.Algorithm {
		case algorithms.FixedWindow:
			ivs = tl.perWindow(seg)
		case algorithms.SlidingWindowCounter:
			ivs = append(tl.perWindow(seg), disjoint(tl.sliding(seg, 2))...)
		case algorithms.SlidingWindowLog:
			ivs = disjoint(tl.sliding(seg, 1))
		case algorithms.TokenBucket:
			ivs = disjoint(tl.bucket(seg))
		}
		for i := range ivs {
			ivs[i].seg = seg
		}
		found = append(found, ivs...)
	}
	var out []Violation
	for _, iv := range found {
		v := Violation{Check: Admitted, Limit: tl.name, From: time.UnixMicro(iv.from), To: time.UnixMicro(iv.to),
			Got: iv.count, High: iv.bound, Excess: iv.excess, Detail: iv.detail}
		for _, i := range iv.seg {
			if tl.sent[i] >= iv.from && tl.recv[i] <= iv.to {
				v.Calls = append(v.Calls, tl.calls[i])
			}
		}
		out = append(out, v)
	}
	return out
}

// segments returns, per stretch of the history between losses, the
// indices of the admitted calls wholly inside it: Sent once the loss
// before it and hold after it have passed, Received before the loss after
// it started.
func (tl *timeline) segments(hold int64) [][]int {
	segs := make([][]int, len(tl.losses)+1)
	for i := range tl.calls {
		if !tl.calls[i].admitted() {
			continue
		}
		for k := range segs {
			after := k == 0 || tl.sent[i] >= tl.losses[k-1].to+hold
			before := k == len(tl.losses) || tl.recv[i] <= tl.losses[k].from
			if after && before {
				segs[k] = append(segs[k], i)
				break
			}
		}
	}
	return segs
}

// refunded returns the hits of the refunds that may have been decided in
// [from, to].
func (tl *timeline) refunded(from, to int64) int64 {
	var n int64
	for i := range tl.calls {
		if tl.sent[i] > to {
			break
		}
		if tl.calls[i].refunds() && tl.recv[i] >= from {
			n += int64(tl.calls[i].Hits)
		}
	}
	return n
}

// perWindow counts the admitted calls of seg per window of the limit.
func (tl *timeline) perWindow(seg []int) []interval {
	l := tl.initial.Limit
	counts := map[int64]int64{}
	var order []int64
	for _, i := range seg {
		w := l.WindowIndex(tl.calls[i].Sent)
		if l.WindowIndex(tl.calls[i].Received) != w {
			continue // it may have been decided in the next window
		}
		if _, ok := counts[w]; !ok {
			order = append(order, w)
		}
		counts[w] += int64(tl.calls[i].Hits)
	}
	var out []interval
	for _, w := range order {
		from, to := micros(l.WindowStart(w)), micros(l.WindowStart(w+1))-1
		most := tl.mostDuring(from, to)
		back := tl.refunded(from, to)
		bound := int64(most.Requests) + back
		if counts[w] > bound {
			out = append(out, interval{from: from, to: to, count: counts[w], bound: bound, excess: counts[w] - bound,
				detail: fmt.Sprintf("%d hits admitted in one window, bound %d (L %d per %s + %d refunded)", counts[w], bound, most.Requests, l.Window, back)})
		}
	}
	return out
}

// sliding counts the admitted calls of seg in every [a, a+W), a the Sent
// of one of them, against times L.
func (tl *timeline) sliding(seg []int, times int64) []interval {
	w := tl.initial.WindowMicros()
	var out []interval
	for x, i := range seg {
		a := tl.sent[i]
		end := a + w
		var count int64
		for _, j := range seg[x:] {
			if tl.sent[j] >= end {
				break
			}
			if tl.recv[j] < end {
				count += int64(tl.calls[j].Hits)
			}
		}
		most := tl.mostDuring(a, end-1)
		back := tl.refunded(a, end-1)
		bound := times*int64(most.Requests) + back
		if count > bound {
			what := "L"
			if times != 1 {
				what = fmt.Sprintf("%dL", times)
			}
			out = append(out, interval{from: a, to: end - 1, count: count, bound: bound, excess: count - bound,
				detail: fmt.Sprintf("%d hits admitted within %s, bound %d (%s, L %d + %d refunded)", count, tl.initial.Window, bound, what, most.Requests, back)})
		}
	}
	return out
}

// bucket counts the admitted calls of seg in every [a, b], a the Sent of
// one and b the Received of another, against the burst and the refill of
// [a, b]. For each a it keeps the b of the largest excess.
func (tl *timeline) bucket(seg []int) []interval {
	byRecv := append([]int(nil), seg...)
	sort.SliceStable(byRecv, func(x, y int) bool { return tl.recv[byRecv[x]] < tl.recv[byRecv[y]] })
	var refunds []int
	for i := range tl.calls {
		if tl.calls[i].refunds() {
			refunds = append(refunds, i)
		}
	}
	q := tl.initial.SliceMicros()
	fixed := len(tl.reloads) == 0
	var out []interval
	for _, i := range seg {
		a := tl.sent[i]
		var count int64
		best := interval{excess: 0}
		r := 0
		var back int64
		for _, j := range byRecv {
			b := tl.recv[j]
			if b < a || tl.sent[j] < a {
				continue
			}
			count += int64(tl.calls[j].Hits)
			for r < len(refunds) && tl.sent[refunds[r]] <= b {
				if tl.recv[refunds[r]] >= a {
					back += int64(tl.calls[refunds[r]].Hits)
				}
				r++
			}
			most := tl.initial
			if !fixed {
				most = tl.mostDuring(a, b)
			}
			refill := int64(most.Requests * uint64(b/q-a/q) / algorithms.SlicesPerWindow)
			bound := int64(most.Capacity()) + refill + back
			if ex := count - bound; ex > best.excess {
				best = interval{from: a, to: b, count: count, bound: bound, excess: ex,
					detail: fmt.Sprintf("%d hits admitted, bound %d (burst %d + refill %d at %d per %s + %d refunded)",
						count, bound, most.Capacity(), refill, most.Requests, most.Window, back)}
			}
		}
		if best.excess > 0 {
			out = append(out, best)
		}
	}
	return out
}

// disjoint keeps, of overlapping intervals, the one of the largest
// excess.
func disjoint(ivs []interval) []interval {
	sort.SliceStable(ivs, func(i, j int) bool { return ivs[i].excess > ivs[j].excess })
	var kept []interval
next:
	for _, iv := range ivs {
		for _, k := range kept {
			if iv.from <= k.to && k.from <= iv.to {
				continue next
			}
		}
		kept = append(kept, iv)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].from < kept[j].from })
	return kept
}

// mostDuring returns the highest numbers in force at some time of [a, b]:
// within a reload's window, those before it and those after it both may
// be. What the server admits within an interval depends on no earlier
// numbers: a bucket's level when the interval starts is at most its
// capacity whatever refilled it.
func (tl *timeline) mostDuring(a, b int64) Limit {
	l, most := tl.initial, tl.initial
	most.Requests, most.Burst = 0, 0
	from := int64(math.MinInt64)
	for _, r := range tl.reloads {
		if (span{from, micros(r.After)}).overlaps(span{a, b}) {
			most = combine(most, l, true)
		}
		l, from = r.To, micros(r.Before)
	}
	if (span{from, math.MaxInt64}).overlaps(span{a, b}) {
		most = combine(most, l, true)
	}
	return most
}
