package algorithms_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The references below follow the package documentation's formulas word for
// word in math/big, where nothing can overflow, and record the largest
// intermediate value they form. The property tests check the uint64/int64
// code against them over random limits up to 2^32−1 per window, windows up
// to ten years, clocks that jump forwards by years and backwards, and
// changed limits.

// two53 is 2^53, the bound below which a Lua number is an exact integer.
var two53 = new(big.Int).Lsh(big.NewInt(1), 53)

// bigMath evaluates integer expressions and remembers the largest magnitude
// it has produced.
type bigMath struct{ max *big.Int }

func (m *bigMath) note(x *big.Int) *big.Int {
	if a := new(big.Int).Abs(x); m.max == nil || a.Cmp(m.max) > 0 {
		m.max = a
	}
	return x
}
func (m *bigMath) n(x int64) *big.Int         { return big.NewInt(x) }
func (m *bigMath) u(x uint64) *big.Int        { return new(big.Int).SetUint64(x) }
func (m *bigMath) add(a, b *big.Int) *big.Int { return m.note(new(big.Int).Add(a, b)) }
func (m *bigMath) sub(a, b *big.Int) *big.Int { return m.note(new(big.Int).Sub(a, b)) }
func (m *bigMath) mul(a, b *big.Int) *big.Int { return m.note(new(big.Int).Mul(a, b)) }

// floor returns ⌊a/b⌋ for b > 0.
func (m *bigMath) floor(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return m.note(q)
}

// ceil returns ⌈a/b⌉ for b > 0.
func (m *bigMath) ceil(a, b *big.Int) *big.Int {
	return m.note(new(big.Int).Neg(m.floor(new(big.Int).Neg(a), b)))
}

func minBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) < 0 {
		return a
	}
	return b
}

func maxBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) > 0 {
		return a
	}
	return b
}

// refResult is a reference outcome; reset in microseconds.
type refResult struct {
	allowed   bool
	remaining *big.Int
	reset     *big.Int
}

// maxDebt is D of the documentation. Its product is left out of the
// bound: the code compares ⌊MaxWindow/W⌋ with ⌈MaxRequests/L⌉ instead.
func (m *bigMath) maxDebt(l algorithms.Limit) *big.Int {
	L := m.u(l.Requests)
	if l.Algorithm == algorithms.SlidingWindowLog {
		return L
	}
	return minBig(m.u(algorithms.MaxRequests), new(big.Int).Mul(L, m.n(int64(algorithms.MaxWindow/l.Window))))
}

// paidDown is max(0, d − k·L), the debt d after k windows of L. The
// product is left out of the bound: after a long idle time it passes 2^53,
// and the code never forms it (it compares k with ⌈d/L⌉ instead).
func paidDown(d, k, L *big.Int) *big.Int {
	return maxBig(new(big.Int).Sub(d, new(big.Int).Mul(k, L)), big.NewInt(0))
}

// refFixed is the fixed window of the documentation.
type refFixed struct {
	m       bigMath
	w, c, e *big.Int
	// carried counts the debts carried into a later window, and
	// carriedFar those carried past the next one.
	carried, carriedFar int
}

func (r *refFixed) roll(l algorithms.Limit, now int64) *big.Int {
	m := &r.m
	W, L := m.n(l.WindowMicros()), m.u(l.Requests)
	if r.w == nil {
		r.w, r.c, r.e = m.n(0), m.n(0), m.n(0)
	}
	r.e = minBig(minBig(r.e, maxBig(m.sub(r.c, L), m.n(0))), m.maxDebt(l))
	i := m.floor(m.n(now), W)
	switch {
	case r.c.Sign() == 0:
		r.w = i
	case i.Cmp(r.w) > 0:
		j := m.sub(i, r.w)
		r.note(r.e, j, L)
		r.c, r.e = paidDown(r.e, m.sub(j, m.n(1)), L), paidDown(r.e, j, L)
		r.w = i
	}
	return W
}

// note counts a debt e carried j windows on.
func (r *refFixed) note(e, j, L *big.Int) {
	if e.Sign() > 0 {
		r.carried++
		if paidDown(e, big.NewInt(1), L).Sign() > 0 && j.Cmp(big.NewInt(1)) > 0 {
			r.carriedFar++
		}
	}
}

func (r *refFixed) remaining(L *big.Int) *big.Int { return maxBig(r.m.sub(L, r.c), r.m.n(0)) }

func (r *refFixed) admitted(l algorithms.Limit, W *big.Int, now int64) refResult {
	m := &r.m
	L := m.u(l.Requests)
	res := refResult{true, r.remaining(L), m.n(0)}
	if r.c.Sign() > 0 {
		k := m.n(0)
		if r.e.Sign() > 0 {
			k = m.ceil(r.e, L)
		}
		res.reset = m.sub(m.mul(m.add(m.add(r.w, m.n(1)), k), W), m.n(now))
	}
	return res
}

