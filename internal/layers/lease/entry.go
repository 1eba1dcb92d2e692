package lease

import (
	"sync/atomic"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// entry is what the Limiter knows of one limit: the demand on it, the room
// the backend last reported, its leases, the settlements it owes the
// backend, and the limit as the backend last showed it without this
// replica's leases (the mirror). Its methods run under its shard's lock.
type entry struct {
	// id is the identity of the limit (rate.Op.Identity).
	id string
	// period is the index of the demand period of cur; prev counts the
	// period before it.
	period    int64
	cur, prev uint64
	seen      time.Time // the last take of the limit
	// room is the backend's remaining after the last take it answered.
	room      uint64
	roomKnown bool
	// op is the op the leases were taken for: the limit they count in,
	// and its key, identity and tag, for their settlements.
	op rate.Op
	// leases are the leases held, in the order they serve.
	leases []*held
	// mirror is the limit as the backend showed it with the last lease,
	// this replica's leases settled and ended there, moved on by the takes
	// served since: what the backend would answer without them. Nil when
	// it is not known.
	mirror algorithms.State
	// mirrorAt is the time (µs, the backend's) the mirror last answered
	// at: it answers at no earlier one.
	mirrorAt int64
	// busy is, while a call that settles or takes leases of the limit is
	// under way, closed when it returns; nil otherwise. sent counts the
	// other ops of the limit under way: while there are any, no lease is
	// taken, lest the backend decide one of them after it and count the
	// lease's hits against it.
	busy chan struct{}
	sent atomic.Int32
	// serves counts the takes served, for the receipts of an algorithm
	// whose receipts name no entries.
	serves uint64
}

// held is a lease.
type held struct {
	receipt algorithms.Receipt
	hold    time.Duration
	size    uint64
	// left is what is not served yet; reported what earlier settlements
	// reported served; pending the runs served since.
	left, reported uint64
	pending        []algorithms.Served
	runs           int // the runs the lease has served in all
	// next is the sequence number of the next hit served: the log's, or a
	// count of the lease's own.
	next uint64
	// clock maps this replica's clock to the backend's.
	clock *backendClock
	// expires is when it serves no more (this replica's clock): the lease
	// time after it was sent, or the end of its window, or when the state
	// its answer showed stops telling the backend's.
	expires time.Time
	// slot is the width of its slots in µs (slotOf).
	slot int64
}

// demandPeriod is the length of the periods demand is counted in.
const demandPeriod = 50 * time.Millisecond

// maxRuns bounds the runs one lease serves hits in: a lease that would
// serve a hit in one more ends, and the next one serves it.
const maxRuns = 64

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

// backend returns the backend's time (µs) of t, this replica's time: no
// earlier than the backend's clock read at t (backendClock).
func (h *held) backend(t time.Time) int64 {
	hi, _ := h.clock.read(t)
	return hi
}

// answering returns the time (µs) a lease's answer at t is given at: the
// best estimate of the backend's clock read at t (backendClock.estimate).
func (h *held) answering(t time.Time) int64 { return h.clock.estimate(t) }

// slotOf returns the slots in which a lease of limit l and lease time tau
// records the times it serves its hits (algorithms.ServedSlot).
func slotOf(l algorithms.Limit, tau time.Duration) time.Duration {
	return algorithms.ServedSlot(l, tau)
}

// slot returns the time (µs) a hit served at t is recorded at, in slots of
// d µs: the end of its slot.
func slot(t, d int64) int64 {
	return t - floorMod(t, d) + d - 1
}

// floorMod returns t mod d, in [0, d).
func floorMod(t, d int64) int64 {
	m := t % d
	if m < 0 {
		m += d
	}
	return m
}

// serves reports whether h can serve n hits at now.
func (h *held) serves(n uint64, now time.Time) bool {
	if h.left < n || !now.Before(h.expires) {
		return false
	}
	if h.slot == 1 {
		return true // runs of single microseconds are compacted when settled
	}
	at := slot(h.backend(now), h.slot)
	return len(h.pending) > 0 && h.pending[len(h.pending)-1].At == at || h.runs < maxRuns
}

// serve takes n hits from h at now, and returns their receipt: the run
// they join (a log's entries are logged there once settled) and their
// sequence numbers.
func (h *held) serve(n uint64, now time.Time) algorithms.Receipt {
	at := slot(h.backend(now), h.slot)
	r := algorithms.Receipt{At: at, Seq: h.next, Epoch: h.receipt.Epoch}
	if last := len(h.pending) - 1; last >= 0 && h.pending[last].At == at && h.pending[last].Seq+h.pending[last].N == h.next {
		h.pending[last].N += n
	} else {
		h.pending = append(h.pending, algorithms.Served{At: at, Seq: h.next, N: n})
		h.runs++
	}
	h.next += n
	h.left -= n
	return r
}

// unserve takes back n hits served with receipt r, if h still has them to
// report: they are served no more, and go back with h's unused hits. It
// reports whether it found them.
func (h *held) unserve(r algorithms.Receipt, n uint64) bool {
	for i, p := range h.pending {
		if p.At != r.At || r.Seq < p.Seq || r.Seq+n > p.Seq+p.N {
			continue
		}
		before := algorithms.Served{At: p.At, Seq: p.Seq, N: r.Seq - p.Seq}
		after := algorithms.Served{At: p.At, Seq: r.Seq + n, N: p.Seq + p.N - r.Seq - n}
		var keep []algorithms.Served
		for _, q := range []algorithms.Served{before, after} {
			if q.N > 0 {
				keep = append(keep, q)
			}
		}
		h.pending = append(h.pending[:i], append(keep, h.pending[i+1:]...)...)
		return true
	}
	return false
}

// settlement returns what a settlement made at now says of h, a lease of
// limit l: what it served since the last one, in as few runs as the
// settlement needs (algorithms.CompactServed), and whether it ends; and
// notes that it was reported. The runs of the last round trip and slice
// stay as they are: the backend may settle them before their slices
// start.
func (h *held) settlement(l algorithms.Limit, end bool, now time.Time) algorithms.Lease {
	_, lo := h.clock.read(now)
	recent := lo - l.SliceMicros()
	ls := algorithms.Lease{Receipt: h.receipt, Hold: h.hold, Size: h.size, Reported: h.reported, Close: end}
	for _, p := range h.pending {
		h.reported += p.N
	}
	ls.Served = algorithms.CompactServed(l, h.pending, recent, maxRuns)
	h.pending = nil
	return ls
}

// pendingEnd returns what a settlement that ends every lease of e would
// say now, without noting anything: how the limit is without them, at
// until (µs, the backend's). The hits served are taken as served by then:
// a mirror made at a decision counts the hits of the take that asked for
// the lease, and every hit served before that take was sent, at no later
// time than the decision, where their recorded times, the clock's upper
// bound, may be later.
func (e *entry) pendingEnd(until int64) []algorithms.Lease {
	out := make([]algorithms.Lease, 0, len(e.leases))
	for _, h := range e.leases {
		served := append([]algorithms.Served(nil), h.pending...)
		for i := range served {
			served[i].At = min(served[i].At, until)
		}
		out = append(out, algorithms.Lease{Receipt: h.receipt, Hold: h.hold, Size: h.size, Reported: h.reported,
			Served: served, Close: true})
	}
	return out
}

// settle returns the settlement the next call on the limit makes, or nil
// when there is nothing to settle: the leases end when all is set or they
// serve no more at now; the others report what they served. The leases
// that end leave e.
func (e *entry) settle(all bool, now time.Time) *rate.Op {
	var leases []algorithms.Lease
	kept := e.leases[:0]
	for _, h := range e.leases {
		end := all || h.left == 0 || !now.Before(h.expires)
		if end || len(h.pending) > 0 {
			leases = append(leases, h.settlement(e.op.Limit, end, now))
		}
		if !end {
			kept = append(kept, h)
		}
	}
	clear(e.leases[len(kept):])
	e.leases = kept
	if len(leases) == 0 {
		return nil
	}
	op := e.op
	op.Kind, op.Hits, op.Hold, op.Receipt, op.Leases = rate.Settle, 0, 0, algorithms.Receipt{}, leases
	return &op
}

// holds reports whether e has leases to settle.
func (e *entry) holds() bool { return len(e.leases) > 0 }

// due reports whether e has leases that ended at now (they serve no more)
// to settle.
func (e *entry) due(now time.Time) bool {
	for _, h := range e.leases {
		if h.left == 0 || !now.Before(h.expires) {
			return true
		}
	}
	return false
}

// idle reports whether e holds nothing, no call on it is under way, and no
// one asked for it since idleAfter before now.
func (e *entry) idle(now time.Time) bool {
	return !e.holds() && e.busy == nil && e.sent.Load() == 0 && now.Sub(e.seen) > idleAfter
}

// free reports whether a lease of e may be taken: no call on it is under
// way.
func (e *entry) free() bool { return e.busy == nil && e.sent.Load() == 0 }

// serve admits op at now from the first lease that holds its hits, and
// returns the answer: the mirror's, as the backend would answer without
// the leases, with the receipt of the hits served. It reports false when
// no lease can serve them.
func (e *entry) serve(op *rate.Op, now time.Time) (algorithms.Result, bool) {
	for _, h := range e.leases {
		if !h.serves(op.Hits, now) {
			continue
		}
		r := h.serve(op.Hits, now)
		res := algorithms.Result{Allowed: true, Receipt: r}
		if e.mirror != nil {
			m := e.mirror.Take(op.Limit, e.answerAt(h, now), op.Hits)
			res.Remaining, res.ResetAfter = m.Remaining, m.ResetAfter
		}
		return res, true
	}
	return algorithms.Result{}, false
}

// answerAt returns the time the mirror answers at at now, served by h: no
// later than the backend's clock then (held.answering), and no earlier than
// the mirror answered at before, so that it never goes back across a
// window's start or a refill it showed.
func (e *entry) answerAt(h *held, now time.Time) time.Time {
	e.mirrorAt = max(e.mirrorAt, h.answering(now))
	return time.UnixMicro(e.mirrorAt)
}

// unserve takes back, for a refund op, hits a lease served and has not
// reported yet, and returns the refund's answer; false when no lease of e
// served them.
func (e *entry) unserve(op *rate.Op, now time.Time) (algorithms.Result, bool) {
	for _, h := range e.leases {
		if h.receipt.Epoch != op.Receipt.Epoch || !h.unserve(op.Receipt, op.Hits) {
			continue
		}
		res := algorithms.Result{Allowed: true}
		if e.mirror != nil {
			m := e.mirror.Refund(op.Limit, e.answerAt(h, now), op.Hits, algorithms.Receipt{})
			res.Remaining, res.ResetAfter = m.Remaining, m.ResetAfter
		}
		return res, true
	}
	return algorithms.Result{}, false
}

// ahead reports whether the last lease is running out at now (a quarter of
// it, or of its time, left), so that the next should be taken.
func (e *entry) ahead(now time.Time, tau time.Duration) bool {
	if len(e.leases) == 0 || !e.free() {
		return false
	}
	h := e.leases[len(e.leases)-1]
	return h.left*4 <= h.size || h.expires.Sub(now)*4 <= tau
}

// size returns how many hits to lease for op at now, n of them for op's own
// take, or 0 for no lease: what this replica asks of the limit in tau, plus
// n, at most a quarter of the room the backend last reported and no more
// than the limit can hold. It is 0 when that is not more than n nor
// minHits (so a limit near its end is taken hit by hit), when the room is
// not known yet (a take tells it), or when the limit is cold (the demand in
// tau is under minHits).
func (e *entry) size(op *rate.Op, n uint64, now time.Time, tau time.Duration, minHits uint64) uint64 {
	if !e.roomKnown {
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
// as r, of which n hits are served at once (by the take that asked for it,
// 0 for a lease taken ahead), and returns the answer to that take. The
// lease serves for tau from when it was sent, or, for an algorithm that
// counts in windows, until the end of the window it counts in if that comes
// first, or until the state its answer showed stops telling the backend's,
// measured from when it was sent: no later than the backend's own times,
// whatever the clocks say. The mirror is the state the answer showed, with
// every lease of e settled and ended there.
func (e *entry) grant(op *rate.Op, n uint64, r algorithms.Result, sent, now time.Time, tau time.Duration, clock *backendClock) algorithms.Result {
	e.noteRoom(r)
	spec := op.Limit.Algorithm.Spec()
	decided := r.Receipt.Decided(op.Limit, op.Hold)
	h := &held{receipt: r.Receipt, hold: op.Hold, size: op.Hits, left: op.Hits, next: r.Receipt.Seq,
		clock: clock, expires: sent.Add(tau), slot: slotOf(op.Limit, tau).Microseconds()}
	if !spec.ExactRefund {
		h.next = e.serves + 1
		e.serves += op.Hits
	}
	if spec.Windowed {
		at := time.UnixMicro(decided)
		end := op.Limit.WindowStart(op.Limit.WindowIndex(at) + 1)
		if until := sent.Add(end.Sub(at)); until.Before(h.expires) {
			h.expires = until
		}
	}
	if r.StateUntil != 0 {
		if until := sent.Add(time.Duration(r.StateUntil-decided) * time.Microsecond); until.Before(h.expires) {
			h.expires = until
		}
	}
	e.leases = append(e.leases, h)
	e.op = *op
	e.op.Receipt, e.op.Leases = algorithms.Receipt{}, nil
	res := algorithms.Result{Allowed: true}
	if n > 0 {
		// Served at once: now, which the backend's clock reads no earlier
		// than the decision.
		res.Receipt = h.serve(n, now)
	}
	e.mirror = nil
	if st := r.State; st != nil {
		// The answer is the backend's at its decision, as without leases.
		at := time.UnixMicro(decided)
		st.Settle(op.Limit, at, e.pendingEnd(decided))
		e.mirror, e.mirrorAt = st, decided
		m := st.Take(op.Limit, at, 0)
		res.Remaining, res.ResetAfter = m.Remaining, m.ResetAfter
	} else {
		res.Remaining, res.ResetAfter = r.Remaining, r.ResetAfter
	}
	return res
}
