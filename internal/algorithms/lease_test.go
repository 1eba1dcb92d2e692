package algorithms_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The properties below are what a lease's hold is for: a hit served from a
// lease at any time until the lease's end counts as much as a hit taken
// then. A lease's hits are modelled as served all at once, at whichever
// instant of the lease is worst for the bound being checked.

// served is hits admitted at some instant of [from, to] (µs): a take's at
// its time, a lease's at any time before its end or its give-back.
type served struct {
	from, to int64
	n        uint64
}

// lease is a lease taken in a random sequence, until it gives back what it
// did not use.
type lease struct {
	event   int // index of its served
	receipt algorithms.Receipt
	hits    uint64
	hold    time.Duration
}

// worstIntervals calls check with every interval [a, b] (a ≤ b) that holds
// the most hits of events among all intervals no longer than it, and the
// hits the events could have served in it: it is enough to try intervals
// that end at the start of an event and begin at the end of one, and the
// single instants where events start.
func worstIntervals(events []served, check func(a, b int64, hits uint64)) {
	sum := func(a, b int64) uint64 {
		var hits uint64
		for _, e := range events {
			if e.from <= b && e.to >= a {
				hits += e.n
			}
		}
		return hits
	}
	for _, e := range events {
		check(e.from, e.from, sum(e.from, e.from))
		for _, f := range events {
			if a, b := e.to, f.from; a <= b {
				check(a, b, sum(a, b))
			}
		}
	}
}

// leaseSequence drives st through random takes, leases (holds from 1µs to a
// window) and give-backs of what leases did not use, on a clock that only
// moves forwards, and returns what was served when. Without late, a lease
// gives back only while it lasts, and what an ended lease did not use
// stays taken.
func leaseSequence(rng *rand.Rand, st algorithms.State, l algorithms.Limit, steps int, late bool) []served {
	var events []served
	var live []lease
	now := t0
	w := l.WindowMicros()
	for range steps {
		switch r := rng.IntN(10); {
		case r < 4:
			now = now.Add(time.Duration(rng.Int64N(w/20+1)) * time.Microsecond)
		case r < 6:
			now = now.Add(time.Duration(rng.Int64N(w/2+1)) * time.Microsecond)
		case r < 7:
			now = now.Add(time.Duration(rng.Int64N(4)) * time.Microsecond)
		}
		t := now.UnixMicro()
		n := rng.Uint64N(l.Capacity() + 1)
		switch r := rng.IntN(10); {
		case r < 3 && len(live) > 0:
			// A lease gives back what it did not use.
			i := rng.IntN(len(live))
			ls := live[i]
			live = append(live[:i], live[i+1:]...)
			if !late && t >= ls.receipt.At+ls.hold.Microseconds() {
				continue
			}
			used := rng.Uint64N(ls.hits + 1)
			rc := ls.receipt
			rc.Seq += used // a log's served entries are the first ones
			e := &events[ls.event]
			e.n, e.to = used, min(e.to, t)
			st.Release(l, now, ls.hits-used, rc, ls.hold)
		case r < 6:
			hold := time.Duration(1+rng.Int64N(w)) * time.Microsecond
			if rng.IntN(2) == 0 {
				hold = time.Duration(1+rng.Int64N(w/10+1)) * time.Microsecond
			}
			if res := st.Lease(l, now, n, hold); res.Allowed && n > 0 {
				events = append(events, served{from: t, to: t + hold.Microseconds() - 1, n: n})
				live = append(live, lease{event: len(events) - 1, receipt: res.Receipt, hits: n, hold: hold})
			}
		default:
			if st.Take(l, now, n).Allowed && n > 0 {
				events = append(events, served{from: t, to: t, n: n})
			}
		}
	}
	return events
}

// TestSlidingWindowLogLeasesStayWithinTheLimit: with leases logged at their
// ends, the hits served in any span shorter than the window, a lease's at
// any instant before its end, are at most L.
func TestSlidingWindowLogLeasesStayWithinTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for seq := range 300 {
		l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 1 + rng.Uint64N(12), Window: []time.Duration{time.Second, time.Minute}[rng.IntN(2)]}
		events := leaseSequence(rng, new(algorithms.SlidingWindowLogState), l, 60, true)
		worstIntervals(events, func(a, b int64, hits uint64) {
			if b-a < l.WindowMicros() {
				require.LessOrEqual(t, hits, l.Requests, "sequence %d (L=%d W=%s): hits served in [%d, %d]µs", seq, l.Requests, l.Window, a-t0.UnixMicro(), b-t0.UnixMicro())
			}
		})
	}
}

