package algorithms_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The properties below are what leases promise. A holder takes a lease of k
// hits, serves them locally, and settles its leases with every call it makes
// on the limit: each hit it served, at the time it served it, and, for the
// leases that end, the hits they did not serve. So:
//
//   - whatever several holders do, the hits served and taken in any span stay
//     within the limit's rule (TestLeasesStayWithinTheLimit);
//   - one holder's leases change no answer: the state, settled, is the state
//     of a limit that took each hit when it was served, and the state as a
//     lease's answer shows it, settled at once, tells what that limit would
//     answer (TestOneHolderLeasesChangeNoAnswer).

// piece is a lease a simulated holder serves hits from.
type piece struct {
	receipt  algorithms.Receipt
	hold     time.Duration
	size     uint64
	reported uint64
	pending  []algorithms.Served
	left     uint64
	next     uint64 // the sequence number of the next hit served (a log's)
	end      int64  // µs: it serves no hit from then on
}

// holder is one replica's leases of a limit.
type holder struct{ pieces []*piece }

// lease takes a lease of k at now held for hold, serving until now + serve,
// or, for an algorithm that counts in windows, until its window ends if
// that is sooner, as the lease layer does.
func (h *holder) lease(st algorithms.State, l algorithms.Limit, now time.Time, k uint64, hold, serve time.Duration) algorithms.Result {
	res := st.Lease(l, now, k, hold)
	if res.Allowed && k > 0 {
		end := now.Add(serve)
		if ws := l.WindowStart(l.WindowIndex(now) + 1); l.Algorithm.Spec().Windowed && ws.Before(end) {
			end = ws
		}
		h.pieces = append(h.pieces, &piece{receipt: res.Receipt, hold: hold, size: k, left: k,
			next: res.Receipt.Seq, end: end.UnixMicro()})
	}
	return res
}

// serve serves n hits at t from the first lease that holds them, and
// reports whether one did.
func (h *holder) serve(t int64, n uint64) bool {
	for _, p := range h.pieces {
		if p.left >= n && t < p.end {
			if n > 0 {
				p.pending = append(p.pending, algorithms.Served{At: t, Seq: p.next, N: n})
				p.next += n
				p.left -= n
			}
			return true
		}
	}
	return false
}

// settlement returns the settlement of every lease the holder holds: what
// each served since the last one, and, when done says so of a lease, its end.
// It forgets the leases that end, and what it reports.
func (h *holder) settlement(done func(*piece) bool) []algorithms.Lease {
	var out []algorithms.Lease
	kept := h.pieces[:0]
	for _, p := range h.pieces {
		ls := algorithms.Lease{Receipt: p.receipt, Hold: p.hold, Size: p.size, Reported: p.reported,
			Served: p.pending, Close: done(p)}
		for _, s := range p.pending {
			p.reported += s.N
		}
		p.pending = nil
		if len(ls.Served) > 0 || ls.Close {
			out = append(out, ls)
		}
		if !ls.Close {
			kept = append(kept, p)
		}
	}
	h.pieces = kept
	return out
}

// all reports true of every lease.
func all(*piece) bool { return true }

// event is hits admitted at t (µs): served from a lease, or taken.
type event struct {
	t int64
	n uint64
}

// withinRule checks the hits of events, in order of time, against l's rule:
// a log holds at most L in any span shorter than W, a bucket at most B plus
// the refill of the slices that start in a span, a fixed window at most L in
// a window. A sliding window counter is approximate and is not checked.
func withinRule(t *testing.T, l algorithms.Limit, events []event, what string) {
	t.Helper()
	slices.SortStableFunc(events, func(a, b event) int { return int(a.t - b.t) })
	w, q := l.WindowMicros(), l.SliceMicros()
	for i, a := range events {
		var hits uint64
		for _, b := range events[i:] {
			hits += b.n
			switch l.Algorithm {
			case algorithms.SlidingWindowLog:
				if b.t-a.t < w {
					require.LessOrEqual(t, hits, l.Requests, "%s: hits in [%d, %d]µs", what, a.t-t0.UnixMicro(), b.t-t0.UnixMicro())
				}
			case algorithms.TokenBucket:
				refill := uint64(b.t/q-a.t/q) * l.Requests
				require.LessOrEqual(t, hits*algorithms.SlicesPerWindow, l.Capacity()*algorithms.SlicesPerWindow+refill,
					"%s: tokens in [%d, %d]µs", what, a.t-t0.UnixMicro(), b.t-t0.UnixMicro())
			case algorithms.FixedWindow:
				if b.t/w == a.t/w {
					require.LessOrEqual(t, hits, l.Requests, "%s: hits in the window of %dµs", what, a.t-t0.UnixMicro())
				}
			}
		}
	}
}

