package exactness

import (
	"fmt"
	"sort"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// CheckRemaining reports the answers whose limit_remaining the model
// cannot explain, and the rises of it it cannot either.
//
// Each answered call's remaining must lie between the model's remaining
// just after the call with the least room, evaluated at Sent − Slack − Lag
// (the low placement, holding every take or charge that may have been
// decided by Received + Slack; Lag is how stale a lease's remaining may be),
// less tol.Below, and with the most room, evaluated at Received + Slack
// (the high placement), plus tol.Above. For one caller on one replica,
// with a Tolerance of Slack alone, that is the exact remaining of the
// moments the call may have been decided; with several replicas, Below is
// what other replicas' leases may hold and Above what they may have taken
// since the remaining was read.
//
// Between two answered calls of one caller, the remaining must not rise
// (a remaining that stays as the model's falls is a stale one, which the
// range reports) by more than the model's could: from the first call's remaining with the
// least room to the second's, with the same placement of the calls before
// the first and none of the others between them, evaluated at the second's
// Received + Slack, plus the hits of refunds that may have come between,
// plus the hits of calls that may have left a log's window, or a counter's
// current window, where the model keeps them, plus, for a token_bucket and
// a sliding_window_counter, one hit for the fraction their remaining
// rounds; plus Above and Below. Where the model is past the limit (its
// least remaining is 0), the rise is held to the second call's most
// remaining less the first's least instead. With tol.AddFirst, a denial
// that may answer a count another op was about to give back is not judged. Calls that may have been decided
// during a Loss or the tol.Hold or tol.Forget after it are not judged, nor
// rises across a reload.
func CheckRemaining(h History, tol Tolerance) []Violation {
	var out []Violation
	for _, tl := range h.timelines() {
		e := newEvaluator(tl, tol)
		js := make([]judged, len(tl.calls))
		for c := range tl.calls {
			js[c] = e.remainingOf(c, tol)
			out = append(out, js[c].violations...)
		}
		for c := range tl.calls {
			if v, ok := e.rise(c, js, tol); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// judged is what CheckRemaining found of one call: its range, the most its
// caller's next call could rise above it, and its violations.
type judged struct {
	ok         bool // judged at all
	lo, hi     uint64
	rise       int64 // the model's largest rise to the next call
	riseOK     bool  // rise holds one
	violations []Violation
}

// remainingOf judges call c's remaining, and works out the most its
// caller's next call may rise above it.
func (e *evaluator) remainingOf(c int, tol Tolerance) judged {
	tl := e.tl
	call := &tl.calls[c]
	if call.Err != nil || e.unjudged(c) {
		return judged{}
	}
	a, t, b := tl.sent[c]-e.slack-e.lag, tl.sent[c]-e.slack, tl.recv[c]+e.slack
	if tl.nearLoss(span{a, b}, e.forget) {
		return judged{}
	}
	lowest := tl.limitDuring(a, b, false)
	st := e.lowState(c, a, a, b)
	e.effect(st, c, a, false)
	lo := remaining(st, lowest, a)

	highest := tl.limitDuring(t, b, true)
	hst := e.highState(c, b, t)
	e.effect(hst, c, b, true)
	hi := remaining(hst, highest, b)

	j := judged{ok: true, lo: lo, hi: hi}
	got := call.Remaining
	v := Violation{Check: Remain, Limit: tl.name, From: time.UnixMicro(a), To: time.UnixMicro(b),
		Got: int64(got), Low: int64(lo), High: int64(hi), Calls: []Call{*call}}
	switch {
	case got+tol.Below < lo:
		v.Excess = int64(lo) - int64(got) - int64(tol.Below)
		v.Detail = fmt.Sprintf("%s of %d answered remaining %d, below the model's least %d (most %d; allowance %d)", call.Kind, call.Hits, got, lo, hi, tol.Below)
		j.violations = append(j.violations, v)
	case got > hi+tol.Above:
		v.Excess = int64(got) - int64(hi) - int64(tol.Above)
		v.Detail = fmt.Sprintf("%s of %d answered remaining %d, above the model's most %d (least %d; allowance %d)", call.Kind, call.Hits, got, hi, lo, tol.Above)
		j.violations = append(j.violations, v)
	}
	if lo == 0 {
		// The model may be further past the limit than the server was: its
		// rise from there says nothing of the server's.
		return j
	}
	n := e.next[c]
	if n < 0 || tl.calls[n].Err != nil {
		return j
	}
	t2 := tl.recv[n] + e.slack
	if tl.nearLoss(span{a, t2}, e.forget) || len(tl.reloadTimes(a, t2)) > 0 {
		return j
	}
	// st holds the calls before c with the least room, and c: the next
	// call alone joins it, so that the model's rise is the most it could be.
	e.effect(st, n, t2, true)
	second := remaining(st, tl.limitDuring(tl.sent[n]-e.slack, t2, true), t2)
	j.rise, j.riseOK = int64(second)-int64(lo)+int64(e.leeway(c, n, a, t2)), true
	return j
}

// leeway returns what the rise from call c to call n may exceed the
// model's by: the hits of refunds that may have come between, not in the
// model (for a log, also those that may have taken hits that left the
// window between them); the hits of denied takes counted while the first
// was decided (Tolerance.AddFirst) and given back since; the hits of calls placed late that may have left a log's window
// (or a counter's current window) before the next call where the model
// keeps them; and, for a token_bucket and a sliding_window_counter, one hit
// for the fraction their remaining rounds, which the model, with less room
// than the server had, may round the other way.
func (e *evaluator) leeway(c, n int, a, t2 int64) uint64 {
	tl := e.tl
	w := tl.initial.WindowMicros()
	var edges []int64
	switch tl.initial.Algorithm {
	case algorithms.SlidingWindowLog:
		edges = []int64{t2 - w}
	case algorithms.SlidingWindowCounter:
		for i := tl.initial.WindowIndex(time.UnixMicro(a)); micros(tl.initial.WindowStart(i)) <= t2; i++ {
			edges = append(edges, micros(tl.initial.WindowStart(i)))
		}
	}
	var more uint64
	if alg := tl.initial.Algorithm; alg == algorithms.TokenBucket || alg == algorithms.SlidingWindowCounter {
		more = 1
	}
	from := sort.Search(len(tl.calls), func(i int) bool {
		return tl.sent[i] >= a-w-e.callDur-e.lag
	})
	for j := from; j < len(tl.calls) && tl.sent[j]-e.slack <= t2; j++ {
		if j == c || j == n {
			continue
		}
		cj := &tl.calls[j]
		switch {
		case !cj.refunds() || e.later(j, n):
		case !(cj.surelyRefunds() && tl.recv[j]+e.slack <= a):
			more += cj.Hits
		case tl.initial.Algorithm == algorithms.SlidingWindowLog && tl.sent[j]-e.slack > a-w:
			// The model gave it back as early as it may have been, so it
			// took the log's newest hits then: older ones than the server
			// may have taken, which may have left the window between the
			// two calls.
			more += cj.Hits
		}
		if e.transient(j) && (span{tl.sent[j] - e.slack, tl.recv[j] + e.slack}).overlaps(span{a, tl.recv[c] + e.slack}) {
			// Counted in the model while the first call was decided, and
			// given back since.
			more += min(cj.Hits, tl.limitAt(a, true).Capacity()+1)
		}
		if cj.consumes() {
			for _, x := range edges {
				if tl.sent[j]-e.slack <= x && x <= tl.recv[j]+e.slack+e.lag {
					more += cj.Hits
					break
				}
			}
		}
	}
	return more
}

// rise judges the rise of the remaining from call c to its caller's next.
func (e *evaluator) rise(c int, js []judged, tol Tolerance) (Violation, bool) {
	n := e.next[c]
	if n < 0 || !js[c].ok || !js[n].ok {
		return Violation{}, false
	}
	tl := e.tl
	first, second := tl.calls[c], tl.calls[n]
	most, how := js[c].rise, "with the least room before the first"
	if !js[c].riseOK {
		most, how = int64(js[n].hi)-int64(js[c].lo), "from the first's least to the second's most"
	}
	rise := int64(second.Remaining) - int64(first.Remaining)
	allowed := most + int64(tol.Above+tol.Below)
	if rise <= 0 || rise <= allowed {
		return Violation{}, false
	}
	a, t2 := tl.sent[c]-e.slack-e.lag, tl.recv[n]+e.slack
	return Violation{Check: Rise, Limit: tl.name, From: time.UnixMicro(a), To: time.UnixMicro(t2),
		Got: rise, High: most, Excess: rise - allowed,
		Detail: fmt.Sprintf("remaining rose from %d to %d (%+d) between two calls of one caller; the model's could rise by %d at most (%s; allowance %d)",
			first.Remaining, second.Remaining, rise, most, how, tol.Above+tol.Below),
		Calls: []Call{first, second}}, true
}
