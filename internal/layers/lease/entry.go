package lease

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// entry is what the Limiter knows of one limit: the demand on it, the room
// the backend last reported, and its leases: the one being served and the
// next, taken ahead while the first runs out. Its methods run under its
// shard's lock.
type entry struct {
	// period is the index of the demand period of cur; prev counts the
	// period before it.
	period    int64
	cur, prev uint64
	seen      time.Time // the last take of the limit
	// room is the backend's remaining after the last take it answered.
	room      uint64
	roomKnown bool
	// arrived is, while a lease is on its way, closed when it has come (or
	// failed to); nil otherwise.
	arrived     chan struct{}
	lease, next *held
}

// held is a lease.
type held struct {
	op algorithms.Op // the take that reserved it
	// left is what is not yet served; used what is.
	left, used uint64
	receipt    algorithms.Receipt
	expires    time.Time
	// windowEnd reports that the lease ends with its window rather than
	// after the lease time.
	windowEnd bool
	// remaining is the backend's remaining just after the lease; replenished
	// when the limit was, as of then, fully replenished.
	remaining   uint64
	replenished time.Time
}

// demandPeriod is the length of the periods demand is counted in.
const demandPeriod = 50 * time.Millisecond

// count notes a take of n at now.
func (e *entry) count(n uint64, now time.Time) {
	p := now.UnixNano() / int64(demandPeriod)
	switch {
	case p == e.period:
	case p == e.period+1:
		e.prev, e.cur = e.cur, 0
	default:
		e.prev, e.cur = 0, 0
	}
	e.period = p
	e.cur += n
	e.seen = now
}

// rate returns the hits asked per second lately: those of the current
// period and the one before, over the time they span.
func (e *entry) rate(now time.Time) float64 {
	into := time.Duration(now.UnixNano() % int64(demandPeriod))
	return float64(e.cur+e.prev) / (demandPeriod + into).Seconds()
}

// serves reports whether h can serve a take of op at now.
func (h *held) serves(op *algorithms.Op, now time.Time) bool {
	return h != nil && h.op.Limit == op.Limit && now.Before(h.expires) && h.left >= op.Hits
}

// fetching reports whether a lease of the limit is on its way.
func (e *entry) fetching() bool { return e.arrived != nil }

// fetch notes that a lease of the limit is on its way.
func (e *entry) fetch() { e.arrived = make(chan struct{}) }

// fetched notes that the lease on its way has come, or failed to, and
// wakes those waiting for it.
func (e *entry) fetched() {
	if e.arrived != nil {
		close(e.arrived)
		e.arrived = nil
	}
}

// serve admits op at now from a lease when one holds its hits
// and has not expired: the current lease, or else the next, which then
// becomes current. A lease that cannot serve it is given up: what it did
// not use is appended to back, the give-backs to send. ahead reports that
// the current lease is running out (a quarter of it left, or of its time)
// and the next should be taken now.
func (e *entry) serve(op *algorithms.Op, now time.Time, tau time.Duration, back []algorithms.Op, obs Observer) (r algorithms.Result, ok, ahead bool, _ []algorithms.Op) {
	if !e.lease.serves(op, now) {
		back = e.detach(&e.lease, back, obs)
		if e.next.serves(op, now) {
			e.lease, e.next = e.next, nil
		} else {
			back = e.detach(&e.next, back, obs)
			return algorithms.Result{}, false, false, back
		}
	}
	h := e.lease
	r = h.result(op.Hits, now)
	obs.ObserveLease(op, Served, op.Hits)
	ahead = e.next == nil && !e.fetching() &&
		(h.left*4 <= h.left+h.used || (!h.windowEnd && h.expires.Sub(now)*4 <= tau))
	return r, true, ahead, back
}