// leasedLimits are the limits the lease properties draw from.
func leasedLimit(rng *rand.Rand, a algorithms.Algorithm) algorithms.Limit {
	l := algorithms.Limit{Algorithm: a, Requests: 1 + rng.Uint64N(30), Window: []time.Duration{time.Second, time.Minute}[rng.IntN(2)]}
	if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
		l.Burst = 1 + rng.Uint64N(60)
	}
	return l
}

// TestLeasesStayWithinTheLimit: several holders lease one limit, serve hits
// while their leases last, settle them now and then, some only after their
// leases have ended (a holder that came back late), while takes go on
// beside them: the hits served and taken stay within the limit's rule.
func TestLeasesStayWithinTheLimit(t *testing.T) {
	for _, a := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowLog, algorithms.TokenBucket} {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(26, uint64(a)))
			late := 0
			for seq := range 300 {
				l := leasedLimit(rng, a)
				st := algorithms.NewState(a)
				holders := make([]holder, 1+rng.IntN(3))
				var events []event
				now := t0
				w := l.WindowMicros()
				for range 80 {
					switch r := rng.IntN(10); {
					case r < 4:
						now = now.Add(time.Duration(rng.Int64N(w/20+1)) * time.Microsecond)
					case r < 5:
						now = now.Add(time.Duration(rng.Int64N(w/2+1)) * time.Microsecond)
					case r < 6:
						now = now.Add(time.Duration(rng.Int64N(4)) * time.Microsecond)
					}
					tm := now.UnixMicro()
					h := &holders[rng.IntN(len(holders))]
					n := rng.Uint64N(min(l.Capacity(), 4) + 1)
					switch r := rng.IntN(10); {
					case r < 4:
						if h.serve(tm, n) && n > 0 {
							events = append(events, event{tm, n})
						}
					case r < 6:
						hold := time.Duration(1+rng.Int64N(w/5+1)) * time.Microsecond
						k := rng.Uint64N(l.Capacity() + 1)
						h.lease(st, l, now, k, hold, hold)
					case r < 8:
						// A settlement, as a holder makes one with each
						// call: the leases that ended or ran out end, and
						// now and then one that could go on.
						ended := func(p *piece) bool { return tm >= p.end || p.left == 0 || rng.IntN(4) == 0 }
						if ls := h.settlement(ended); len(ls) > 0 {
							for _, x := range ls {
								if x.Close && tm >= x.Receipt.At+x.Hold.Microseconds() {
									late++
								}
							}
							st.Settle(l, now, ls)
						}
					default:
						if st.Take(l, now, n).Allowed && n > 0 {
							events = append(events, event{tm, n})
						}
					}
				}
				withinRule(t, l, events, fmt.Sprintf("sequence %d (L=%d B=%d W=%s, %d holders)", seq, l.Requests, l.Burst, l.Window, len(holders)))
			}
			t.Logf("%d settlements came after their leases had ended", late)
		})
	}
}