func (r *refFixed) take(l algorithms.Limit, now int64, hits uint64) refResult {
	m := &r.m
	W := r.roll(l, now)
	L, n := m.u(l.Requests), m.u(hits)
	switch {
	case n.Cmp(L) > 0:
		return refResult{false, r.remaining(L), W}
	case m.add(r.c, n).Cmp(L) > 0:
		j := m.n(1)
		if m.add(r.e, n).Cmp(L) > 0 {
			j = m.add(j, m.ceil(m.sub(m.add(r.e, n), L), L))
		}
		return refResult{false, r.remaining(L), m.sub(m.mul(m.add(r.w, j), W), m.n(now))}
	}
	r.c = m.add(r.c, n)
	return r.admitted(l, W, now)
}

// charge records a charge, or with debt false a record, which keeps the debt
// as it was.
func (r *refFixed) charge(l algorithms.Limit, now int64, hits uint64, debt bool) refResult {
	m := &r.m
	r.roll(l, now)
	L, n := m.u(l.Requests), m.u(hits)
	within := n.Cmp(L) <= 0 && m.add(r.c, n).Cmp(L) <= 0
	c, e := recordCharge(m, r.c, r.e, n, L, m.maxDebt(l))
	if r.c = c; debt {
		r.e = e
	}
	res := r.take(l, now, 0)
	res.allowed = within
	return res
}

// recordCharge records n charged hits on a count c with debt e: up to
// L + D, and what lies above L is debt.
func recordCharge(m *bigMath, c, e, n, L, D *big.Int) (*big.Int, *big.Int) {
	most := m.add(L, D)
	if c.Cmp(most) >= 0 {
		return c, e
	}
	after := m.add(c, minBig(n, m.sub(most, c)))
	e = m.add(e, maxBig(m.sub(after, maxBig(c, L)), m.n(0)))
	return after, e
}

func (r *refFixed) refund(l algorithms.Limit, now int64, hits uint64, rc algorithms.Receipt) refResult {
	m := &r.m
	W := r.roll(l, now)
	if (rc.At == 0 && rc.Seq == 0) || m.floor(m.n(rc.At), W).Cmp(r.w) == 0 {
		r.c = m.sub(r.c, minBig(r.c, m.u(hits)))
		r.e = minBig(r.e, maxBig(m.sub(r.c, m.u(l.Requests)), m.n(0)))
	}
	return r.admitted(l, W, now)
}

// refCounter is the sliding window counter of the documentation.
type refCounter struct {
	m               bigMath
	w, cur, prev, e *big.Int
	initialised     bool
	// carry counts the debts carried into a later window, as refFixed.
	carry refFixed
}

func (r *refCounter) roll(l algorithms.Limit, now int64) (W, q, s *big.Int) {
	m := &r.m
	W, q = m.n(l.WindowMicros()), m.n(l.SliceMicros())
	S, L := m.n(algorithms.SlicesPerWindow), m.u(l.Requests)
	if !r.initialised {
		r.w, r.cur, r.prev, r.e, r.initialised = m.n(0), m.n(0), m.n(0), m.n(0), true
	}
	r.e = minBig(minBig(r.e, maxBig(m.sub(r.cur, L), m.n(0))), m.maxDebt(l))
	i := maxBig(m.floor(m.n(now), W), r.w)
	// One window at a time: (prev, cur, e) ← (cur − e, e, max(0, e − L)).
	j := m.sub(i, r.w)
	if j.Sign() > 0 {
		r.carry.note(r.e, j, L)
	}
	switch {
	case j.Cmp(m.n(1)) == 0:
		r.prev, r.cur = m.sub(r.cur, r.e), r.e
		r.e = paidDown(r.e, m.n(1), L)
	case j.Cmp(m.n(1)) > 0:
		r.prev = m.sub(paidDown(r.e, m.sub(j, m.n(2)), L), paidDown(r.e, m.sub(j, m.n(1)), L))
		r.cur = paidDown(r.e, m.sub(j, m.n(1)), L)
		r.e = paidDown(r.e, j, L)
	}
	r.w = i
	s = m.floor(m.sub(m.n(now), m.mul(i, W)), q)
	s = minBig(maxBig(s, m.n(0)), m.sub(S, m.n(1)))
	return W, q, s
}

func (r *refCounter) remaining(L, s *big.Int) *big.Int {
	m := &r.m
	S := m.n(algorithms.SlicesPerWindow)
	rem := m.sub(m.sub(L, r.cur), m.ceil(m.mul(r.prev, m.sub(S, s)), S))
	return maxBig(rem, m.n(0))
}

func (r *refCounter) admittedReset(L, W *big.Int, now int64) *big.Int {
	m := &r.m
	switch {
	case r.cur.Sign() > 0:
		k := m.n(0)
		if r.e.Sign() > 0 {
			k = m.ceil(r.e, L)
		}
		return m.sub(m.mul(m.add(m.add(r.w, m.n(2)), k), W), m.n(now))
	case r.prev.Sign() > 0:
		return m.sub(m.mul(m.add(r.w, m.n(1)), W), m.n(now))
	}
	return m.n(0)
}

