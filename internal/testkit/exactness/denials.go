package exactness

import (
	"fmt"
	"slices"
	"time"
)

// CheckDenials reports the false denials: answered takes, checks and
// charges over the limit (a charge over the limit says that a take of its
// hits would have been denied just before it) for which the model had room
// at every moment the server could have decided them, placing the other
// calls where they leave the least room (see the evaluator's low
// placement): every take or charge that may have been decided by then
// applied as late as possible, refunds only once surely decided, as early
// as possible, the calls surely after left out.
//
// The moments are [Sent − Slack, Received + Slack]. The model's room only
// grows with time while no call is applied, so it is least where a call may
// first have been decided: the denial is judged at its Sent − Slack, at the
// Sent − Slack of each take or charge in between (and, with tol.AddFirst,
// of each denied take), at the ends of reloads and at its Received + Slack. A denial is false when the model admits
// n + tol.Below at each of them: Below is what other replicas' leases may
// hold, 0 for one replica, where the check is exact. Denials that may have
// been decided during a Loss or the tol.Hold or tol.Forget after it are not
// judged. With
// tol.AddFirst, the denied takes count while they are decided, and the
// denials that may answer a count another op was about to give back are
// not judged (see Tolerance.AddFirst and Tolerance.Repeat).
func CheckDenials(h History, tol Tolerance) []Violation {
	var out []Violation
	for _, tl := range h.timelines() {
		e := newEvaluator(tl, tol)
		for d := range tl.calls {
			if tl.calls[d].denial() {
				if v, ok := e.falseDenial(d, tol.Below); ok {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// falseDenial judges the denial d.
func (e *evaluator) falseDenial(d int, below uint64) (Violation, bool) {
	tl := e.tl
	c := &tl.calls[d]
	a, b := tl.sent[d]-e.slack, tl.recv[d]+e.slack
	if tl.nearLoss(span{a, b}, e.forget) || e.unjudged(d) {
		return Violation{}, false
	}
	n := c.Hits + below
	// The least room of [a, b] is at least that of the state at a holding
	// every call that may have been decided by b: decided as late, each of
	// them leaves no more room.
	least := tl.limitDuring(a, b, false)
	res := e.lowState(d, a, a, b).Take(least.Limit, time.UnixMicro(a), n)
	room, at := res.Remaining+n, a
	if !res.Allowed {
		xs := []int64{a, b}
		xs = append(xs, tl.reloadTimes(a, b)...)
		for j := d + 1; j < len(tl.calls) && tl.sent[j]-e.slack <= b; j++ {
			if (tl.calls[j].consumes() || e.transient(j)) && !e.later(j, d) {
				xs = append(xs, tl.sent[j]-e.slack)
			}
		}
		slices.Sort(xs)
		xs = slices.Compact(xs)
		room = ^uint64(0)
		for _, x := range xs {
			res := e.lowState(d, a, x, x).Take(tl.limitAt(x, false).Limit, time.UnixMicro(x), n)
			if !res.Allowed {
				return Violation{}, false
			}
			if res.Remaining+n < room {
				room, at = res.Remaining+n, x
			}
		}
	}
	return Violation{
		Check: Denial, Limit: tl.name, From: time.UnixMicro(a), To: time.UnixMicro(b),
		Got: int64(c.Hits), Low: int64(room), Excess: int64(room) - int64(n) + 1,
		Detail: fmt.Sprintf("%s of %d denied while the model had room for %d at every moment it may have been decided (least at %s; allowance %d)",
			c.Kind, c.Hits, room, clock(time.UnixMicro(at)), below),
		Calls: []Call{*c},
	}, true
}