// TestOneHolderLeasesChangeNoAnswer: one holder leases a limit as the lease
// layer does, beside the same limit without leases, which takes each hit
// when the holder serves it. A hit the holder serves is one the limit
// without leases admits; a take it cannot serve, sent to the state after
// its leases are settled and ended, gets the answer the limit without
// leases gives; and the state as a lease's answer shows it, with the
// holder's leases settled and ended there, answers a check as the limit
// without leases does, then and as the holder serves more.
func TestOneHolderLeasesChangeNoAnswer(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(26, 100+uint64(a)))
			served, reported, capped := 0, 0, 0
			for seq := range 300 {
				l := leasedLimit(rng, a)
				st, ref := algorithms.NewState(a), algorithms.NewState(a)
				var h holder
				var mirror algorithms.State
				settle := func(now time.Time, ls []algorithms.Lease) {
					for _, x := range ls {
						if len(x.Served) > 0 {
							reported++
							if b, ok := st.(*algorithms.TokenBucketState); ok && b.Capped() {
								capped++
							}
							break
						}
					}
					st.Settle(l, now, ls)
				}
				now := t0
				w := l.WindowMicros()
				// τ: a lease serves for τ and is held for 2τ, and the holder
				// settles it before its hold ends.
				tau := time.Duration(1+rng.Int64N(w/10+1)) * time.Microsecond
				for i := range 100 {
					what := fmt.Sprintf("sequence %d step %d (L=%d B=%d W=%s τ=%s) at %dµs", seq, i, l.Requests, l.Burst, l.Window, tau, now.Sub(t0).Microseconds())
					switch r := rng.IntN(10); {
					case r < 5:
						now = now.Add(time.Duration(rng.Int64N(tau.Microseconds()/4+1)) * time.Microsecond)
					case r < 6:
						now = now.Add(time.Duration(rng.Int64N(4)) * time.Microsecond)
					}
					tm := now.UnixMicro()
					// The holder settles what ended before its hold ends:
					// its sweeper does.
					if ls := h.settlement(func(p *piece) bool { return tm >= p.end }); len(ls) > 0 {
						settle(now, ls)
						mirror = nil
					}
					n := rng.Uint64N(min(l.Capacity(), 3) + 1)
					if rng.IntN(4) == 0 {
						// A lease, taken ahead or for a take.
						k := 1 + rng.Uint64N(l.Capacity())
						if ls := h.settlement(func(p *piece) bool { return p.left == 0 }); len(ls) > 0 {
							settle(now, ls)
						}
						res := h.lease(st, l, now, k, 2*tau, tau)
						if res.Allowed {
							// The state the answer shows, with the holder's
							// leases settled and ended: the limit as the
							// holder sees it without them.
							mirror = res.State
							if mirror == nil {
								mirror = st.Clone()
							}
							mirror.Settle(l, now, pendingOf(&h))
							ok := mirror.Take(l, now, 0)
							want := ref.Clone().Take(l, now, 0)
							require.Equal(t, want.Remaining, ok.Remaining, "%s: a lease's state, settled, answers a check", what)
						}
						continue
					}
					if h.serve(tm, n) {
						got := ref.Take(l, now, n)
						require.True(t, got.Allowed, "%s: a hit of %d served from a lease that the limit without leases denies", what, n)
						served++
						if mirror != nil {
							m := mirror.Take(l, now, n)
							require.True(t, m.Allowed, "%s: the lease's state denies a hit it served", what)
							require.Equal(t, got.Remaining, m.Remaining, "%s: remaining of a served hit", what)
						}
						continue
					}
					// A take no lease serves: the holder settles and ends its
					// leases, then sends the take.
					if ls := h.settlement(all); len(ls) > 0 {
						settle(now, ls)
					}
					mirror = nil
					want := ref.Take(l, now, n)
					got := st.Take(l, now, n)
					require.Equal(t, fmt.Sprintf("allowed=%t remaining=%d", want.Allowed, want.Remaining),
						fmt.Sprintf("allowed=%t remaining=%d", got.Allowed, got.Remaining), "%s: a take of %d after the leases were settled", what, n)
				}
			}
			require.Positive(t, served, "no hit was served from a lease")
			require.Positive(t, reported, "no settlement reported served hits")
			if a == algorithms.TokenBucket {
				require.Positive(t, capped, "no settlement found the bucket at its cap")
			}
			t.Logf("%d hits served from leases; %d settlements reported served hits, %d of them with the bucket at its cap", served, reported, capped)
		})
	}
}

