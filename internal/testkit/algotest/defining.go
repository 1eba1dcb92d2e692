package algotest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// definingBehaviours are the properties that tell the algorithms apart, with
// the numbers the documentation's rules give.
func definingBehaviours() []behaviour {
	return []behaviour{
		{name: "allows twice the limit across a window boundary", only: algorithms.FixedWindow, run: fixedTwiceAcrossBoundary},
		{name: "receipt from an earlier window gives nothing back", only: algorithms.FixedWindow, run: fixedEarlierReceipt},
		{name: "never admits more than the limit in any window", only: algorithms.SlidingWindowLog, run: logNeverExceeds},
		{name: "oldest hit leaving the window makes room", only: algorithms.SlidingWindowLog, run: logOldestLeaves},
		{name: "refund removes exactly the receipt's hits or the newest", only: algorithms.SlidingWindowLog, run: logRefunds},
		{name: "a lease's hits are logged at its end until settled, then when they were served", only: algorithms.SlidingWindowLog, run: logLeases},
		{name: "weighs the previous window", only: algorithms.SlidingWindowCounter, run: counterWeighsPrevious},
		{name: "waits at window boundaries", only: algorithms.SlidingWindowCounter, run: counterBoundaries},
		{name: "counts long windows in slices", only: algorithms.SlidingWindowCounter, run: counterSlices},
		{name: "rounds the estimate up", only: algorithms.SlidingWindowCounter, run: counterRoundsUp},
		{name: "refund with receipt finds its window", only: algorithms.SlidingWindowCounter, run: counterReceipts},
		{name: "refills at the rate up to the burst", only: algorithms.TokenBucket, run: bucketRefills},
		{name: "refills long windows in slices", only: algorithms.TokenBucket, run: bucketSlices},
		{name: "a lease's tokens are held until it is settled or ends", only: algorithms.TokenBucket, run: bucketLeases},
		{name: "a lease's take is a take", only: algorithms.FixedWindow, run: windowLeases},
		{name: "a lease's take is a take", only: algorithms.SlidingWindowCounter, run: windowLeases},
	}
}

func fixedTwiceAcrossBoundary(s *suite) {
	for _, w := range []time.Duration{time.Second, time.Minute, time.Hour} {
		l, k := s.limit(5, w), s.key()
		boundary := windowStart(s.clock.Now(), w).Add(w)
		s.clock.Set(boundary.Add(-time.Microsecond))
		s.admitted(s.take(k, l, 5), 0, time.Microsecond, "5 hits 1µs before the boundary")
		s.denied(s.take(k, l, 1), 0, time.Microsecond, "one more before the boundary")
		s.clock.Set(boundary)
		s.admitted(s.take(k, l, 5), 0, w, "5 hits at the boundary")
		s.denied(s.take(k, l, 1), 0, w, "one more at the boundary")
	}
}

func fixedEarlierReceipt(s *suite) {
	l, k := s.limit(10, time.Second), s.key()
	early := s.take(k, l, 3)
	require.True(s.t, early.Allowed)
	next := windowStart(s.clock.Now(), time.Second).Add(time.Second)
	s.clock.Set(next.Add(200 * time.Millisecond))
	s.admitted(s.take(k, l, 2), 8, 800*time.Millisecond, "2 hits in the next window")
	s.admitted(s.refund(k, l, 3, early.Receipt), 8, 800*time.Millisecond, "refund with the earlier window's receipt")
	late := s.take(k, l, 4)
	s.admitted(late, 4, 800*time.Millisecond, "4 more hits")
	s.admitted(s.refund(k, l, 4, late.Receipt), 8, 800*time.Millisecond, "refund with this window's receipt")
	s.admitted(s.refund(k, l, 2, algorithms.Receipt{}), 10, 0, "refund of the rest without receipt")
}

