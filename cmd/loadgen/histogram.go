package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// The histogram's buckets follow HdrHistogram's layout: values below
// histSubBuckets each have a bucket of their own, and every power-of-two range
// above is cut into histSubBuckets/2 buckets of equal width. A bucket is
// therefore never wider than 1/64 of its lower bound, so a quantile read from
// a bucket's midpoint is within 0.8% of the recorded value.
const (
	histSubBits    = 7
	histSubBuckets = 1 << histSubBits   // 128
	histHalf       = histSubBuckets / 2 // 64
	histMaxShift   = 63 - histSubBits   // the shift of the largest int64
	histBuckets    = (histMaxShift + 2) * histHalf
	histNoMin      = int64(math.MaxInt64) // min of an empty histogram
)

// Histogram counts durations in fixed, logarithmically spaced buckets (see
// histSubBits). Record is safe to call from one goroutine while others read
// the histogram with Snapshot or MergeInto; a load generator gives each
// worker its own Histogram and merges them, so no two goroutines ever write
// one. The zero value is not ready for use; call NewHistogram.
type Histogram struct {
	counts []atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Int64 // nanoseconds
	min    atomic.Int64
	max    atomic.Int64
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram {
	h := &Histogram{counts: make([]atomic.Uint64, histBuckets)}
	h.min.Store(histNoMin)
	return h
}

// bucketOf returns the bucket of v ≥ 0.
func bucketOf(v int64) int {
	if v < histSubBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - histSubBits
	return shift*histHalf + int(v>>shift)
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < histSubBuckets {
		return int64(i), int64(i)
	}
	shift := i/histHalf - 1
	m := int64(i - shift*histHalf)
	lo = m << shift
	return lo, lo + (1 << shift) - 1
}

// Record counts one duration; negative durations count as zero. Only one
// goroutine may call Record on a Histogram at a time.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	if v < h.min.Load() {
		h.min.Store(v)
	}
	if v > h.max.Load() {
		h.max.Store(v)
	}
}

// MergeInto adds h's counts to dst. It may run while h is being recorded
// into; it then sees some prefix of the concurrent Records. dst must not be
// used by any other goroutine meanwhile.
func (h *Histogram) MergeInto(dst *Histogram) {
	var total uint64
	for i := range h.counts {
		if c := h.counts[i].Load(); c != 0 {
			dst.counts[i].Add(c)
			total += c
		}
	}
	dst.total.Add(total)
	dst.sum.Add(h.sum.Load())
	if m := h.min.Load(); m < dst.min.Load() {
		dst.min.Store(m)
	}
	if m := h.max.Load(); m > dst.max.Load() {
		dst.max.Store(m)
	}
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Min returns the smallest duration recorded, or 0 when there is none.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.min.Load())
}

// Max returns the largest duration recorded, or 0 when there is none.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean returns the mean of the durations recorded, or 0 when there is none.
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / int64(n))
}

// Quantile returns the duration below which a fraction q (in [0, 1]) of the
// recorded durations lie: the midpoint of the bucket that holds the
// ⌈q·count⌉-th smallest duration, kept within the recorded minimum and
// maximum. It returns 0 when nothing was recorded. Quantile must not run
// while the histogram is recorded into; read a merged copy instead.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := lo + (hi-lo)/2
			mid = min(max(mid, h.min.Load()), h.max.Load())
			return time.Duration(mid)
		}
	}
	return h.Max()
}