// pendingOf returns, without forgetting it, the settlement that ends every
// lease of h: how the holder sees the limit without its leases.
func pendingOf(h *holder) []algorithms.Lease {
	var out []algorithms.Lease
	for _, p := range h.pieces {
		out = append(out, algorithms.Lease{Receipt: p.receipt, Hold: p.hold, Size: p.size, Reported: p.reported,
			Served: slices.Clone(p.pending), Close: true})
	}
	return out
}

// TestTokenBucketHoldInvariant: whatever happens (takes, leases, settlements
// of leases and refunds, charges and records, clocks going back, changed
// rates and bursts), the level and the tokens that leases hold add up to at
// most the capacity, what is held is held until a time to come, a denial
// changes nothing, and the state does not expire while it holds tokens.
func TestTokenBucketHoldInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	held, capped := 0, 0
	for seq := range 400 {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 1 + rng.Uint64N(20), Window: []time.Duration{time.Second, time.Minute, day}[rng.IntN(3)]}
		var st algorithms.TokenBucketState
		var h holder
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
			op := rng.IntN(8)
			switch op {
			case 0:
				res = st.Take(l, now, n)
			case 1, 2:
				res = h.lease(&st, l, now, n, hold, hold)
			case 3:
				// Served locally: the state does not change.
				h.serve(now.UnixMicro(), n)
				continue
			case 4:
				st.Settle(l, now, h.settlement(func(*piece) bool { return rng.IntN(2) == 0 }))
				res = algorithms.Result{Allowed: true}
			case 5:
				res = st.Refund(l, now, n, algorithms.Receipt{})
			case 6:
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
		}
	}
	require.Positive(t, held, "no lease held tokens")
	require.Positive(t, capped, "no bucket reached C − H")
	t.Logf("%d steps held tokens, %d of them with the bucket at C − H", held, capped)
}

// TestSettlementOfALostStateChangesNothing: a settlement of leases that a
// state never took (it was lost, and the limit started again) gives
// nothing back to the new state.
func TestSettlementOfALostStateChangesNothing(t *testing.T) {
	for _, a := range algorithms.Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: a, Requests: 100, Window: time.Hour}
			old := algorithms.NewState(a)
			var h holder
			require.True(t, h.lease(old, l, t0, 60, time.Second, time.Second).Allowed)
			require.True(t, h.serve(t0.UnixMicro()+10, 5))
			// The state is lost; the new one is taken whole by another
			// holder, then the first settles its lease.
			now := t0.Add(time.Millisecond)
			fresh := algorithms.NewState(a)
			require.True(t, fresh.Take(l, now, 100).Allowed)
			fresh.Settle(l, now.Add(time.Millisecond), h.settlement(all))
			got := fresh.Take(l, now.Add(2*time.Millisecond), 1)
			require.False(t, got.Allowed, "a take after the settlement of a lease the state never took")
			require.Zero(t, got.Remaining)
		})
	}
}

