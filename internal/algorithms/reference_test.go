package algorithms_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
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
// the capacity on every operation, and the tokens h that leases hold until u.
type refBucket struct {
	m        bigMath
	level, t *big.Int
	h, u     *big.Int
	started  bool
}

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

func (r *refBucket) refill(l algorithms.Limit, now int64) (C, q *big.Int) {
	m := &r.m
	S := m.n(algorithms.SlicesPerWindow)
	C, q = m.mul(r.burst(l), S), m.n(l.SliceMicros())
	tau := m.floor(m.n(now), q)
	if !r.started {
		r.level, r.t, r.h, r.u, r.started = C, tau, m.n(0), m.n(0), true
		return C, q
	}
	r.h = minBig(r.h, C)
	r.level = maxBig(minBig(r.level, m.sub(C, r.h)), m.mul(m.n(-algorithms.SlicesPerWindow), m.maxDebt(l)))
	if tau.Cmp(r.t) > 0 {
		from := r.t
		if r.h.Sign() > 0 {
			// Up to the last slice before U, at most C − H.
			mm := minBig(tau, maxBig(r.t, m.sub(m.ceil(r.u, q), m.n(1))))
			r.level = r.filled(l, r.level, m.sub(mm, r.t), m.sub(C, r.h))
			from = mm
		}
		r.level = r.filled(l, r.level, m.sub(tau, from), C)
		r.t = tau
	}
	if m.n(now).Cmp(r.u) >= 0 || r.h.Sign() == 0 {
		r.h, r.u = m.n(0), m.n(0)
	}
	return C, q
}

// filled is min(most, level + k·L), the literal formula, left out of the
// bound: its product passes 2^53 after a long idle time, and the code never
// forms it (it compares k with ⌈(most−level)/L⌉ instead).
func (r *refBucket) filled(l algorithms.Limit, level, k, most *big.Int) *big.Int {
	return minBig(most, new(big.Int).Add(level, new(big.Int).Mul(k, r.m.u(l.Requests))))
}

// wait is the wait from now until the bucket, left alone, holds want: from
// slice t, or, when want is above C − H, from the last slice before U with
// the level the capped refill reaches there.
func (r *refBucket) wait(l algorithms.Limit, C, want, q *big.Int, now int64) *big.Int {
	m := &r.m
	base, level := r.t, r.level
	if r.h.Sign() > 0 && want.Cmp(m.sub(C, r.h)) > 0 {
		base = maxBig(r.t, m.sub(m.ceil(r.u, q), m.n(1)))
		level = r.filled(l, level, m.sub(base, r.t), m.sub(C, r.h))
	}
	x := m.ceil(m.sub(want, level), m.u(l.Requests))
	return m.sub(m.mul(m.add(base, x), q), m.n(now))
}

func (r *refBucket) admitted(l algorithms.Limit, C, q *big.Int, now int64) refResult {
	m := &r.m
	S := m.n(algorithms.SlicesPerWindow)
	res := refResult{allowed: true, remaining: maxBig(m.floor(r.level, S), m.n(0)), reset: m.n(0)}
	if r.level.Cmp(C) < 0 {
		res.reset = r.wait(l, C, C, q, now)
	}
	return res
}

// take admits or denies, a lease's take when hold > 0; a denial leaves the
// bucket as it was, refill and all.
func (r *refBucket) take(l algorithms.Limit, now int64, hits uint64, hold int64) refResult {
	m := &r.m
	before := *r
	C, q := r.refill(l, now)
	S, n := m.n(algorithms.SlicesPerWindow), m.u(hits)
	var res refResult
	switch need := m.mul(n, S); {
	case n.Cmp(r.burst(l)) > 0:
		res = refResult{false, maxBig(m.floor(r.level, S), m.n(0)), m.n(l.WindowMicros())}
	case r.level.Cmp(need) >= 0:
		r.level = m.sub(r.level, need)
		if hold > 0 && hits > 0 {
			r.h = m.add(r.h, need)
			r.u = maxBig(r.u, m.add(m.n(now), m.n(hold)))
		}
		return r.admitted(l, C, q, now)
	default:
		res = refResult{false, maxBig(m.floor(r.level, S), m.n(0)), r.wait(l, C, need, q, now)}
	}
	r.level, r.t, r.h, r.u, r.started = before.level, before.t, before.h, before.u, before.started
	return res
}

