package algorithms_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// A hot limit is served from leases that replicas take one after another,
// each held for the lease time τ after it was taken, so that several of one
// bucket are live at every instant. The bucket's holds must end with the
// leases: a client well within its limit is not denied, and one beyond it
// gets the bucket's rate, no more and not much less.

// leaseTime, leaseMinHits are the lease layer's defaults: τ, and the
// smallest lease it takes.
const (
	leaseTime    = 50 * time.Millisecond
	leaseMinHits = 8
)

// simLease is a lease a replica serves hits from until its end.
type simLease struct {
	receipt algorithms.Receipt
	size    uint64
	left    uint64
	end     int64 // µs
	served  []algorithms.Served
}

// serves reports whether the lease holds a hit at t.
func (ls *simLease) serves(t int64) bool { return ls != nil && ls.left > 0 && t < ls.end }

// simReplica leases one bucket as the lease layer does, for a demand it is
// given (hits per second) rather than one it measures: a lease of
// k = min(demand·τ + n, room/4, B) hits, none when that is under
// leaseMinHits or not more than the n the take asks for; the next lease
// taken ahead once a quarter of the current one, or of its time, is left;
// what a lease did not use given back when it can serve no more; and a
// take of its own hit when no lease serves it.
type simReplica struct {
	demand    float64
	room      uint64
	roomKnown bool
	cur, next *simLease
	// leases and takes count the leases and the single takes it sent.
	leases, takes uint64
}

func (r *simReplica) size(l algorithms.Limit, n uint64) uint64 {
	want := uint64(r.demand * leaseTime.Seconds())
	if !r.roomKnown || want < leaseMinHits {
		return 0
	}
	k := min(want+n, r.room/4, l.Capacity())
	if k <= n || k < leaseMinHits {
		return 0
	}
	return k
}

// lease takes a lease of k at now, n of its hits used at once.
func (r *simReplica) lease(st *algorithms.TokenBucketState, l algorithms.Limit, now time.Time, k, n uint64) *simLease {
	res := st.Lease(l, now, k, 2*leaseTime)
	r.room, r.roomKnown = res.Remaining, true
	r.leases++
	if !res.Allowed {
		return nil
	}
	ls := &simLease{receipt: res.Receipt, size: k, left: k - n, end: now.Add(leaseTime).UnixMicro()}
	if n > 0 {
		ls.served = []algorithms.Served{{At: now.UnixMicro(), N: n}}
	}
	return ls
}

// giveBack settles ls: when it served its hits, and what it did not use.
func (r *simReplica) giveBack(st *algorithms.TokenBucketState, l algorithms.Limit, now time.Time, ls *simLease) {
	if ls != nil {
		st.Settle(l, now, []algorithms.Lease{{Receipt: ls.receipt, Hold: 2 * leaseTime, Size: ls.size, Served: ls.served, Close: true}})
	}
}

// hit asks for one hit at now and reports whether it was admitted.
func (r *simReplica) hit(st *algorithms.TokenBucketState, l algorithms.Limit, now time.Time) bool {
	t := now.UnixMicro()
	if !r.cur.serves(t) {
		r.giveBack(st, l, now, r.cur)
		r.cur = nil
		if r.next.serves(t) {
			r.cur, r.next = r.next, nil
		} else {
			r.giveBack(st, l, now, r.next)
			r.next = nil
			if k := r.size(l, 1); k > 0 {
				if r.cur = r.lease(st, l, now, k, 1); r.cur != nil {
					return true
				}
			}
			res := st.Take(l, now, 1)
			r.room, r.roomKnown = res.Remaining, true
			r.takes++
			return res.Allowed
		}
	}
	ls := r.cur
	ls.left--
	ls.served = append(ls.served, algorithms.Served{At: t, N: 1})
	if r.next == nil && (ls.left*4 <= ls.size || (ls.end-t)*4 <= leaseTime.Microseconds()) {
		if k := r.size(l, 0); k > 0 {
			r.next = r.lease(st, l, now, k, 0)
		}
	}
	return true
}

// steadyRun is what a run of steadyLeasing admitted, and the leases and
// single takes its replicas sent for it.
type steadyRun struct{ admitted, leases, takes uint64 }

func (r steadyRun) String() string {
	return fmt.Sprintf("%d admitted, %d leases and %d single takes sent", r.admitted, r.leases, r.takes)
}