// TestCompactServedSettlesAlike: a settlement of a bucket's lease with its
// served runs compacted (CompactServed, all but the last slice's) leaves the
// bucket as the runs themselves do, and a window's with their number.
func TestCompactServedSettlesAlike(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 7))
	shorter := 0
	for seq := range 2000 {
		a := []algorithms.Algorithm{algorithms.TokenBucket, algorithms.FixedWindow, algorithms.SlidingWindowCounter}[seq%3]
		l := leasedLimit(rng, a)
		if a == algorithms.TokenBucket && rng.IntN(2) == 0 {
			l.Requests = 1_000 + rng.Uint64N(100_000)
			l.Burst = l.Requests / 10
		}
		st := algorithms.NewState(a)
		now := t0
		// Bring the bucket to its cap or below it.
		if rng.IntN(2) == 0 {
			st.Take(l, now, rng.Uint64N(l.Capacity()+1))
		}
		now = now.Add(time.Duration(rng.Int64N(2000)) * time.Microsecond)
		k := l.Capacity()
		hold := 100 * time.Millisecond
		res := st.Lease(l, now, k, hold)
		if !res.Allowed || k == 0 {
			continue
		}
		var served []algorithms.Served
		at, left := now.UnixMicro(), k
		for left > 0 && rng.IntN(40) > 0 {
			at += rng.Int64N(300)
			n := min(left, 1+rng.Uint64N(3))
			served = append(served, algorithms.Served{At: at, N: n})
			left -= n
		}
		settleAt := time.UnixMicro(at + rng.Int64N(3000))
		ls := algorithms.Lease{Receipt: res.Receipt, Hold: hold, Size: k, Served: served, Close: rng.IntN(2) == 0}
		recent := settleAt.UnixMicro() - l.SliceMicros()
		compact, capped := ls, ls
		compact.Served = algorithms.CompactServed(l, slices.Clone(served), recent, len(served)+1)
		capped.Served = algorithms.CompactServed(l, slices.Clone(served), recent, 4)
		if len(compact.Served) < len(served) {
			shorter++
		}
		raw, packed, few := st.Clone(), st.Clone(), st.Clone()
		raw.Settle(l, settleAt, []algorithms.Lease{ls})
		packed.Settle(l, settleAt, []algorithms.Lease{compact})
		few.Settle(l, settleAt, []algorithms.Lease{capped})
		for _, d := range []time.Duration{0, time.Millisecond, l.Window / 3} {
			want := raw.Clone().Take(l, settleAt.Add(d), 0)
			require.Equal(t, want, packed.Clone().Take(l, settleAt.Add(d), 0),
				"sequence %d (%s L=%d B=%d): %d runs compacted to %d", seq, a, l.Requests, l.Burst, len(served), len(compact.Served))
			// Four runs at most: never more back than all of them give.
			require.LessOrEqual(t, few.Clone().Take(l, settleAt.Add(d), 0).Remaining, want.Remaining, "sequence %d: at most 4 runs", seq)
		}
	}
	require.Positive(t, shorter, "nothing was compacted")
}

// TestCompactServedLeavesItsInput: compacting runs changes none of them.
func TestCompactServedLeavesItsInput(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Window: time.Second}
	served := []algorithms.Served{{At: 10, N: 1}, {At: 20, N: 2}, {At: 30, N: 3}, {At: 40, N: 4}}
	before := slices.Clone(served)
	got := algorithms.CompactServed(l, served, 25, 2)
	require.Equal(t, before, served)
	var n uint64
	for _, s := range got {
		n += s.N
	}
	require.EqualValues(t, 10, n, "every hit in the compacted runs")
	require.LessOrEqual(t, len(got), 2)
}

// TestARefundWithoutReceiptLeavesLeasesHits: a log of 10 a second, where
// one holder leases 5 (logged at the lease's end) and a take logs 3 at
// now; a refund of 3 without a receipt gives back the take's 3, the newest
// logged by now, not 3 of the lease's, which it serves afterwards. Once the
// take's hits would have left the window, the 5 served still count: a take
// of 6 is denied, 5 admitted.
func TestARefundWithoutReceiptLeavesLeasesHits(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Window: time.Second}
	st := algorithms.NewState(l.Algorithm)
	var h holder
	hold := 550 * time.Millisecond
	require.True(t, h.lease(st, l, t0, 5, hold, 50*time.Millisecond).Allowed)
	require.True(t, st.Take(l, t0, 3).Allowed)
	require.Equal(t, uint64(5), st.Refund(l, t0.Add(time.Millisecond), 3, algorithms.Receipt{}).Remaining)
	served := t0.Add(2 * time.Millisecond)
	require.True(t, h.serve(served.UnixMicro(), 5))
	st.Settle(l, t0.Add(3*time.Millisecond), h.settlement(all))

	later := t0.Add(time.Second + time.Millisecond)
	require.False(t, st.Clone().Take(l, later, 6).Allowed, "the 5 served at 2 ms are in the window")
	require.True(t, st.Take(l, later, 5).Allowed)
}
