package main

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// histMaxMicros is the largest latency a Histogram tells apart, an hour, in
// microseconds; longer ones count as an hour.
const histMaxMicros = int64(time.Hour / time.Microsecond)

// histDigits is the precision of a Histogram in significant digits: a
// quantile is within 0.1% of the recorded value.
const histDigits = 3

// Histogram counts durations in microseconds, from 1µs to histMaxMicros, to
// histDigits significant digits, in an HdrHistogram. It is safe for
// concurrent use: a load generator gives each worker its own Histogram, and
// the progress lines and the report merge them into one while the workers
// go on recording.
type Histogram struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// NewHistogram returns an empty Histogram.
func NewHistogram() *Histogram {
	return &Histogram{h: hdrhistogram.New(1, histMaxMicros, histDigits)}
}

// Record counts one duration; a negative one counts as zero, one beyond an
// hour as an hour.
func (h *Histogram) Record(d time.Duration) {
	us := min(max(int64(d/time.Microsecond), 0), histMaxMicros)
	h.mu.Lock()
	h.h.RecordValue(us) // within the range: never fails
	h.mu.Unlock()
}

// MergeInto adds h's counts to dst, another Histogram.
func (h *Histogram) MergeInto(dst *Histogram) {
	h.mu.Lock()
	defer h.mu.Unlock()
	dst.mu.Lock()
	defer dst.mu.Unlock()
	dst.h.Merge(h.h)
}

// read runs f on the histogram under its lock.
func (h *Histogram) read(f func(*hdrhistogram.Histogram) int64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(f(h.h)) * time.Microsecond
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return uint64(h.h.TotalCount())
}

// Min returns the smallest duration recorded, or 0 when there is none.
func (h *Histogram) Min() time.Duration {
	return h.read((*hdrhistogram.Histogram).Min)
}

// Max returns the largest duration recorded, or 0 when there is none.
func (h *Histogram) Max() time.Duration {
	return h.read((*hdrhistogram.Histogram).Max)
}

// Mean returns the mean of the durations recorded, or 0 when there is none.
func (h *Histogram) Mean() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Duration(h.h.Mean() * float64(time.Microsecond))
}

// Quantile returns the duration below which a fraction q (in [0, 1]) of the
// recorded durations lie, or 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	return h.read(func(hh *hdrhistogram.Histogram) int64 { return hh.ValueAtQuantile(100 * q) })
}