// logNeverExceeds drives a random stream of requests and checks every
// decision, remaining and reset against a log kept here, then checks that no
// window of length W holds more than L admitted hits.
func logNeverExceeds(s *suite) {
	type hit struct {
		at int64
		n  uint64
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for _, l := range []algorithms.Limit{s.limit(8, time.Second), s.limit(5, time.Minute)} {
		k := s.key()
		w := l.WindowMicros()
		var hits []hit // admitted, oldest first
		for step := 0; step < 400; step++ {
			now := s.clock.Now().UnixMicro()
			switch r := rng.IntN(10); {
			case r < 2:
			case r < 4:
				s.clock.Advance(us(1 + rng.Int64N(3)))
			case r < 7:
				s.clock.Advance(us(rng.Int64N(w / 5)))
			case r < 9 && len(hits) > 0:
				// Just as, or just before, a logged hit leaves the window.
				h := hits[rng.IntN(len(hits))]
				if at := h.at + w - rng.Int64N(2); at > now {
					s.clock.Set(time.UnixMicro(at))
				}
			default:
				s.clock.Advance(us(rng.Int64N(2 * w)))
			}
			now = s.clock.Now().UnixMicro()
			var inWindow []hit
			count := uint64(0)
			for _, h := range hits {
				if h.at > now-w {
					inWindow = append(inWindow, h)
					count += h.n
				}
			}
			n := []uint64{0, 1, 1, 1, 2, 3, 9}[rng.IntN(7)]
			res := s.take(k, l, n)
			what := fmt.Sprintf("step %d: %d hits with %d in the window", step, n, count)
			switch {
			case n > l.Requests:
				s.denied(res, l.Requests-count, l.Window, what)
			case count+n <= l.Requests:
				if n > 0 {
					hits = append(hits, hit{now, n})
					inWindow = append(inWindow, hit{now, n})
				}
				reset := time.Duration(0)
				if len(inWindow) > 0 {
					reset = us(inWindow[len(inWindow)-1].at + w - now)
				}
				s.admitted(res, l.Requests-count-n, reset, what)
			default:
				kth := count + n - l.Requests
				var at int64
				for _, h := range inWindow {
					if kth <= h.n {
						at = h.at
						break
					}
					kth -= h.n
				}
				s.denied(res, l.Requests-count, us(at+w-now), what)
			}
		}
		// Every window (x − W, x] ending at an admitted hit holds at most L.
		for _, end := range hits {
			sum := uint64(0)
			for _, h := range hits {
				if h.at > end.at-w && h.at <= end.at {
					sum += h.n
				}
			}
			require.LessOrEqual(s.t, sum, l.Requests, "hits in the window ending at %s", time.UnixMicro(end.at).UTC())
		}
	}
}

func logOldestLeaves(s *suite) {
	l, k := s.limit(5, time.Second), s.key()
	t1 := s.clock.Now()
	s.admitted(s.take(k, l, 2), 3, time.Second, "2 hits")
	s.clock.Set(t1.Add(300 * time.Millisecond))
	s.admitted(s.take(k, l, 3), 0, time.Second, "3 hits 300ms later")
	s.clock.Set(t1.Add(time.Second - time.Microsecond))
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 hit 1µs before the first leave")
	s.denied(s.take(k, l, 3), 0, 300*time.Millisecond+time.Microsecond, "3 hits, waiting for the third oldest")
	s.clock.Set(t1.Add(time.Second))
	s.admitted(s.take(k, l, 2), 0, time.Second, "2 hits as the first leave")
	s.denied(s.take(k, l, 1), 0, 300*time.Millisecond, "1 more hit")
}

func logRefunds(s *suite) {
	l := s.limit(10, time.Second)
	t1 := s.clock.Now()
	t2, t3 := t1.Add(100*time.Millisecond), t1.Add(200*time.Millisecond)

	// With a receipt: the receipt's hits go, the newer ones stay.
	k := s.key()
	s.clock.Set(t1)
	first := s.take(k, l, 3)
	s.clock.Set(t2)
	require.True(s.t, s.take(k, l, 2).Allowed)
	s.clock.Set(t3)
	s.admitted(s.refund(k, l, 3, first.Receipt), 8, 900*time.Millisecond, "refund of the older Take")
	s.admitted(s.take(k, l, 8), 0, time.Second, "8 more hits")
	s.denied(s.take(k, l, 1), 0, 900*time.Millisecond, "1 more hit waits for the newer Take")

	// Without a receipt: the newest hits go.
	k = s.key()
	s.clock.Set(t1)
	require.True(s.t, s.take(k, l, 3).Allowed)
	s.clock.Set(t2)
	require.True(s.t, s.take(k, l, 2).Allowed)
	s.clock.Set(t3)
	s.admitted(s.refund(k, l, 2, algorithms.Receipt{}), 7, 800*time.Millisecond, "refund of the newest 2")

	// Two Takes in one microsecond: a receipt names only its own hits, once.
	k = s.key()
	a := s.take(k, l, 2)
	b := s.take(k, l, 3)
	require.True(s.t, a.Allowed && b.Allowed)
	s.admitted(s.refund(k, l, 2, a.Receipt), 7, time.Second, "refund of the first Take")
	s.admitted(s.refund(k, l, 2, a.Receipt), 7, time.Second, "the same refund again")
	s.admitted(s.refund(k, l, 1, b.Receipt), 8, time.Second, "refund of 1 of the second Take")
	s.admitted(s.refund(k, l, 3, b.Receipt), 10, 0, "refund of the second Take's 3: the 2 left go")
}

// counterWeighsPrevious: L = 10 per second, 10 hits in one window; in the
// next one, 250ms in, the previous window still weighs 10·750000/10^6 = 7.5.
func counterWeighsPrevious(s *suite) {
	l, k := s.limit(10, time.Second), s.key()
	next := windowStart(s.clock.Now(), time.Second).Add(time.Second)
	s.admitted(s.take(k, l, 10), 0, next.Add(time.Second).Sub(s.clock.Now()), "10 hits")
	s.clock.Set(next.Add(250 * time.Millisecond))
	s.admitted(s.peek(k, l), 2, 750*time.Millisecond, "peek: 10 − ⌈7.5⌉")
	// prev·(S−s) ≤ (L−cur−n)·S first holds at s' = S − ⌊7·S/10⌋ = 300000.
	s.denied(s.take(k, l, 3), 2, 50*time.Millisecond, "3 hits")
	s.admitted(s.take(k, l, 2), 0, 1750*time.Millisecond, "2 hits")
	s.denied(s.take(k, l, 1), 0, 50*time.Millisecond, "1 more hit")
	s.clock.Advance(50*time.Millisecond - time.Microsecond)
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 hit at slice 299999")
	s.clock.Advance(time.Microsecond)
	s.admitted(s.take(k, l, 1), 0, 1700*time.Millisecond, "1 hit at slice 300000")
}

// counterBoundaries: a full window's count must first become the previous
// window's, then slide out.
func counterBoundaries(s *suite) {
	l := s.limit(10, time.Second)
	next := windowStart(s.clock.Now(), time.Second).Add(time.Second)

	k := s.key()
	require.True(s.t, s.take(k, l, 10).Allowed)
	s.clock.Set(next.Add(-time.Microsecond))
	// cur + n > L: slice S − ⌊9·S/10⌋ = 100000 of the next window.
	s.denied(s.take(k, l, 1), 0, 100*time.Millisecond+time.Microsecond, "1 hit in the last microsecond")
	s.clock.Set(next)
	s.admitted(s.peek(k, l), 0, time.Second, "peek at the boundary: all 10 weigh")
	s.denied(s.take(k, l, 1), 0, 100*time.Millisecond, "1 hit at the boundary")
	s.clock.Set(next.Add(100 * time.Millisecond))
	s.admitted(s.take(k, l, 1), 0, 2*time.Second-100*time.Millisecond, "1 hit at slice 100000")

	// A count two windows old weighs nothing.
	k = s.key()
	s.clock.Set(next.Add(-500 * time.Millisecond))
	require.True(s.t, s.take(k, l, 10).Allowed)
	s.clock.Set(next.Add(time.Second - time.Microsecond))
	s.admitted(s.peek(k, l), 9, time.Microsecond, "peek in the last slice: 10 − ⌈10/10^6⌉")
	s.denied(s.take(k, l, 10), 9, time.Microsecond, "10 hits in the last slice")
	s.clock.Set(next.Add(time.Second))
	s.admitted(s.peek(k, l), 10, 0, "peek two windows later")
	s.admitted(s.take(k, l, 10), 0, 2*time.Second, "10 hits two windows later")
}

// counterSlices: a 60s window is cut into slices of 60µs, and the estimate
// moves only at slice boundaries.
func counterSlices(s *suite) {
	l, k := s.limit(100, time.Minute), s.key()
	start := windowStart(s.clock.Now(), time.Minute)
	next := start.Add(time.Minute)
	s.admitted(s.take(k, l, 100), 0, start.Add(2*time.Minute).Sub(s.clock.Now()), "100 hits")
	// 15s + 59µs is slice 250000: 100·750000/10^6 = 75 still weigh.
	s.clock.Set(next.Add(15*time.Second + 59*time.Microsecond))
	s.admitted(s.peek(k, l), 25, 45*time.Second-59*time.Microsecond, "peek in slice 250000")
	// 26 hits need slice S − ⌊74·S/100⌋ = 260000, at 15.6s.
	s.denied(s.take(k, l, 26), 25, 600*time.Millisecond-59*time.Microsecond, "26 hits")
	s.admitted(s.take(k, l, 25), 0, 105*time.Second-59*time.Microsecond, "25 hits")
	s.clock.Set(next.Add(15*time.Second + 60*time.Microsecond))
	s.denied(s.take(k, l, 1), 0, 600*time.Millisecond-60*time.Microsecond, "1 hit in slice 250001")
	s.clock.Set(next.Add(15600*time.Millisecond - time.Microsecond))
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 hit in slice 259999")
	s.clock.Advance(time.Microsecond)
	s.admitted(s.take(k, l, 1), 0, 105*time.Second-600*time.Millisecond, "1 hit in slice 260000")
}

// counterRoundsUp: L = 3, 2 hits in the previous window; at slice 499999
// they weigh 2·500001/10^6, a little over 1.
func counterRoundsUp(s *suite) {
	l, k := s.limit(3, time.Second), s.key()
	next := windowStart(s.clock.Now(), time.Second).Add(time.Second)
	require.True(s.t, s.take(k, l, 2).Allowed)
	s.clock.Set(next.Add(499999 * time.Microsecond))
	s.admitted(s.peek(k, l), 1, 500001*time.Microsecond, "peek: 3 − ⌈1.000002⌉")
	s.denied(s.take(k, l, 2), 1, time.Microsecond, "2 hits")
	s.admitted(s.take(k, l, 1), 0, 1500001*time.Microsecond, "1 hit")
	s.clock.Advance(time.Microsecond)
	s.admitted(s.take(k, l, 1), 0, 1500*time.Millisecond, "1 more hit at slice 500000, where 2·500000 = (3−1−1)·10^6")
	s.denied(s.take(k, l, 1), 0, 500*time.Millisecond, "1 more hit: (3−2−1)·S/2 = 0, so not before the next window")
}

func counterReceipts(s *suite) {
	l, k := s.limit(10, time.Second), s.key()
	next := windowStart(s.clock.Now(), time.Second).Add(time.Second)
	early := s.take(k, l, 4)
	require.True(s.t, s.take(k, l, 6).Allowed)
	s.clock.Set(next.Add(500 * time.Millisecond))
	s.admitted(s.peek(k, l), 5, 500*time.Millisecond, "peek: 10 − ⌈10·0.5⌉")
	s.admitted(s.refund(k, l, 4, early.Receipt), 7, 500*time.Millisecond, "refund to the previous window: 10 − ⌈6·0.5⌉")
	s.clock.Set(next.Add(600 * time.Millisecond))
	late := s.take(k, l, 2)
	s.admitted(late, 5, 1400*time.Millisecond, "2 hits: 10 − 2 − ⌈6·0.4⌉")
	s.clock.Set(next.Add(1100 * time.Millisecond))
	s.admitted(s.refund(k, l, 4, early.Receipt), 8, 900*time.Millisecond, "refund with a receipt two windows old: 10 − ⌈2·0.9⌉")
	s.admitted(s.refund(k, l, 2, late.Receipt), 10, 0, "refund to the previous window")
}

// bucketRefills: 10 tokens per second and a burst of 20: 20 at once, then one
// every 100ms, never more than 20.
func bucketRefills(s *suite) {
	l, k := s.limit(10, time.Second), s.key()
	l.Burst = 20
	s.admitted(s.take(k, l, 20), 0, 2*time.Second, "the whole burst")
	s.denied(s.take(k, l, 1), 0, 100*time.Millisecond, "1 more token")
	for i := range 10 {
		s.clock.Advance(100*time.Millisecond - time.Microsecond)
		s.denied(s.take(k, l, 1), 0, time.Microsecond, fmt.Sprintf("token %d, 1µs early", i))
		s.clock.Advance(time.Microsecond)
		s.admitted(s.take(k, l, 1), 0, 2*time.Second, fmt.Sprintf("token %d", i))
		s.denied(s.take(k, l, 1), 0, 100*time.Millisecond, fmt.Sprintf("token %d again", i))
	}
	s.clock.Advance(550 * time.Millisecond)
	s.admitted(s.peek(k, l), 5, 1450*time.Millisecond, "5.5 tokens after 550ms")
	s.clock.Advance(time.Hour)
	s.admitted(s.peek(k, l), 20, 0, "a full bucket after an hour")
	s.denied(s.take(k, l, 21), 20, time.Second, "more than the burst")
}

// bucketSlices: 6 tokens per minute refill in slices of 60µs, 6 millionths
// of a token each; the clock starts 36µs into a slice.
func bucketSlices(s *suite) {
	l, k := s.limit(6, time.Minute), s.key()
	into := us(s.clock.Now().UnixMicro() % 60)
	s.admitted(s.take(k, l, 6), 0, time.Minute-into, "the whole bucket")
	// ⌈10^6/6⌉ = 166667 slices of 60µs for one token.
	wait := 166667*60*time.Microsecond - into
	s.denied(s.take(k, l, 1), 0, wait, "1 token")
	s.clock.Advance(wait - time.Microsecond)
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 token 1µs early")
	s.clock.Advance(time.Microsecond)
	// 166667·6 = 1000002 millionths: 2 are left, and ⌈(6·10^6−2)/6⌉ = 10^6
	// slices fill the bucket.
	s.admitted(s.take(k, l, 1), 0, time.Minute, "1 token")
}

// logLeases: a lease's hits are logged at its end, now + hold, so they leave
// the window W after it, and its give-back by receipt removes the entries
// it did not serve.
func logLeases(s *suite) {
	const ms = time.Millisecond
	hold := 50 * ms
	l, k := s.limit(5, time.Second), s.key()
	t1 := s.clock.Now()
	s.admitted(s.lease(k, l, 3, hold), 2, 1050*ms, "a lease of 3, logged 50ms ahead")
	s.admitted(s.take(k, l, 2), 0, 1050*ms, "2 hits")
	s.clock.Set(t1.Add(time.Second - time.Microsecond))
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 hit as the take's leave")
	s.denied(s.take(k, l, 3), 0, 50*ms+time.Microsecond, "3 hits wait for the lease's")
	s.clock.Set(t1.Add(time.Second))
	s.admitted(s.take(k, l, 2), 0, time.Second, "2 hits once the take's have left")
	s.clock.Set(t1.Add(time.Second + hold - time.Microsecond))
	s.denied(s.take(k, l, 1), 0, time.Microsecond, "1 hit 1µs before the lease's leave")
	s.clock.Set(t1.Add(time.Second + hold))
	s.admitted(s.take(k, l, 3), 0, time.Second, "3 hits W after the lease's end")

	// A lease of 4 serves 2 hits 10ms after it was taken, and is settled:
	// the 2 are logged then, the other 2 go, and a second settlement
	// changes nothing.
	l, k = s.limit(10, time.Second), s.key()
	s.clock.Set(t1)
	lease := s.lease(k, l, 4, hold)
	s.admitted(lease, 6, 1050*ms, "a lease of 4")
	s.admitted(s.take(k, l, 1), 5, 1050*ms, "1 hit")
	served := []algorithms.Served{{At: t1.Add(10 * ms).UnixMicro(), Seq: lease.Receipt.Seq, N: 2}}
	s.clock.Set(t1.Add(30 * ms))
	s.settle(k, l, lease.Receipt, hold, 4, served, true)
	s.admitted(s.peek(k, l), 7, 980*ms, "the lease's 2 served hits logged when served")
	s.settle(k, l, lease.Receipt, hold, 4, served, true)
	s.admitted(s.peek(k, l), 7, 980*ms, "the same settlement again")
	s.clock.Set(t1.Add(time.Second))
	s.admitted(s.peek(k, l), 8, 10*ms, "peek when the take's hit has left")
	s.clock.Set(t1.Add(time.Second + 10*ms - time.Microsecond))
	s.admitted(s.peek(k, l), 8, time.Microsecond, "peek 1µs before the served hits leave")
	s.clock.Set(t1.Add(time.Second + 10*ms))
	s.admitted(s.peek(k, l), 10, 0, "peek W after they were served")
}

// bucketLeases: 10 tokens per second (slices of 1µs). A lease's tokens are
// held until its end: until the slice before it the bucket refills only up
// to C − H, so it never holds a whole burst while a lease may still serve;
// a give-back while the lease lasts ends the hold of what it gives back.
func bucketLeases(s *suite) {
	const ms, us = time.Millisecond, time.Microsecond
	l, k := s.limit(10, time.Second), s.key()
	// A second's start: the leases' ends below fall on their slots (an
	// eighth of their holds).
	t1 := windowStart(s.clock.Now(), time.Second).Add(time.Second)
	s.clock.Set(t1)
	s.admitted(s.lease(k, l, 5, 800*ms), 5, 1300*ms-us, "a lease of 5 held 800ms")
	s.clock.Set(t1.Add(600 * ms))
	s.admitted(s.peek(k, l), 5, 700*ms-us, "peek: no more than C − H")
	s.denied(s.take(k, l, 10), 5, 700*ms-us, "the whole burst waits for the lease's end")
	// 199999 slices of 10 millionths until the slice before the end, then
	// ⌈(10^7 − 1999990)/10⌉ = 800001 slices.
	s.admitted(s.take(k, l, 5), 0, time.Second, "5 tokens")
	s.clock.Set(t1.Add(800*ms - us))
	s.denied(s.take(k, l, 2), 1, us, "2 tokens in the slice before the end")
	s.clock.Set(t1.Add(800 * ms))
	s.admitted(s.take(k, l, 2), 0, time.Second, "2 tokens at the lease's end")

	// A lease settled unused while it lasts gives its tokens back; one
	// settled once its hold has ended gives nothing back.
	k = s.key()
	s.clock.Set(t1)
	lease := s.lease(k, l, 10, 50*ms)
	s.admitted(lease, 0, 1050*ms-us, "a lease of the whole burst held 50ms")
	s.clock.Set(t1.Add(10 * ms))
	s.settle(k, l, lease.Receipt, 50*ms, 10, nil, true)
	s.admitted(s.peek(k, l), 10, 0, "settled unused: the bucket is full")
	k = s.key()
	s.clock.Set(t1)
	lease = s.lease(k, l, 10, 50*ms)
	s.clock.Set(t1.Add(60 * ms))
	s.settle(k, l, lease.Receipt, 50*ms, 10, nil, true)
	// The hold ended at 50ms (a multiple of its 6.25ms slot): 10001
	// slices of refill since the slice before it, and nothing back.
	s.admitted(s.peek(k, l), 0, 989999*us, "settled after its hold: nothing back")

	// A lease of the whole burst serves 5 tokens 1ms after it was taken
	// and is settled 20ms after: the bucket holds what it would had it
	// admitted the 5 then, 5 and the refill of 19ms, 0.19 tokens, that
	// its hold kept out.
	k = s.key()
	s.clock.Set(t1)
	lease = s.lease(k, l, 10, 50*ms)
	s.clock.Set(t1.Add(20 * ms))
	s.settle(k, l, lease.Receipt, 50*ms, 10, []algorithms.Served{{At: t1.Add(ms).UnixMicro(), N: 5}}, true)
	s.admitted(s.peek(k, l), 5, 481*ms, "settled: the 5 served at 1ms and their refill")

	// Leases that end apart are held apart: the first one's tokens are
	// back in the bucket once it ends, while the second one lasts.
	l.Requests, l.Burst = 1000, 10
	k = s.key()
	s.clock.Set(t1)
	s.admitted(s.lease(k, l, 5, 50*ms), 5, 55*ms-us, "a lease of 5 held 50ms")
	s.clock.Set(t1.Add(40 * ms))
	second := s.lease(k, l, 5, 50*ms)
	s.admitted(second, 0, 58750*us-us, "5 more held 50ms, until 93.75ms")
	s.clock.Set(t1.Add(60 * ms))
	s.admitted(s.peek(k, l), 5, 38750*us-us, "peek once the first has ended")
	s.denied(s.take(k, l, 6), 5, 34750*us-us, "6 wait for the second's end")
	s.settle(k, l, second.Receipt, 50*ms, 5, nil, true)
	s.admitted(s.peek(k, l), 10, 0, "the second settled unused")
}

// windowLeases: a window counts a lease's take as a take, and the
// settlement of a lease that ends unused as a refund, whatever the hold:
// two keys, one leased and one taken, answer alike through a random run.
func windowLeases(s *suite) {
	rng := rand.New(rand.NewPCG(21, 21))
	l := s.randomLimit(rng, 4)
	leased, taken := s.key(), s.key()
	var receipts [2][]algorithms.Receipt
	for step := range 200 {
		s.wander(rng, l.Window)
		n := rng.Uint64N(l.Requests + 2)
		hold := time.Duration(1+rng.Int64N(l.Window.Microseconds())) * time.Microsecond
		what := fmt.Sprintf("step %d: %d hits held %s", step, n, hold)
		if rng.IntN(3) == 0 && len(receipts[0]) > 0 {
			// A lease that ends unused gives back as a refund by its
			// receipt does.
			i := rng.IntN(len(receipts[0]))
			s.settle(leased, l, receipts[0][i], hold, n, nil, true)
			s.refund(taken, l, n, receipts[1][i])
			got, want := s.peek(leased, l), s.peek(taken, l)
			got.Receipt, want.Receipt = algorithms.Receipt{}, algorithms.Receipt{}
			require.Equal(s.t, want, got, "%s: settlement %s", what, s.at())
			continue
		}
		got, want := s.lease(leased, l, n, hold), s.take(taken, l, n)
		gotR, wantR := got, want
		gotR.Receipt, wantR.Receipt, gotR.State = algorithms.Receipt{}, algorithms.Receipt{}, nil
		require.Equal(s.t, wantR, gotR, "%s %s", what, s.at())
		if got.Allowed {
			receipts[0], receipts[1] = append(receipts[0], got.Receipt), append(receipts[1], want.Receipt)
		}
	}
}