// result takes n hits from the lease and returns the Result of their take:
// admitted, with what the backend had left plus what the lease has, the
// wait until the limit is replenished as of the lease, and the receipt of
// the lease's take, which a refund takes to the backend (for a log, of the
// entries of these hits).
func (h *held) result(n uint64, now time.Time) algorithms.Result {
	r := algorithms.Result{Allowed: true, Receipt: h.receipt}
	if h.op.Limit.Algorithm.Spec().ExactRefund {
		r.Receipt.Seq += h.used
	}
	h.left -= n
	h.used += n
	r.Remaining = h.remaining + h.left
	r.ResetAfter = max(h.replenished.Sub(now), 0)
	return r
}

// size returns how many hits to lease for op at now, n of them for op's own
// take, or 0 for no lease: what this replica asks of the limit in tau, plus
// n, at most a quarter of the room the backend last reported and no more
// than the limit can hold. It is 0 when that is not more than n nor
// minHits (so a limit near its end is taken hit by hit), when a lease is
// already on its way, when the room is not known yet (a take tells it), or
// when the limit is cold (the demand in tau is under minHits).
func (e *entry) size(op *algorithms.Op, n uint64, now time.Time, tau time.Duration, minHits uint64) uint64 {
	if e.fetching() || !e.roomKnown {
		return 0
	}
	want := uint64(e.rate(now) * tau.Seconds())
	if want < minHits {
		return 0
	}
	k := min(want+n, e.room/4, op.Limit.Capacity())
	if k <= n || k < minHits {
		return 0
	}
	return k
}

// noteRoom keeps what a take's answer r says of the room left.
func (e *entry) noteRoom(r algorithms.Result) {
	e.room, e.roomKnown = r.Remaining, true
}

// grant makes a lease of op, a take sent at sent that the backend admitted
// as r, of which n hits are used at once (by the take that asked for it,
// 0 for a lease taken ahead). The lease lasts tau from when it was sent,
// or, for an algorithm that counts in windows, until the end of the window
// it counts in if that comes first, measured from when it was sent: no
// later than the backend's own times, whatever the clocks say.
func (e *entry) grant(op *algorithms.Op, n uint64, r algorithms.Result, sent time.Time, tau time.Duration, obs Observer) (*held, algorithms.Result) {
	e.noteRoom(r)
	// The receipt names the hold, so that a refund of hits the lease served,
	// whoever sends it, releases them as its give-back does.
	r.Receipt.Hold = op.Hold
	h := &held{op: *op, left: op.Hits, receipt: r.Receipt, remaining: r.Remaining,
		expires: sent.Add(tau), replenished: sent.Add(r.ResetAfter)}
	if op.Limit.Algorithm.Spec().Windowed {
		at := time.UnixMicro(r.Receipt.At)
		end := op.Limit.WindowStart(op.Limit.WindowIndex(at) + 1)
		if until := sent.Add(end.Sub(at)); until.Before(h.expires) {
			h.expires, h.windowEnd = until, true
		}
	}
	obs.ObserveLease(op, Taken, op.Hits)
	var res algorithms.Result
	if n > 0 {
		res = h.result(n, sent)
	}
	return h, res
}

// detach gives up the lease *p, appending to back the give-back of what it
// did not use: by its receipt, so that a window's applies only in the
// window it was taken in, and a log's removes the entries not served.
func (e *entry) detach(p **held, back []algorithms.Op, obs Observer) []algorithms.Op {
	h := *p
	if h == nil {
		return back
	}
	*p = nil
	if h.left == 0 {
		return back
	}
	r := h.op
	r.Refund, r.Hits, r.Receipt, r.Hold = true, h.left, h.receipt, 0
	if r.Limit.Algorithm.Spec().ExactRefund {
		r.Receipt.Seq += h.used
	}
	obs.ObserveLease(&r, GivenBack, h.left)
	return append(back, r)
}

// idle reports whether the entry holds nothing and no one asked for it
// since idleAfter before now.
func (e *entry) idle(now time.Time) bool {
	return e.lease == nil && e.next == nil && !e.fetching() && now.Sub(e.seen) > idleAfter
}
