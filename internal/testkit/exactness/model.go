package exactness

import (
	"sort"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// evaluator replays one limit's calls on its Go twin, placing each call at
// the time a check needs within the times the server may have decided it.
// Two placements serve the checks:
//
//   - low, the least room: every take or charge that may have been decided
//     by then is applied as late as possible, Received + Slack + Lag (more
//     of a log's entries still in the window, less of a bucket's refill, a
//     window's hits in the later window); every refund surely decided by
//     then is applied as early as possible, Sent − Slack (in the earlier
//     window, removing a log's older entries);
//   - high, the most room: only the takes and charges surely decided
//     before, as early as possible, Sent − Slack; every refund that may
//     have been decided by then, as late as possible.
//
// Calls of one caller are ordered: those sent after a call returned are
// after it, those returned before it was sent are before it. A Loss resets
// the model: after it, low keeps the takes that may have been decided after
// it started, high only those surely decided once it and the Hold after it
// had passed.
//
// Queries come in the order of their times, so that each placement keeps a
// base: the state after the calls whose placement is settled for every
// query still to come, which each query clones and completes.
type evaluator struct {
	tl               *timeline
	slack, lag, hold int64
	addFirst         bool
	repeat           int64
	forget           int64 // after a loss, in which nothing is judged
	refundDur        int64 // the longest refund, plus 2·slack
	callDur          int64 // the longest call, plus 2·slack
	low, high        base
	next             []int // the caller's next call, -1 when none
}

// base is one placement's state after the calls placed up to horizon.
type base struct {
	high    bool
	seg     int
	ops     []placed
	next    int
	st      algorithms.State
	horizon int64
}

// placed is a call applied to the model at a time: transient, it is a
// denied take counted while it is decided (Tolerance.AddFirst); tick, it
// is no call but a check of 0 hits at the end of a reload's window (see
// timeline.widen).
type placed struct {
	at        int64
	call      int
	refund    bool
	transient bool
	tick      bool
}

func newEvaluator(tl *timeline, tol Tolerance) *evaluator {
	e := &evaluator{tl: tl, low: base{seg: -1}, high: base{high: true, seg: -1}, addFirst: tol.AddFirst}
	e.slack, e.lag, e.hold = tol.micros()
	tl.widen(e.slack)
	e.repeat, e.forget = tol.Repeat.Microseconds(), tol.unjudged()
	for i, c := range tl.calls {
		d := tl.recv[i] - tl.sent[i] + 2*e.slack + 1
		e.callDur = max(e.callDur, d)
		if c.refunds() {
			e.refundDur = max(e.refundDur, d)
		}
	}
	e.refundDur = max(e.refundDur, 1)
	e.next = make([]int, len(tl.calls))
	last := map[[2]int]int{}
	for i, c := range tl.calls {
		e.next[i] = -1
		k := [2]int{c.Replica, c.Caller}
		if p, ok := last[k]; ok {
			e.next[p] = i
		}
		last[k] = i
	}
	return e
}

// sameCallerOf reports whether calls i and j are of one caller.
func (e *evaluator) sameCallerOf(i, j int) bool {
	a, b := &e.tl.calls[i], &e.tl.calls[j]
	return a.Replica == b.Replica && a.Caller == b.Caller
}

// before reports whether call j surely came before call c: j is of c's
// caller and returned before c was sent.
func (e *evaluator) before(j, c int) bool {
	return c >= 0 && e.sameCallerOf(j, c) && e.tl.recv[j] <= e.tl.sent[c]
}

// later reports whether call j surely came after call c: j is of c's
// caller and was sent once c had returned.
func (e *evaluator) later(j, c int) bool {
	return c >= 0 && j != c && e.sameCallerOf(j, c) && e.tl.sent[j] >= e.tl.recv[c]
}

// segment returns the stretch between losses a query starting at t
// belongs to.
func (e *evaluator) segment(t int64) int { return e.tl.lossIndex(t, e.hold) }

// placement returns call j's base placement in segment k: low's takes and
// charges at Received + Slack + Lag and refunds at Sent − Slack, high's
// takes and charges at Sent − Slack and refunds at Received + Slack. ok is
// false for a call the placement does not apply in segment k.
func (e *evaluator) placement(j, k int, high bool) (at int64, refund, ok bool) {
	c := &e.tl.calls[j]
	s, r := e.tl.sent[j]-e.slack, e.tl.recv[j]+e.slack
	var z span
	if k > 0 {
		z = e.tl.losses[k-1]
	}
	switch {
	case !high && c.consumes():
		return r + e.lag, false, k == 0 || r > z.from
	case !high && c.surelyRefunds():
		return s, true, k == 0 || s >= z.to
	case high && c.surelyConsumes():
		return s, false, k == 0 || s >= z.to+e.hold
	case high && c.refunds():
		return r, true, k == 0 || r > z.from
	}
	return 0, false, false
}

// order sorts ops by time; at one time, low applies refunds first (they
// remove fewer of the hits that count), high last.
func order(ops []placed, high bool) {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].at != ops[j].at {
			return ops[i].at < ops[j].at
		}
		return ops[i].refund != high && ops[j].refund == high
	})
}

