package test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/exactness"
)

var exactnessSeedFlag = flag.Uint64("exactness.seed", 0, "the seed of the exactness tests' generated schedules (0: a fresh one for each test)")

// phaseKind is what a replica's callers do during a phase.
type phaseKind uint8

const (
	// idle: nothing.
	idle phaseKind = iota
	// steady: each caller calls, waits the phase's gap, and calls again.
	steady
	// burst: each caller calls as fast as answers come, and stops dead
	// when the phase ends.
	burst
)

// phase is a stretch of one replica's schedule.
type phase struct {
	kind    phaseKind
	length  time.Duration
	callers int
	gap     time.Duration
}

func (p phase) String() string {
	switch p.kind {
	case steady:
		return fmt.Sprintf("steady %s ×%d every %s", p.length, p.callers, p.gap)
	case burst:
		return fmt.Sprintf("burst %s ×%d", p.length, p.callers)
	}
	return fmt.Sprintf("idle %s", p.length)
}

// The descriptor keys of a schedule's limits.
const (
	// takeKey's hits are taken, checked and given back (is_negative_hits).
	takeKey = "take"
	// chargeKey's hits are charges, and checked.
	chargeKey = "charge"
)

// schedule is a generated run: per replica a sequence of phases, a reload
// that lowers takeKey's limit and Redis losing its state, each at a time
// into the run (0 for none), all drawn from seed.
type schedule struct {
	seed     uint64
	alg      algorithms.Algorithm
	take     exactness.Limit
	charge   exactness.Limit
	lowered  exactness.Limit
	phases   [][]phase
	reloadAt time.Duration
	flushAt  time.Duration
	length   time.Duration
}

// newSchedule draws a schedule of length for replicas replicas of alg from
// seed: limits of one second, from a few hundred a second to 20 000 for a
// bucket.
func newSchedule(seed uint64, alg algorithms.Algorithm, replicas int, length time.Duration) *schedule {
	rng := rand.New(rand.NewPCG(seed, uint64(alg)<<8|uint64(replicas)))
	s := &schedule{seed: seed, alg: alg, length: length}
	var requests []uint64
	switch alg {
	case algorithms.TokenBucket:
		requests = []uint64{300, 2000, 20000}
	case algorithms.SlidingWindowLog:
		requests = []uint64{300, 1000, 3000}
	default:
		requests = []uint64{300, 1000}
	}
	L := requests[rng.IntN(len(requests))]
	s.take = limitOf(alg, L, time.Second, 0)
	if alg == algorithms.TokenBucket {
		s.take.Burst = []uint64{L, L / 2, 2 * L}[rng.IntN(3)]
	}
	s.charge = s.take
	s.charge.Debt = rng.IntN(2) == 0
	s.lowered = s.take
	s.lowered.Requests, s.lowered.Burst = L/2, s.take.Burst/2
	if rng.IntN(2) == 0 {
		s.reloadAt = length/4 + time.Duration(rng.Int64N(int64(length/2)))
	}
	if rng.IntN(2) == 0 {
		s.flushAt = length/4 + time.Duration(rng.Int64N(int64(length/2)))
		if s.reloadAt != 0 && (s.flushAt-s.reloadAt).Abs() < 300*time.Millisecond {
			s.flushAt = s.reloadAt + 300*time.Millisecond
		}
	}
	s.phases = make([][]phase, replicas)
	for r := range s.phases {
		for total := time.Duration(0); total < length; {
			var p phase
			switch x := rng.IntN(100); {
			case x < 20:
				p = phase{kind: idle, length: ms(100 + rng.IntN(300))}
			case x < 65:
				p = phase{kind: steady, length: ms(300 + rng.IntN(500)), callers: 1 + rng.IntN(2),
					gap: ms([]int{1, 2, 5, 10}[rng.IntN(4)])}
			default:
				p = phase{kind: burst, length: ms(100 + rng.IntN(300)), callers: 2 + rng.IntN(3)}
			}
			p.length = min(p.length, length-total)
			s.phases[r] = append(s.phases[r], p)
			total += p.length
		}
	}
	return s
}

// ms returns n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// String returns the schedule in a few lines.
func (s *schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s, %s %d/%s burst %d, charges %d/%s debt %v", s.seed, s.length, s.alg,
		s.take.Requests, s.take.Window, s.take.Capacity(), s.charge.Requests, s.charge.Window, s.charge.Debt)
	if s.reloadAt != 0 {
		fmt.Fprintf(&b, ", reload to %d at %s", s.lowered.Requests, s.reloadAt)
	}
	if s.flushAt != 0 {
		fmt.Fprintf(&b, ", FLUSHALL at %s", s.flushAt)
	}
	for r, ps := range s.phases {
		var parts []string
		for _, p := range ps {
			parts = append(parts, p.String())
		}
		fmt.Fprintf(&b, "\n  replica %d: %s", r, strings.Join(parts, ", "))
	}
	return b.String()
}

// rules returns the limits file's rules of the schedule.
func (s *schedule) rules() map[string]exactnessRule {
	return map[string]exactnessRule{
		takeKey:   {limit: s.take, refunds: true},
		chargeKey: {limit: s.charge, charges: true},
	}
}