// charge takes n tokens even from a bucket that does not hold them, down to
// −D tokens (−min(D, L) for a record, debt false; a bucket lower than that
// keeps its level), and reports what a check reports after it.
func (r *refBucket) charge(l algorithms.Limit, now int64, hits uint64, debt bool) refResult {
	m := &r.m
	r.refill(l, now)
	S, n := m.n(algorithms.SlicesPerWindow), m.u(min(hits, 2*algorithms.MaxRequests+1))
	within := n.Cmp(r.burst(l)) <= 0 && r.level.Cmp(m.mul(n, S)) >= 0
	d := m.maxDebt(l)
	if !debt {
		d = minBig(d, m.u(l.Requests))
	}
	if floor := m.mul(m.n(-algorithms.SlicesPerWindow), d); r.level.Cmp(floor) > 0 {
		r.level = maxBig(m.sub(r.level, m.mul(n, S)), floor)
	}
	res := r.take(l, now, 0, 0)
	res.allowed = within
	return res
}

// refund gives back hits, a lease's (with the receipt time at and its hold)
// when hold > 0: while the lease lasts, they are first taken from H.
func (r *refBucket) refund(l algorithms.Limit, now int64, hits uint64, at, hold int64) refResult {
	m := &r.m
	C, q := r.refill(l, now)
	back := m.mul(m.u(min(hits, 2*algorithms.MaxRequests+1)), m.n(algorithms.SlicesPerWindow))
	if hold > 0 && at != 0 && now < at+hold {
		r.h = maxBig(m.sub(r.h, back), m.n(0))
		if r.h.Sign() == 0 {
			r.u = m.n(0)
		}
	}
	r.level = minBig(m.sub(C, r.h), m.add(r.level, back))
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
	beyond, capped, inDebt, held := 0, 0, 0, 0
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
		for i := range 60 {
			if rng.IntN(20) == 0 && l.Requests > 0 {
				l.Burst = randomCount(rng, 1)
				inBounds = inBounds && refillsWithinMaxWindow(l)
			}
			var n uint64
			now, n = randomStep(rng, now, l.WindowMicros(), l.Capacity())
			what := fmt.Sprintf("sequence %d step %d: L=%d B=%d W=%s now=%d n=%d", seq, i, l.Requests, l.Burst, l.Window, now, n)
			if rng.IntN(4) == 0 {
				if len(leases) > 0 && rng.IntN(2) == 0 {
					// A lease gives back, while it lasts or after.
					rc := leases[rng.IntN(len(leases))]
					hold := holds[rc.At]
					got := st.Release(l, time.UnixMicro(now), n, rc, hold)
					if compare(t, ref.refund(l, now, n, rc.At, hold.Microseconds()), got, what+" lease's give-back") {
						capped++
					}
					continue
				}
				if compare(t, ref.refund(l, now, n, 0, 0), st.Refund(l, time.UnixMicro(now), n, algorithms.Receipt{}), what+" refund") {
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
				if ref.started && ref.h.Sign() > 0 {
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
	}
	require.Positive(t, capped, "no reset reached the cap")
	require.Positive(t, inDebt, "no charge left a bucket in debt")
	require.Positive(t, held, "no lease held tokens")
	t.Logf("%d sequences with a burst that takes more than MaxWindow to refill passed 2^53; %d resets were capped; %d charges left a bucket in debt; %d leases held tokens", beyond, capped, inDebt, held)
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