// TestTokenBucketLeasesStayWithinTheBucket: with leases held until their
// ends, the tokens served in any span [a, b], a lease's at any instant
// before its end, are at most the burst plus what the slices that start in
// (a, b] refill: B·S + (⌊b/q⌋ − ⌊a/q⌋)·L millionths. Leases give back only
// while they last: a token given back later is a refund's, which puts back
// into the bucket a token it took when it may have been full since, as any
// late refund does.
func TestTokenBucketLeasesStayWithinTheBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	for seq := range 300 {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1 + rng.Uint64N(12), Window: []time.Duration{time.Second, time.Minute}[rng.IntN(2)]}
		if rng.IntN(2) == 0 {
			l.Burst = 1 + rng.Uint64N(30)
		}
		events := leaseSequence(rng, new(algorithms.TokenBucketState), l, 60, false)
		q := l.SliceMicros()
		worstIntervals(events, func(a, b int64, hits uint64) {
			refill := uint64(b/q-a/q) * l.Requests
			require.LessOrEqual(t, hits*algorithms.SlicesPerWindow, l.Capacity()*algorithms.SlicesPerWindow+refill,
				"sequence %d (L=%d B=%d W=%s): tokens served in [%d, %d]µs", seq, l.Requests, l.Burst, l.Window, a-t0.UnixMicro(), b-t0.UnixMicro())
		})
	}
}

// TestTokenBucketHoldInvariant: whatever happens (takes, leases, give-backs
// of leases and others, charges and records, clocks going back, changed
// rates and bursts), the level and the tokens that leases hold add up to at
// most the capacity, what is held is held until a time to come, a denial
// changes nothing, and the state does not expire while it holds tokens.
func TestTokenBucketHoldInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	held, capped := 0, 0
	for seq := range 400 {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1 + rng.Uint64N(20), Window: []time.Duration{time.Second, time.Minute, day}[rng.IntN(3)]}
		var st algorithms.TokenBucketState
		var receipts []algorithms.Receipt
		now := t0
		for i := range 80 {
			if rng.IntN(15) == 0 {
				l.Requests, l.Burst = 1+rng.Uint64N(20), rng.Uint64N(40)
			}
			switch r := rng.IntN(10); {
			case r < 4:
				now = now.Add(time.Duration(rng.Int64N(int64(l.Window / 10))))
			case r < 5:
				now = now.Add(time.Duration(rng.Int64N(int64(2 * l.Window))))
			case r < 6:
				now = now.Add(-time.Duration(rng.Int64N(int64(l.Window))))
			case r < 7:
				now = now.Add(time.Duration(rng.Int64N(4)) * time.Microsecond)
			}
			now = now.Truncate(time.Microsecond)
			n := rng.Uint64N(l.Capacity() + 2)
			hold := time.Duration(rng.Int64N(int64(l.Window)))
			before := st
			var res algorithms.Result
			op := rng.IntN(7)
			switch op {
			case 0:
				res = st.Take(l, now, n)
			case 1, 2:
				res = st.Lease(l, now, n, hold)
			case 3:
				var rc algorithms.Receipt
				if len(receipts) > 0 {
					rc = receipts[rng.IntN(len(receipts))]
				}
				res = st.Release(l, now, n, rc, hold)
			case 4:
				res = st.Refund(l, now, n, algorithms.Receipt{})
			case 5:
				res = st.Charge(l, now, n)
			default:
				res = st.Record(l, now, n)
			}
			what := fmt.Sprintf("sequence %d step %d (op %d of %d, hold %s) at %s, L=%d B=%d W=%s before %+v after %+v", seq, i, op, n, hold, now.Sub(t0), l.Requests, l.Burst, l.Window, before, st)
			if !res.Allowed && op < 3 {
				// A denial changes nothing: the state holds to the limit
				// of its last change.
				require.Equal(t, before, st, "%s: a denial changed the state", what)
				continue
			}
			level, h, until := st.Holding()
			c := int64(l.Capacity() * algorithms.SlicesPerWindow)
			require.LessOrEqual(t, level+h, c, "%s: level %d + held %d", what, level, h)
			require.GreaterOrEqual(t, h, int64(0), what)
			require.Equal(t, h == 0, until == 0, "%s: held %d until %d", what, h, until)
			if h > 0 {
				held++
				require.Greater(t, until, now.UnixMicro(), "%s: held until", what)
				require.GreaterOrEqual(t, st.Expiry(l).UnixMicro(), until, "%s: expiry", what)
				if level+h == c {
					capped++
				}
			}
			if op < 3 {
				receipts = append(receipts, res.Receipt)
			}
		}
	}
	require.Positive(t, held, "no lease held tokens")
	require.Positive(t, capped, "no bucket reached C − H")
	t.Logf("%d steps held tokens, %d of them with the bucket at C − H", held, capped)
}