func (r *refCounter) take(l algorithms.Limit, now int64, hits uint64) refResult {
	m := &r.m
	W, q, s := r.roll(l, now)
	S, L, n := m.n(algorithms.SlicesPerWindow), m.u(l.Requests), m.u(hits)
	if n.Cmp(L) > 0 {
		return refResult{false, r.remaining(L, s), W}
	}
	fits := m.add(r.cur, n).Cmp(L) <= 0
	if fits && m.mul(r.prev, m.sub(S, s)).Cmp(m.mul(m.sub(m.sub(L, r.cur), n), S)) <= 0 {
		r.cur = m.add(r.cur, n)
		return refResult{true, r.remaining(L, s), r.admittedReset(L, W, now)}
	}
	var at *big.Int
	if fits {
		sl := m.sub(S, m.floor(m.mul(m.sub(m.sub(L, r.cur), n), S), r.prev))
		at = m.add(m.mul(r.w, W), m.mul(sl, q))
	} else {
		// The first window i + k whose count leaves room for n, and in it
		// the first slice at which the weighed previous window does too.
		k, prev := m.n(1), m.sub(r.cur, r.e)
		if m.add(r.e, n).Cmp(L) > 0 {
			k = m.add(k, m.ceil(m.sub(m.add(r.e, n), L), L))
			prev = minBig(L, paidDown(r.e, m.sub(k, m.n(2)), L))
		}
		cur := paidDown(r.e, m.sub(k, m.n(1)), L)
		sl := m.sub(S, m.floor(m.mul(m.sub(m.sub(L, cur), n), S), prev))
		at = m.add(m.mul(m.add(r.w, k), W), m.mul(sl, q))
	}
	return refResult{false, r.remaining(L, s), m.sub(at, m.n(now))}
}

func (r *refCounter) charge(l algorithms.Limit, now int64, hits uint64, debt bool) refResult {
	m := &r.m
	_, _, s := r.roll(l, now)
	S, L, n := m.n(algorithms.SlicesPerWindow), m.u(l.Requests), m.u(hits)
	within := n.Cmp(L) <= 0 && m.add(r.cur, n).Cmp(L) <= 0 &&
		m.mul(r.prev, m.sub(S, s)).Cmp(m.mul(m.sub(m.sub(L, r.cur), n), S)) <= 0
	cur, e := recordCharge(m, r.cur, r.e, n, L, m.maxDebt(l))
	if r.cur = cur; debt {
		r.e = e
	}
	res := r.take(l, now, 0)
	res.allowed = within
	return res
}

func (r *refCounter) refund(l algorithms.Limit, now int64, hits uint64, rc algorithms.Receipt) refResult {
	m := &r.m
	W, _, s := r.roll(l, now)
	n := m.u(hits)
	sub := func(x *big.Int) *big.Int { return m.sub(x, minBig(x, n)) }
	switch {
	case rc.At == 0 && rc.Seq == 0:
		fromCur := minBig(n, r.cur)
		r.cur = m.sub(r.cur, fromCur)
		n = m.sub(n, fromCur)
		r.prev = sub(r.prev)
	case m.floor(m.n(rc.At), W).Cmp(r.w) == 0:
		r.cur = sub(r.cur)
	case m.floor(m.n(rc.At), W).Cmp(m.sub(r.w, m.n(1))) == 0:
		r.prev = sub(r.prev)
	}
	L := m.u(l.Requests)
	r.e = minBig(r.e, maxBig(m.sub(r.cur, L), m.n(0)))
	return refResult{true, r.remaining(L, s), r.admittedReset(L, W, now)}
}

// refBucket is the token bucket of the documentation, with the level cut to
// the capacity on every operation, and the groups of tokens that leases
// hold, in order of their ends.
type refBucket struct {
	m        bigMath
	level, t *big.Int
	groups   []refHold
	started  bool
	// capped reports that the level has been at its cap since slice from,
	// while groups hold tokens; epoch is the time of the first lease.
	capped bool
	from   *big.Int
	epoch  int64
	// full is when the bucket is full again as of its last change (µs):
	// from then on it is a new one, of no epoch.
	full *big.Int
	// merges counts the leases held in a group that ends later than they
	// do, all groups being taken.
	merges int
}

// refHold is h tokens (millionths) held until u.
type refHold struct{ h, u *big.Int }

func (r *refBucket) burst(l algorithms.Limit) *big.Int {
	m := &r.m
	switch {
	case l.Requests == 0:
		return m.n(0)
	case l.Burst != 0:
		return m.u(l.Burst)
	}
	return m.u(l.Requests)
}

// held returns what the groups from the i-th on hold.
func (r *refBucket) held(i int) *big.Int {
	h := r.m.n(0)
	for _, g := range r.groups[i:] {
		h = r.m.add(h, g.h)
	}
	return h
}

// keep keeps the groups that hold tokens and end after now.
func (r *refBucket) keep(now int64) {
	r.groups = slices.DeleteFunc(r.groups, func(g refHold) bool {
		return g.h.Sign() <= 0 || g.u.Cmp(r.m.n(now)) <= 0
	})
}