// maxHits returns the most hits one call may ask of l: its capacity, and
// no more than a sliding window log allows (RLS_MAX_LOG_HITS, 100).
func maxHits(l exactness.Limit) uint64 {
	if l.Algorithm == algorithms.SlidingWindowLog {
		return min(l.Capacity(), 100)
	}
	return l.Capacity()
}

// caller is one of a phase's callers: its own random numbers, and the hits
// it took and has not given back.
type caller struct {
	id          int
	rng         *rand.Rand
	outstanding uint64
}

// next returns the caller's next call: mostly takes of 1 hit, of a few,
// and now and then of up to the limit; checks; charges; and refunds of
// hits it took.
func (s *schedule) next(c *caller) (string, exactness.Kind, uint64) {
	hits := func(l exactness.Limit) uint64 {
		switch x := c.rng.IntN(100); {
		case x < 70:
			return 1
		case x < 95:
			return uint64(2 + c.rng.IntN(4))
		default:
			return 1 + c.rng.Uint64N(maxHits(l))
		}
	}
	switch x := c.rng.IntN(100); {
	case x < 60:
		return takeKey, exactness.Take, hits(s.take)
	case x < 70:
		return takeKey, exactness.Check, 0
	case x < 82:
		return chargeKey, exactness.Charge, hits(s.charge)
	case x < 87:
		return chargeKey, exactness.Check, 0
	case c.outstanding > 0:
		return takeKey, exactness.Refund, 1 + c.rng.Uint64N(min(c.outstanding, 3))
	}
	return takeKey, exactness.Take, 1
}

// play runs the schedule against run: every replica's phases at once,
// from now, and the reload and the flush when their times come. It
// returns once every phase has ended.
func (s *schedule) play(ctx context.Context, run *exactnessRun) {
	start := time.Now()
	var wg sync.WaitGroup
	for r, phases := range s.phases {
		wg.Go(func() {
			at := start
			for i, p := range phases {
				end := at.Add(p.length)
				var callers sync.WaitGroup
				for k := range p.callers {
					c := &caller{id: r*1000 + i*10 + k, rng: rand.New(rand.NewPCG(s.seed, uint64(r*1000+i*10+k)))}
					callers.Go(func() { s.call(ctx, run, r, c, p, end) })
				}
				callers.Wait()
				time.Sleep(time.Until(end))
				at = end
			}
		})
	}
	if s.reloadAt != 0 {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(s.reloadAt)))
			if err := run.reload(ctx, takeKey, s.lowered); err != nil {
				run.t.Error(err)
			}
		})
	}
	if s.flushAt != 0 {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(s.flushAt)))
			if err := run.flush(ctx); err != nil {
				run.t.Error(err)
			}
		})
	}
	wg.Wait()
}

// call makes c's calls of phase p to replica r until end.
func (s *schedule) call(ctx context.Context, run *exactnessRun, r int, c *caller, p phase, end time.Time) {
	for time.Now().Before(end) && ctx.Err() == nil {
		key, kind, n := s.next(c)
		got := run.call(ctx, r, c.id, key, kind, n)
		switch {
		case got.Err != nil:
		case kind == exactness.Take && got.Allowed:
			c.outstanding += n
		case kind == exactness.Refund:
			c.outstanding -= n
		}
		if p.kind == steady {
			time.Sleep(min(p.gap, time.Until(end)))
		}
	}
}

// leaseAllowance returns what the leases of replicas replicas may hold of
// the limits of h, by the rule of internal/layers/lease's documentation:
// each replica holds at most two leases of a limit, each at most its
// demand over the lease time tau plus the hits of one request, and a
// quarter of the limit. The demand is the most hits asked of a replica in
// any 100 ms, scaled to tau.
func leaseAllowance(h exactness.History, replicas int, tau time.Duration) uint64 {
	const period = 100 * time.Millisecond
	var most uint64
	for key, l := range h.Limits {
		var all uint64
		for r := range replicas {
			var calls []exactness.Call
			var largest uint64
			for _, c := range h.Calls {
				if c.Limit == key && c.Replica == r && (c.Kind == exactness.Take || c.Kind == exactness.Charge) {
					calls = append(calls, c)
					largest = max(largest, c.Hits)
				}
			}
			var peak, window uint64
			first := 0
			for _, c := range calls {
				window += c.Hits
				for calls[first].Sent.Before(c.Sent.Add(-period)) {
					window -= calls[first].Hits
					first++
				}
				peak = max(peak, window)
			}
			want := peak*uint64(tau)/uint64(period) + largest
			all += 2 * min(want, (l.Capacity()+3)/4)
		}
		most = max(most, all)
	}
	return most
}

// refundAllowance returns the most hits of h given back (is_negative_hits)
// in any second: a replica's deny cache does not see what is given back
// through another, and may deny into that room for up to a second
// (docs/redis.md, the deny cache).
func refundAllowance(h exactness.History) uint64 {
	var most, window uint64
	var refunds []exactness.Call
	for _, c := range h.Calls {
		if c.Kind == exactness.Refund {
			refunds = append(refunds, c)
		}
	}
	first := 0
	for _, c := range refunds {
		window += c.Hits
		for refunds[first].Sent.Before(c.Sent.Add(-time.Second)) {
			window -= refunds[first].Hits
			first++
		}
		most = max(most, window)
	}
	return most
}