// steadyLeasing runs replicas that share asked hits per second equally, each
// asking at even intervals, against one bucket for d, and returns what they
// admitted and sent. It calls check with the hits admitted since the start and the
// time into the run (µs) after each admitted hit.
func steadyLeasing(l algorithms.Limit, replicas int, asked float64, d time.Duration, check func(admitted uint64, t int64)) steadyRun {
	var st algorithms.TokenBucketState
	rs := make([]simReplica, replicas)
	gap := make([]float64, replicas) // ns between hits
	at := make([]float64, replicas)  // ns into the run of the next hit
	for i := range rs {
		rs[i].demand = asked / float64(replicas)
		gap[i] = 1e9 / rs[i].demand
		at[i] = gap[i] * float64(i) / float64(replicas)
	}
	var admitted uint64
	for {
		i := 0
		for j := range at {
			if at[j] < at[i] {
				i = j
			}
		}
		if at[i] >= float64(d) {
			run := steadyRun{admitted: admitted}
			for _, r := range rs {
				run.leases += r.leases
				run.takes += r.takes
			}
			return run
		}
		now := t0.Add(time.Duration(at[i]))
		at[i] += gap[i]
		if rs[i].hit(&st, l, now) {
			admitted++
			check(admitted, now.UnixMicro()-t0.UnixMicro())
		}
	}
}

// servedBucket is a bucket of the limit's capacity and rate that takes each
// hit when a replica serves it: a bucket that admitted them as they were
// served never goes below zero. That is the bucket's bound on every span:
// the hits served in any span are at most the burst plus the refill of the
// slices that start in it.
type servedBucket struct {
	l            algorithms.Limit
	level, slice int64
}

func newServedBucket(l algorithms.Limit) *servedBucket {
	return &servedBucket{l: l, level: int64(l.Capacity() * algorithms.SlicesPerWindow), slice: t0.UnixMicro() / l.SliceMicros()}
}

// serve takes a hit served at t (µs) and reports whether the bucket held it.
func (b *servedBucket) serve(t int64) bool {
	if tau := t / b.l.SliceMicros(); tau > b.slice {
		b.level = min(int64(b.l.Capacity()*algorithms.SlicesPerWindow), b.level+(tau-b.slice)*int64(b.l.Requests))
		b.slice = tau
	}
	b.level -= algorithms.SlicesPerWindow
	return b.level >= 0
}

// TestTokenBucketSteadyLeasing: replicas leasing a bucket steadily get what
// they ask within its rate, mostly from leases, and its rate when they ask
// more; and the hits they serve, when they serve them, stay within the
// bucket.
func TestTokenBucketSteadyLeasing(t *testing.T) {
	const d = 3 * time.Second
	for _, l := range []algorithms.Limit{
		{Algorithm: algorithms.TokenBucket, Requests: 100_000, Window: time.Second, Burst: 5_000},
		{Algorithm: algorithms.TokenBucket, Requests: 1_000, Window: time.Second, Burst: 100},
	} {
		rate := float64(l.Requests) / l.Window.Seconds()
		for _, replicas := range []int{1, 2} {
			for _, asked := range []float64{0.8 * rate, 2 * rate} {
				t.Run(fmt.Sprintf("L=%d B=%d %d replicas asked %.0f%%", l.Requests, l.Burst, replicas, 100*asked/rate), func(t *testing.T) {
					b := newServedBucket(l)
					run := steadyLeasing(l, replicas, asked, d, func(admitted uint64, at int64) {
						if !b.serve(t0.UnixMicro() + at) {
							require.Fail(t, "served beyond the bucket", "hit %d served %dµs into the run", admitted, at)
						}
					})
					got := float64(run.admitted)
					t.Logf("asked %.0f/s, admitted %.0f/s (%.1f%% of asked): %s", asked, got/d.Seconds(), 100*got/(asked*d.Seconds()), run)
					if asked < rate {
						require.GreaterOrEqual(t, got, 0.97*asked*d.Seconds(), "admitted")
						// The leases serve the hits: hardly any is taken
						// singly, for want of a lease.
						require.LessOrEqual(t, float64(run.takes), 0.01*got, "single takes for %.0f hits", got)
						return
					}
					require.GreaterOrEqual(t, got, 0.95*rate*d.Seconds(), "admitted")
				})
			}
		}
	}
}