func (r *refBucket) refill(l algorithms.Limit, now int64) (C, q *big.Int) {
	m := &r.m
	S := m.n(algorithms.SlicesPerWindow)
	C, q = m.mul(r.burst(l), S), m.n(l.SliceMicros())
	tau := m.floor(m.n(now), q)
	if !r.started {
		r.level, r.t, r.groups, r.started, r.capped, r.epoch = C, tau, nil, true, false, 0
		return C, q
	}
	if r.full != nil && r.full.Cmp(m.n(now)) <= 0 {
		r.epoch = 0
	}
	// What is held beyond C is held no longer, the earliest groups first.
	over := m.sub(r.held(0), C)
	for i := range r.groups {
		d := minBig(maxBig(over, m.n(0)), r.groups[i].h)
		r.groups[i].h = m.sub(r.groups[i].h, d)
		over = m.sub(over, d)
	}
	r.keep(math.MinInt64)
	if most := m.sub(C, r.held(0)); r.level.Cmp(most) > 0 {
		r.level, r.capped = most, false
	}
	r.level = maxBig(r.level, m.mul(m.n(-algorithms.SlicesPerWindow), m.maxDebt(l)))
	if tau.Cmp(r.t) > 0 {
		from := r.t
		for i, g := range r.groups {
			// Up to the last slice before the group's end, at most C
			// less what it and the later groups hold.
			mm := minBig(tau, maxBig(from, m.sub(m.ceil(g.u, q), m.n(1))))
			r.fill(l, from, mm, m.sub(C, r.held(i)))
			from = mm
		}
		r.fill(l, from, tau, C)
		r.t = tau
	}
	r.keep(now)
	if h := r.held(0); h.Sign() == 0 || r.level.Cmp(m.sub(C, h)) != 0 {
		r.capped = false
	}
	return C, q
}

// fill refills from slice a to b up to most, and notes from which slice the
// level has been at most.
func (r *refBucket) fill(l algorithms.Limit, a, b, most *big.Int) {
	m := &r.m
	if b.Cmp(a) <= 0 {
		return
	}
	if r.level.Cmp(most) < 0 {
		if l.Requests == 0 {
			r.capped = false
			return
		}
		need := m.ceil(m.sub(most, r.level), m.u(l.Requests))
		if need.Cmp(m.sub(b, a)) > 0 {
			r.level, r.capped = r.filled(l, r.level, m.sub(b, a), most), false
			return
		}
		r.level, r.capped, r.from = most, true, m.add(a, need)
		return
	}
	if !r.capped {
		r.capped, r.from = true, a
	}
}

// markCap keeps capped only while groups hold tokens and the level is at
// C − H: from where it was, or from now when it was not or restart says so.
func (r *refBucket) markCap(C *big.Int, restart bool) {
	m := &r.m
	switch h := r.held(0); {
	case h.Sign() == 0 || r.level.Cmp(m.sub(C, h)) != 0:
		r.capped = false
	case restart || !r.capped:
		r.capped, r.from = true, r.t
	}
}

// filled is min(most, level + k·L), the literal formula, left out of the
// bound: its product passes 2^53 after a long idle time, and the code never
// forms it (it compares k with ⌈(most−level)/L⌉ instead).
func (r *refBucket) filled(l algorithms.Limit, level, k, most *big.Int) *big.Int {
	return minBig(most, new(big.Int).Add(level, new(big.Int).Mul(k, r.m.u(l.Requests))))
}

// wait is the wait from now until the bucket, left alone, holds want: from
// slice t, or, while want is above C less what the groups from the i-th on
// hold, from the last slice before the i-th group ends, with the level the
// capped refill reaches there.
func (r *refBucket) wait(l algorithms.Limit, C, want, q *big.Int, now int64) *big.Int {
	m := &r.m
	base, level := r.t, r.level
	for i, g := range r.groups {
		most := m.sub(C, r.held(i))
		if want.Cmp(most) <= 0 {
			break
		}
		b := maxBig(base, m.sub(m.ceil(g.u, q), m.n(1)))
		level = r.filled(l, level, m.sub(b, base), most)
		base = b
	}
	x := m.ceil(m.sub(want, level), m.u(l.Requests))
	return m.sub(m.mul(m.add(base, x), q), m.n(now))
}

func (r *refBucket) admitted(l algorithms.Limit, C, q *big.Int, now int64) refResult {
	m := &r.m
	S := m.n(algorithms.SlicesPerWindow)
	res := refResult{allowed: true, remaining: maxBig(m.floor(r.level, S), m.n(0)), reset: m.n(0)}
	r.full = m.mul(r.t, q)
	if r.level.Cmp(C) < 0 {
		res.reset = r.wait(l, C, C, q, now)
		r.full = m.add(res.reset, m.n(now))
	}
	return res
}

// hold holds x tokens of a lease taken at now with hold h: until its end
// rounded up to a slot of ⌈h/(G − 1)⌉, in the group that ends then, or a
// new one, or, with G groups already, the first that ends later, or else
// the last, which then ends then.
func (r *refBucket) hold(x *big.Int, now, h int64) {
	m := &r.m
	slot := m.ceil(m.n(h), m.n(algorithms.HoldGroups-1))
	u := m.mul(m.ceil(m.add(m.n(now), m.n(h)), slot), slot)
	for i, g := range r.groups {
		if g.u.Cmp(u) == 0 {
			r.groups[i].h = m.add(g.h, x)
			return
		}
	}
	if len(r.groups) < algorithms.HoldGroups {
		r.groups = append(r.groups, refHold{h: x, u: u})
		slices.SortFunc(r.groups, func(a, b refHold) int { return a.u.Cmp(b.u) })
		return
	}
	r.merges++
	for i, g := range r.groups {
		if g.u.Cmp(u) > 0 {
			r.groups[i].h = m.add(g.h, x)
			return
		}
	}
	last := &r.groups[len(r.groups)-1]
	last.h, last.u = m.add(last.h, x), u
}