// baseAt returns b advanced to horizon in segment k.
func (e *evaluator) baseAt(b *base, k int, horizon int64) *base {
	if b.seg != k || horizon < b.horizon {
		b.seg, b.ops, b.next, b.horizon = k, nil, 0, horizon
		b.st = algorithms.NewState(e.tl.initial.Algorithm)
		for j := range e.tl.calls {
			if at, refund, ok := e.placement(j, k, b.high); ok {
				b.ops = append(b.ops, placed{at: at, call: j, refund: refund})
			}
		}
		for _, t := range e.tl.ticks() {
			b.ops = append(b.ops, placed{at: t, tick: true})
		}
		order(b.ops, b.high)
	}
	for b.next < len(b.ops) && b.ops[b.next].at <= horizon {
		e.apply(b.st, b.ops[b.next], b.high)
		b.next++
	}
	b.horizon = horizon
	return b
}

// apply applies op to st with the limit in force at its time. A transient
// op adds its hits, no more than one past what the limit can hold, as the
// service asks no more of it.
func (e *evaluator) apply(st algorithms.State, op placed, high bool) {
	if op.tick {
		st.Take(e.tl.limitAt(op.at, high).Limit, time.UnixMicro(op.at), 0)
		return
	}
	if op.transient {
		l := e.tl.limitAt(op.at, high)
		st.Record(l.Limit, time.UnixMicro(op.at), min(e.tl.calls[op.call].Hits, l.Capacity()+1))
		return
	}
	e.effect(st, op.call, op.at, high)
}

// effect applies call j to st at t: a refund gives its hits back (the
// newest hits, as a refund without a receipt does), a charge records them
// (owing with Debt), and a take that may have consumed records them, so
// that it counts even where the model would have denied it.
//
// A sliding_window_log records at most 2L entries, the newest it is given
// cut short: with more room than the server had (high), the model would
// log a charge's newer entries where the server logged fewer, and keep
// them after the server's older ones left; with less (low), it would log
// fewer new entries where the server logged more. So low logs every hit,
// as a log of MaxLogRequests would, and high leaves out the charges over
// the limit, the only ones the server may have cut.
func (e *evaluator) effect(st algorithms.State, j int, t int64, high bool) {
	c := &e.tl.calls[j]
	l := e.tl.limitAt(t, high)
	now := time.UnixMicro(t)
	log := l.Algorithm == algorithms.SlidingWindowLog
	switch {
	case c.Kind == Refund:
		if c.Hits > 0 {
			st.Refund(l.Limit, now, c.Hits, algorithms.Receipt{})
		}
	case !c.consumes():
	case log && high && c.Kind == Charge && !c.Allowed:
	case log && !high:
		uncut := l.Limit
		uncut.Requests = algorithms.MaxLogRequests
		st.Record(uncut, now, c.Hits)
	case c.Kind == Charge && l.Debt:
		st.Charge(l.Limit, now, c.Hits)
	default:
		st.Record(l.Limit, now, c.Hits)
	}
}

// lowState returns the model's state with the least room at at for a
// query about call c (-1 for none) that may have been decided from
// earliest on (earliest ≤ at): every take or charge that may have been
// decided by upTo, placed as late as possible but no later than at; every
// refund surely decided by at, placed as early as possible. c itself and
// the calls of its caller after it are left out. The state is the query's
// own. The calls settled before earliest − refundDur come from the base,
// so queries must come in the order of their earliest.
func (e *evaluator) lowState(c int, earliest, at, upTo int64) algorithms.State {
	horizon := earliest - e.refundDur
	k := e.segment(earliest)
	b := e.baseAt(&e.low, k, horizon)
	st := b.st.Clone()
	var tail []placed
	from := sort.Search(len(e.tl.calls), func(i int) bool { return e.tl.sent[i] > horizon-e.callDur-e.lag })
	for j := from; j < len(e.tl.calls) && e.tl.sent[j]-e.slack <= max(upTo, at); j++ {
		if j == c || e.later(j, c) {
			continue
		}
		if e.transient(j) {
			// A denied take counts while it is decided, from when it may
			// have started to when it may have ended.
			if e.tl.sent[j]-e.slack <= upTo && e.tl.recv[j]+e.slack >= at && !e.before(j, c) {
				tail = append(tail, placed{at: at, call: j, transient: true})
			}
			continue
		}
		p, refund, ok := e.placement(j, k, false)
		if !ok || p <= horizon {
			continue
		}
		if refund {
			if p <= at && (e.tl.recv[j]+e.slack <= at || e.before(j, c)) {
				tail = append(tail, placed{at: p, call: j, refund: true})
			}
			continue
		}
		if e.tl.sent[j]-e.slack <= upTo || e.before(j, c) {
			tail = append(tail, placed{at: min(p, at), call: j})
		}
	}
	tail = e.withTicks(tail, horizon, at)
	order(tail, false)
	for _, op := range tail {
		e.apply(st, op, false)
	}
	return st
}

