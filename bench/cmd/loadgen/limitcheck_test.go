package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// ms is a millisecond in the checks' nanoseconds; sec a second.
const (
	ms  = int64(1_000_000)
	sec = 1000 * ms
)

// at returns a span from a ms to b ms after the epoch's second 1 000.
func at(a, b float64) span {
	return span{Send: 1000*sec + int64(a*float64(ms)), Recv: 1000*sec + int64(b*float64(ms))}
}

// repeat returns n copies of s.
func repeat(n int, s span) []span {
	out := make([]span, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestCheckFixedWindows(t *testing.T) {
	for _, tt := range []struct {
		name           string
		spans          []span
		limit          uint64
		certain, loose float64
		straddling     int
		above          bool
	}{
		{"none", nil, 3, 0, 0, 0, false},
		{"L in each window", append(repeat(3, at(10, 11)), repeat(3, at(1500, 1501))...), 3, 3, 3, 0, false},
		{"L+1 wholly in one window", append(repeat(4, at(10, 11)), repeat(1, at(1500, 1501))...), 3, 4, 4, 0, true},
		// Two straddle the boundary at 1 s, with 2 certain on either side:
		// one goes each way.
		{"straddlers that fit", append(append(repeat(2, at(500, 501)), repeat(2, at(999, 1001))...), repeat(2, at(1500, 1501))...), 3, 2, 3, 2, false},
		// Both windows are full: no straddler fits anywhere.
		{"straddler that fits nowhere", append(append(repeat(3, at(500, 501)), at(999, 1001)), repeat(3, at(1500, 1501))...), 3, 3, 4, 1, true},
		// The assignment must put the straddler of the first boundary in
		// the first window, which only it may use, and that of the second
		// in the third: an assignment by first come would fail.
		{"earliest deadline first", []span{
			at(999, 1001),                  // windows 0 or 1
			at(1200, 1201), at(1300, 1301), // window 1: 2 certain
			at(1999, 2001), // windows 1 or 2
			at(2500, 2501), // window 2: 1 certain
		}, 2, 2, 2, 2, false},
		// A span longer than a window overlaps three: it goes to the one
		// with room.
		{"a span over three windows", append(append(repeat(2, at(500, 501)), at(900, 2100)), repeat(2, at(1500, 1501))...), 2, 2, 2, 1, false},
		{"a span over three windows, all full", append(append(append(repeat(2, at(500, 501)), at(900, 2100)), repeat(2, at(1500, 1501))...), repeat(2, at(2050, 2051))...), 2, 2, 3, 1, true},
		// Times before the epoch round down, as the windows do.
		{"before the epoch", []span{{-sec - 5, -sec - 4}, {-5, -4}, {-3, -2}}, 1, 2, 2, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := checkFixedWindows(tt.spans, sec, tt.limit)
			assert.Equal(t, checkWindows, c.Kind)
			assert.Equal(t, tt.certain, c.Certain, "most certainly in one window")
			assert.Equal(t, tt.loose, c.Loose, "least most in one window over the assignments")
			assert.Equal(t, tt.straddling, c.Straddling)
			assert.Equal(t, tt.above, c.Above)
		})
	}
}

func TestCheckSlidingWindows(t *testing.T) {
	for _, tt := range []struct {
		name           string
		spans          []span
		limit          uint64
		certain, loose float64
		above          bool
	}{
		{"none", nil, 2, 0, 0, false},
		// L at 0, L at W after: the first have left the log by then.
		{"L every W", append(repeat(2, at(0, 0.1)), repeat(2, at(1000.2, 1000.3))...), 2, 2, 2, false},
		// Three within 999 ms of each other, at L = 2.
		{"L+1 within W", []span{at(0, 0.1), at(500, 500.1), at(998.5, 998.6)}, 2, 3, 3, true},
		// The first and the last less than W apart, but in Redis's µs
		// (which round down) they may be W apart: nothing is proven.
		{"L+1 within W, not in µs", []span{{1000*sec + 900, 1000*sec + 950}, at(500, 500.1), {1001*sec + 500, 1001*sec + 600}}, 2, 2, 3, false},
		// The third may have been decided 1 000 ms after the first: not
		// proven, though it may be so.
		{"a straddler", []span{at(0, 0.1), at(500, 500.1), at(999, 1001)}, 2, 2, 3, false},
		// A W in the middle of the run holds L+1 wholly.
		{"L+1 later in the run", []span{at(0, 0.1), at(1200, 1201), at(1300, 1301), at(2100, 2101), at(3000, 3001)}, 2, 3, 3, true},
		{"answers sent together", repeat(3, at(5, 6)), 2, 3, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := checkSlidingWindows(tt.spans, sec, tt.limit)
			assert.Equal(t, checkSliding, c.Kind)
			assert.Equal(t, tt.certain, c.Certain, "most certainly in one W")
			assert.Equal(t, tt.loose, c.Loose, "most that may be in one W")
			assert.Equal(t, tt.above, c.Above)
		})
	}
}

func TestCheckTokenBucket(t *testing.T) {
	// A bucket of 2 refilling 1 a second, starting full at the first send.
	for _, tt := range []struct {
		name           string
		spans          []span
		certain, loose float64
		above          bool
	}{
		{"the burst at once", repeat(2, at(0, 1)), -0.001001, -0.000001, false},
		// A third received by 500 ms: only half a token came since.
		{"burst+1 in half a second", repeat(3, at(0, 500)), 0.499999, 0.999999, true},
		// The third may have been decided at 1 000 ms, when a token had come.
		{"burst+1 over a second", []span{at(0, 1), at(0, 1), at(999, 1000)}, -0.000001, 0.000999, false},
		// Later answers are judged against the refill up to their receipt.
		{"the refill, then one too many", []span{at(0, 1), at(0, 1), at(1000, 1001), at(2000, 2001), at(2100, 2200)}, 0.799999, 0.899999, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := checkTokenBucket(tt.spans, 2, 1, sec)
			assert.Equal(t, checkBucket, c.Kind)
			assert.InDelta(t, tt.certain, c.Certain, 1e-9, "most above burst + rate·t, by receipt")
			assert.InDelta(t, tt.loose, c.Loose, 1e-9, "most above burst + rate·t, by send")
			assert.Equal(t, tt.above, c.Above)
		})
	}
}