// take admits or denies, a lease's take when hold > 0; a denial leaves the
// bucket as it was, refill and all.
func (r *refBucket) take(l algorithms.Limit, now int64, hits uint64, hold int64) refResult {
	m := &r.m
	before := *r
	before.groups = slices.Clone(r.groups)
	C, q := r.refill(l, now)
	S, n := m.n(algorithms.SlicesPerWindow), m.u(hits)
	var res refResult
	switch need := m.mul(n, S); {
	case n.Cmp(r.burst(l)) > 0:
		res = refResult{false, maxBig(m.floor(r.level, S), m.n(0)), m.n(l.WindowMicros())}
	case r.level.Cmp(need) >= 0:
		r.level = m.sub(r.level, need)
		if hold > 0 {
			if r.epoch == 0 {
				r.epoch = max(now, 1)
			}
			if hits > 0 {
				r.hold(need, now, hold)
			}
		}
		r.markCap(C, false)
		return r.admitted(l, C, q, now)
	default:
		res = refResult{false, maxBig(m.floor(r.level, S), m.n(0)), r.wait(l, C, need, q, now)}
	}
	r.level, r.t, r.groups, r.started = before.level, before.t, before.groups, before.started
	r.capped, r.from, r.epoch, r.full = before.capped, before.from, before.epoch, before.full
	return res
}

// charge takes n tokens even from a bucket that does not hold them, down to
// −D tokens (−min(D, L) for a record, debt false; a bucket lower than that
// keeps its level), and reports what a check reports after it.
func (r *refBucket) charge(l algorithms.Limit, now int64, hits uint64, debt bool) refResult {
	m := &r.m
	C, q := r.refill(l, now)
	S, n := m.n(algorithms.SlicesPerWindow), m.u(min(hits, 2*algorithms.MaxRequests+1))
	within := n.Cmp(r.burst(l)) <= 0 && r.level.Cmp(m.mul(n, S)) >= 0
	d := m.maxDebt(l)
	if !debt {
		d = minBig(d, m.u(l.Requests))
	}
	if floor := m.mul(m.n(-algorithms.SlicesPerWindow), d); r.level.Cmp(floor) > 0 {
		r.level = maxBig(m.sub(r.level, m.mul(n, S)), floor)
	}
	r.markCap(C, false)
	// When it is full again, as the code records it before it answers.
	r.full = m.mul(r.t, q)
	if r.level.Cmp(C) < 0 {
		r.full = m.add(r.wait(l, C, C, q, now), m.n(now))
	}
	res := r.take(l, now, 0, 0)
	res.allowed = within
	return res
}

// refund gives back hits.
func (r *refBucket) refund(l algorithms.Limit, now int64, hits uint64) refResult {
	m := &r.m
	C, q := r.refill(l, now)
	back := m.mul(m.u(min(hits, 2*algorithms.MaxRequests+1)), m.n(algorithms.SlicesPerWindow))
	r.level = minBig(m.sub(C, r.held(0)), m.add(r.level, back))
	r.markCap(C, false)
	return r.admitted(l, C, q, now)
}

// settle settles leases: the literal rule of TokenBucketState.Settle, the
// reclaimed refill as the least over the boundaries of the tokens served
// before each plus L for each boundary after it.
func (r *refBucket) settle(l algorithms.Limit, now int64, leases []algorithms.Lease) refResult {
	m := &r.m
	C, q := r.refill(l, now)
	S := m.n(algorithms.SlicesPerWindow)
	var served []algorithms.Served
	back := m.n(0)
	settled := false
	for _, ls := range leases {
		end := ls.Receipt.At + ls.Hold.Microseconds()
		if r.epoch == 0 || ls.Receipt.Epoch != r.epoch || now >= end {
			continue
		}
		settled = true
		left := m.sub(m.u(ls.Size), minBig(m.u(ls.Reported), m.u(ls.Size)))
		n := m.n(0)
		for _, sv := range ls.Served {
			n = m.add(n, m.u(sv.N))
		}
		n = minBig(n, left)
		served = append(served, ls.Served...)
		rel := n
		if ls.Close {
			rel = left
			back = m.add(back, m.sub(left, n))
		}
		// From the first group that ends no sooner than the lease.
		for i, g := range r.groups {
			if g.u.Cmp(m.n(end)) >= 0 {
				r.groups[i].h = maxBig(m.sub(g.h, m.mul(rel, S)), m.n(0))
				break
			}
		}
	}
	r.keep(now)
	if !settled {
		return r.admitted(l, C, q, now)
	}
	slices.SortStableFunc(served, func(a, b algorithms.Served) int { return int(a.At - b.At) })
	reclaim := m.n(0)
	if r.capped {
		total := m.n(0)
		for _, sv := range served {
			total = minBig(m.add(total, m.u(sv.N)), r.burst(l))
		}
		L := m.u(l.Requests)
		tau := r.t // the refill slice: a clock that went back leaves it
		most := m.mul(total, S)
		// after is min(most, L·(tau − b)), the product formed only below
		// most, as the code forms it.
		after := func(b *big.Int) *big.Int {
			if L.Sign() == 0 || m.sub(tau, b).Cmp(m.ceil(most, L)) >= 0 {
				return most
			}
			return m.mul(L, m.sub(tau, b))
		}
		best := after(r.from)
		before := m.n(0)
		seen := r.from
		for _, sv := range served {
			b := m.floor(m.n(sv.At), q)
			if b.Cmp(tau) >= 0 {
				break
			}
			if b.Cmp(seen) > 0 {
				best = minBig(best, m.add(before, after(b)))
				seen = b
			}
			before = minBig(m.add(before, m.mul(minBig(m.u(sv.N), total), S)), m.mul(total, S))
		}
		reclaim = minBig(minBig(best, before), m.mul(total, S))
	}
	r.level = minBig(m.sub(C, r.held(0)), m.add(r.level, m.add(m.mul(back, S), reclaim)))
	r.markCap(C, true)
	return r.admitted(l, C, q, now)
}