// highState returns the model's state with the most room at at for a
// query about call c, which may have been decided from earliest on: the
// takes and charges surely decided before earliest (or by c's caller
// before c), placed as early as possible; every refund that may have been
// decided by at, placed as late as possible but no later than at. c itself
// and the calls of its caller after it are left out. Queries must come in
// the order of their earliest.
func (e *evaluator) highState(c int, at, earliest int64) algorithms.State {
	horizon := earliest - e.callDur
	k := e.segment(earliest)
	b := e.baseAt(&e.high, k, horizon)
	st := b.st.Clone()
	var tail []placed
	from := sort.Search(len(e.tl.calls), func(i int) bool { return e.tl.sent[i] > horizon-e.callDur })
	for j := from; j < len(e.tl.calls) && e.tl.sent[j]-e.slack <= at; j++ {
		if j == c || e.later(j, c) {
			continue
		}
		p, refund, ok := e.placement(j, k, true)
		if !ok || p <= horizon {
			continue
		}
		if refund {
			tail = append(tail, placed{at: min(p, at), call: j, refund: true})
			continue
		}
		if e.tl.recv[j]+e.slack <= earliest || e.before(j, c) {
			tail = append(tail, placed{at: min(p, at), call: j})
		}
	}
	tail = e.withTicks(tail, horizon, at)
	order(tail, true)
	for _, op := range tail {
		e.apply(st, op, true)
	}
	return st
}

// withTicks returns ops with the ticks in (horizon, at].
func (e *evaluator) withTicks(ops []placed, horizon, at int64) []placed {
	for _, t := range e.tl.ticks() {
		if t > horizon && t <= at {
			ops = append(ops, placed{at: t, tick: true})
		}
	}
	return ops
}

// remaining returns what st would report as remaining at t under l: the
// remaining of a check.
func remaining(st algorithms.State, l Limit, t int64) uint64 {
	return st.Take(l.Limit, time.UnixMicro(t), 0).Remaining
}

// transient reports whether call j counts while it is decided, and not
// after: a denied take on a backend that adds first (Tolerance.AddFirst).
func (e *evaluator) transient(j int) bool {
	c := &e.tl.calls[j]
	return e.addFirst && c.Kind == Take && c.Err == nil && !c.Allowed && c.Hits > 0
}

// unjudged reports whether denial j, on a backend that adds first, may be
// the answer to a count another op was about to give back: it may have
// met a refund (a take decided while a refund went below zero is denied,
// with the remaining of that count), or repeats, within Repeat, a denial
// of as many hits on its replica that may have met a refund or another
// denied take.
func (e *evaluator) unjudged(j int) bool {
	c := &e.tl.calls[j]
	if !e.addFirst || c.Allowed || c.Err != nil {
		return false
	}
	if e.met(j, func(i int) bool { return e.tl.calls[i].refunds() }) {
		return true
	}
	if e.repeat == 0 || c.Kind != Take {
		return false
	}
	from := sort.Search(len(e.tl.calls), func(i int) bool {
		return e.tl.sent[i] >= e.tl.sent[j]-e.repeat-e.callDur
	})
	for i := from; i < j; i++ {
		p := &e.tl.calls[i]
		if p.Kind == Take && !p.Allowed && p.Err == nil && p.Hits == c.Hits && p.Replica == c.Replica &&
			e.tl.recv[i]+e.slack+e.repeat >= e.tl.sent[j]-e.slack &&
			e.met(i, func(k int) bool { return e.tl.calls[k].refunds() || e.transient(k) }) {
			return true
		}
	}
	return false
}

// met reports whether a call for which is reports true may have been
// decided while call j was.
func (e *evaluator) met(j int, is func(i int) bool) bool {
	s := span{e.tl.sent[j] - e.slack, e.tl.recv[j] + e.slack}
	from := sort.Search(len(e.tl.calls), func(i int) bool { return e.tl.sent[i] >= s.from-e.callDur })
	for i := from; i < len(e.tl.calls) && e.tl.sent[i]-e.slack <= s.to; i++ {
		if i != j && is(i) && s.overlaps(span{e.tl.sent[i] - e.slack, e.tl.recv[i] + e.slack}) {
			return true
		}
	}
	return false
}