// maxReset is the longest wait a Result reports, 2^53−1µs.
const maxReset = 1<<53 - 1

// compare checks a Result against the reference: a reset above 2^53−1µs is
// reported as 2^53−1µs. It returns whether the cap applied.
func compare(t *testing.T, ref refResult, got algorithms.Result, what string) (capped bool) {
	t.Helper()
	reset := ref.reset
	if reset.Cmp(big.NewInt(maxReset)) > 0 {
		reset, capped = big.NewInt(maxReset), true
	}
	require.True(t, reset.IsInt64() && reset.Sign() >= 0, "%s: reference reset %s", what, ref.reset)
	want := fmt.Sprintf("allowed=%t remaining=%s reset=%dµs", ref.allowed, ref.remaining, reset.Int64())
	gotS := fmt.Sprintf("allowed=%t remaining=%d reset=%dµs", got.Allowed, got.Remaining, got.ResetAfter.Microseconds())
	require.Equal(t, want, gotS, what)
	require.Zero(t, got.ResetAfter%time.Microsecond, what)
	return capped
}

// randomWindow draws a window from one second to ten years.
func randomWindow(rng *rand.Rand) time.Duration {
	ws := []time.Duration{time.Second, 7 * time.Second, time.Minute, time.Hour, day, 7 * day, 30 * day, year, algorithms.MaxWindow}
	if rng.IntN(4) == 0 {
		return time.Duration(1+rng.Int64N(int64(algorithms.MaxWindow/time.Second))) * time.Second
	}
	return ws[rng.IntN(len(ws))]
}

// randomCount draws a count in [lo, 2^32−1], often at the edges.
func randomCount(rng *rand.Rand, lo uint64) uint64 {
	switch rng.IntN(6) {
	case 0:
		return lo
	case 1:
		return math.MaxUint32
	case 2:
		return lo + rng.Uint64N(10)
	case 3:
		return lo + rng.Uint64N(1000)
	}
	return lo + rng.Uint64N(math.MaxUint32-lo+1)
}

// randomStep moves the clock (forwards by microseconds to years, sometimes
// backwards, staying between 1970 and 2126) and draws a number of hits for a
// limit of capacity c.
func randomStep(rng *rand.Rand, now int64, w int64, c uint64) (int64, uint64) {
	switch rng.IntN(10) {
	case 0:
	case 1:
		now += rng.Int64N(4)
	case 2, 3:
		now += rng.Int64N(w)
	case 4:
		now += rng.Int64N(w/algorithms.SlicesPerWindow*5 + 1)
	case 5:
		now += w - now%w - rng.Int64N(2) // at or just before a boundary
	case 6:
		now += rng.Int64N(4 * w)
	case 7:
		now += rng.Int64N(int64(20 * year / time.Microsecond))
	case 8:
		now -= rng.Int64N(w/2 + 1) // the clock goes back
	case 9:
		now -= rng.Int64N(int64(year / time.Microsecond))
	}
	if hi := t0.Add(100 * year).UnixMicro(); now < 0 || now > hi {
		now = t0.UnixMicro() + rng.Int64N(int64(50*year/time.Microsecond))
	}
	var n uint64
	switch rng.IntN(8) {
	case 0:
		n = 0
	case 1:
		n = c
	case 2:
		n = c + 1
	case 3:
		n = math.MaxUint32
	case 4:
		n = 1
	default:
		n = rng.Uint64N(c + 1)
	}
	return now, n
}

// windowRef is the reference of a window algorithm, and the debts it
// carried.
type windowRef interface {
	take(l algorithms.Limit, now int64, hits uint64) refResult
	charge(l algorithms.Limit, now int64, hits uint64, debt bool) refResult
	refund(l algorithms.Limit, now int64, hits uint64, rc algorithms.Receipt) refResult
	math() *bigMath
	debts() *refFixed
}

func (r *refFixed) math() *bigMath     { return &r.m }
func (r *refFixed) debts() *refFixed   { return r }
func (r *refCounter) math() *bigMath   { return &r.m }
func (r *refCounter) debts() *refFixed { return &r.carry }

// matchWindowReference drives 400 random sequences of takes, charges and
// refunds through a new state of alg and its reference, with limits up to
// 2^32−1, windows up to ten years, clock jumps both ways and changed
// limits, and requires the same results, no intermediate at 2^53 or above,
// and debts carried past the next window.
func matchWindowReference(t *testing.T, alg algorithms.Algorithm, seed uint64, newRef func() windowRef) {
	rng := rand.New(rand.NewPCG(seed, seed))
	carried, far := 0, 0
	for seq := range 400 {
		l := algorithms.Limit{Algorithm: alg, Requests: randomCount(rng, 0), Window: randomWindow(rng)}
		require.NoError(t, l.Validate())
		st, ref := algorithms.NewState(alg), newRef()
		now := t0.UnixMicro()
		var receipts []algorithms.Receipt
		for i := range 60 {
			if rng.IntN(20) == 0 {
				l.Requests = randomCount(rng, 0)
			}
			var n uint64
			now, n = randomStep(rng, now, l.WindowMicros(), l.Requests)
			what := fmt.Sprintf("sequence %d step %d: L=%d W=%s now=%d n=%d", seq, i, l.Requests, l.Window, now, n)
			switch rng.IntN(5) {
			case 0:
				var rc algorithms.Receipt
				if len(receipts) > 0 && rng.IntN(3) > 0 {
					rc = receipts[rng.IntN(len(receipts))]
				}
				compare(t, ref.refund(l, now, n, rc), st.Refund(l, time.UnixMicro(now), n, rc), what+" refund")
			case 1:
				got := st.Charge(l, time.UnixMicro(now), n)
				require.False(t, compare(t, ref.charge(l, now, n, true), got, what+" charge"), "a reset was capped")
				require.Zero(t, got.Receipt, "%s: a charge has no receipt", what)
			case 2:
				got := st.Record(l, time.UnixMicro(now), n)
				require.False(t, compare(t, ref.charge(l, now, n, false), got, what+" record"), "a reset was capped")
				require.Zero(t, got.Receipt, "%s: a record has no receipt", what)
			default:
				got := st.Take(l, time.UnixMicro(now), n)
				require.False(t, compare(t, ref.take(l, now, n), got, what), "a reset was capped")
				if got.Allowed {
					receipts = append(receipts, got.Receipt)
				}
			}
		}
		m := ref.math()
		require.Negative(t, m.max.Cmp(two53), "sequence %d: an intermediate reached %s", seq, m.max)
		carried, far = carried+ref.debts().carried, far+ref.debts().carriedFar
	}
	require.Positive(t, far, "no debt was carried past the next window")
	t.Logf("debts carried into a later window: %d, past the next one: %d", carried, far)
}

func TestSlidingWindowCounterMatchesBigReference(t *testing.T) {
	matchWindowReference(t, algorithms.SlidingWindowCounter, 7, func() windowRef { return new(refCounter) })
}

func TestFixedWindowMatchesBigReference(t *testing.T) {
	matchWindowReference(t, algorithms.FixedWindow, 9, func() windowRef { return new(refFixed) })
}

func TestTokenBucketMatchesBigReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	beyond, capped, inDebt, held, merges, reclaims := 0, 0, 0, 0, 0, 0
	for seq := range 400 {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: randomCount(rng, 1), Window: randomWindow(rng)}
		if rng.IntN(2) == 0 {
			l.Burst = randomCount(rng, 1)
		}
		if rng.IntN(20) == 0 {
			l.Requests, l.Burst = 0, 0
		}
		// Validate rejects exactly the buckets beyond the bound; the states
		// themselves still cope with them.
		inBounds := refillsWithinMaxWindow(l)
		require.Equal(t, inBounds, l.Validate() == nil, "L=%d B=%d W=%s: %v", l.Requests, l.Burst, l.Window, l.Validate())
		var st algorithms.TokenBucketState
		var ref refBucket
		var leases []algorithms.Receipt
		holds := map[int64]time.Duration{}
		now := t0.UnixMicro()
		// A busy bucket is leased every few milliseconds.
		busy := seq%4 == 0
		for i := range 60 {
			if rng.IntN(20) == 0 && l.Requests > 0 {
				l.Burst = randomCount(rng, 1)
				inBounds = inBounds && refillsWithinMaxWindow(l)
			}
			var n uint64
			if busy {
				now, n = now+rng.Int64N(5_000), rng.Uint64N(min(l.Capacity(), 3)+1)
			} else {
				now, n = randomStep(rng, now, l.WindowMicros(), l.Capacity())
			}
			what := fmt.Sprintf("sequence %d step %d: L=%d B=%d W=%s now=%d n=%d", seq, i, l.Requests, l.Burst, l.Window, now, n)
			if busy && rng.IntN(4) != 0 {
				// Leases of a few holds, more of them live than there
				// are groups.
				hold := []time.Duration{50 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond}[rng.IntN(4)]
				got := st.Lease(l, time.UnixMicro(now), n, hold)
				compare(t, ref.take(l, now, n, hold.Microseconds()), got, what+fmt.Sprintf(" lease held %s", hold))
				if got.Allowed && n > 0 {
					leases, holds[got.Receipt.At] = append(leases, got.Receipt), hold
				}
				continue
			}
			if rng.IntN(4) == 0 {
				if len(leases) > 0 && rng.IntN(2) == 0 {
					// A lease is settled, while it lasts or after: served in
					// part, at times between its take and now, and closed
					// or not.
					rc := leases[rng.IntN(len(leases))]
					hold := holds[rc.At]
					ls := algorithms.Lease{Receipt: rc, Hold: hold, Size: n + rng.Uint64N(3), Reported: rng.Uint64N(2), Close: rng.IntN(2) == 0}
					for range rng.IntN(4) {
						at := rc.At + rng.Int64N(max(now-rc.At, 0)+1)
						ls.Served = append(ls.Served, algorithms.Served{At: at, N: rng.Uint64N(3)})
					}
					slices.SortFunc(ls.Served, func(a, b algorithms.Served) int { return int(a.At - b.At) })
					// A settlement answers nothing: a check after it tells.
					st.Settle(l, time.UnixMicro(now), []algorithms.Lease{ls})
					ref.settle(l, now, []algorithms.Lease{ls})
					if compare(t, ref.take(l, now, 0, 0), st.Take(l, time.UnixMicro(now), 0), what+" settlement") {
						capped++
					}
					if ref.capped {
						reclaims++
					}
					continue
				}
				if compare(t, ref.refund(l, now, n), st.Refund(l, time.UnixMicro(now), n, algorithms.Receipt{}), what+" refund") {
					capped++
				}
				continue
			}
			if rng.IntN(3) == 0 {
				debt, charge := rng.IntN(2) == 0, st.Record
				if debt {
					charge = st.Charge
				}
				got := charge(l, time.UnixMicro(now), n)
				if compare(t, ref.charge(l, now, n, debt), got, what+" charge") {
					capped++
				}
				if ref.level.Sign() < 0 {
					inDebt++
				}
				continue
			}
			if rng.IntN(3) == 0 {
				// A lease, held from a microsecond to MaxHold.
				hold := randomHold(rng, l.Window)
				got := st.Lease(l, time.UnixMicro(now), n, hold)
				if compare(t, ref.take(l, now, n, hold.Microseconds()), got, what+fmt.Sprintf(" lease held %s", hold)) {
					capped++
				}
				if got.Allowed && n > 0 {
					leases, holds[got.Receipt.At] = append(leases, got.Receipt), hold
				}
				if ref.started && len(ref.groups) > 0 {
					held++
				}
				continue
			}
			if compare(t, ref.take(l, now, n, 0), st.Take(l, time.UnixMicro(now), n), what) {
				capped++
			}
		}
		// A bucket that refills from empty within MaxWindow keeps every
		// intermediate below 2^53; others may pass it, and their resets are
		// capped.
		if inBounds {
			require.Negative(t, ref.m.max.Cmp(two53), "sequence %d (L=%d B=%d W=%s): an intermediate reached %s", seq, l.Requests, l.Burst, l.Window, ref.m.max)
		} else if ref.m.max.Cmp(two53) >= 0 {
			beyond++
		}
		merges += ref.merges
	}
	require.Positive(t, capped, "no reset reached the cap")
	require.Positive(t, inDebt, "no charge left a bucket in debt")
	require.Positive(t, held, "no lease held tokens")
	require.Positive(t, merges, "no lease was held in a later group")
	require.Positive(t, reclaims, "no settlement found the bucket at its cap")
	t.Logf("%d sequences with a burst that takes more than MaxWindow to refill passed 2^53; %d resets were capped; %d charges left a bucket in debt; %d leases held tokens, %d in a later group; %d settlements found the bucket capped", beyond, capped, inDebt, held, merges, reclaims)
}

// randomHold draws a lease's hold for a window w: a microsecond, a few
// milliseconds, part of the window, or up to MaxHold.
func randomHold(rng *rand.Rand, w time.Duration) time.Duration {
	switch rng.IntN(4) {
	case 0:
		return time.Microsecond
	case 1:
		return time.Duration(1+rng.Int64N(100_000)) * time.Microsecond
	case 2:
		return time.Duration(1+rng.Int64N(w.Microseconds())) * time.Microsecond
	}
	return time.Duration(1+rng.Int64N(algorithms.MaxHold.Microseconds())) * time.Microsecond
}

// refillsWithinMaxWindow reports whether B·W ≤ L·MaxWindow: whether an empty
// bucket is full again within MaxWindow.
func refillsWithinMaxWindow(l algorithms.Limit) bool {
	b := l.Capacity()
	bw := new(big.Int).Mul(new(big.Int).SetUint64(b), big.NewInt(int64(l.Window/time.Second)))
	lm := new(big.Int).Mul(new(big.Int).SetUint64(l.Requests), big.NewInt(int64(algorithms.MaxWindow/time.Second)))
	return bw.Cmp(lm) <= 0
}
