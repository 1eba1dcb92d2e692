package exactness

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// Limit is one limit as the server enforces it: its numbers and algorithm,
// and how it counts a Charge.
type Limit struct {
	algorithms.Limit
	// Debt makes a Charge owe what it records beyond the limit to later
	// windows (charge: debt); without it a Charge is a record, counted
	// until its window has passed (charge: window, quota_mode, xDS).
	Debt bool
}

// Reload is a change of one limit's numbers, in force on every replica for
// every call sent after After, and on none before Before. A reload keeps
// the algorithm and the window: another of either would be another state.
type Reload struct {
	Limit         string
	To            Limit
	Before, After time.Time
}

// Loss is the backend forgetting every state (a FLUSHALL, a Redis restart
// without persistence), somewhere between Before and After.
type Loss struct {
	Before, After time.Time
}

// History is what a Recorder recorded: the limits at the start, keyed by
// the names calls give in Call.Limit, the calls by send time, and the
// events. The zero value is an empty history.
type History struct {
	Limits  map[string]Limit
	Calls   []Call
	Reloads []Reload
	Losses  []Loss
}

// timeline is one limit's share of a History, with times in microseconds
// since the Unix epoch.
type timeline struct {
	name    string
	initial Limit
	reloads []Reload // of this limit, by Before
	losses  []span   // every loss, by start
	calls   []Call   // of this limit, by Sent
	sent    []int64  // calls[i].Sent
	recv    []int64  // calls[i].Received
	// spans are, per reload, the times at which the model must take the
	// lower (spans[i][0]) or the higher (spans[i][1]) of the numbers before
	// and after it (see widen).
	spans [][2]span
}

// span is a closed interval of microseconds.
type span struct{ from, to int64 }

func (s span) overlaps(o span) bool { return s.from <= o.to && o.from <= s.to }

// micros returns t in microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

// timelines splits h by limit, in the order of the limits' names. Calls of
// a limit h does not know are left out.
func (h History) timelines() []*timeline {
	var losses []span
	for _, l := range h.Losses {
		losses = append(losses, span{micros(l.Before), micros(l.After)})
	}
	sort.Slice(losses, func(i, j int) bool { return losses[i].from < losses[j].from })
	byName := map[string]*timeline{}
	var names []string
	for name, l := range h.Limits {
		byName[name] = &timeline{name: name, initial: l, losses: losses}
		names = append(names, name)
	}
	slices.Sort(names)
	for _, r := range h.Reloads {
		if tl := byName[r.Limit]; tl != nil {
			tl.reloads = append(tl.reloads, r)
		}
	}
	for _, c := range h.Calls {
		if tl := byName[c.Limit]; tl != nil {
			tl.calls = append(tl.calls, c)
		}
	}
	var out []*timeline
	for _, name := range names {
		tl := byName[name]
		sort.Slice(tl.reloads, func(i, j int) bool { return tl.reloads[i].Before.Before(tl.reloads[j].Before) })
		sort.SliceStable(tl.calls, func(i, j int) bool { return tl.calls[i].Sent.Before(tl.calls[j].Sent) })
		for _, c := range tl.calls {
			tl.sent = append(tl.sent, micros(c.Sent))
			tl.recv = append(tl.recv, micros(c.Received))
		}
		tl.widen(0)
		out = append(out, tl)
	}
	return out
}

// widen works out, for each reload, when the model must take the lower and
// the higher of the numbers before and after it, for calls decided up to
// slack outside their [Sent, Received]. A state's change at one time
// depends on the numbers in force then and on when it last changed: a
// token bucket refills the time since its last change at the rate of the
// op that changes it. A call sent before the reload's After may have been
// decided under the old numbers until its Received + slack, and one sent
// after it under the new; the last change before the reload may have come
// as early as the Sent − slack of the last call answered OK (a change)
// before the reload's Before. So the model takes the lower numbers from
// that Sent − slack, the higher from Before, both until the last moment a
// call may have been decided under the old numbers, and then, to bound
// the refill of the time up to it, changes the state at that moment (a
// tick: a check of 0 hits) under them.
func (tl *timeline) widen(slack int64) {
	tl.spans = make([][2]span, len(tl.reloads))
	for i, r := range tl.reloads {
		before, after := micros(r.Before), micros(r.After)
		low, high := span{math.MinInt64, after}, span{before, after}
		for j, c := range tl.calls {
			if c.Err == nil && c.Allowed && tl.recv[j] < before {
				low.from = max(low.from, tl.sent[j]-slack)
			}
			if tl.sent[j]-slack <= after {
				high.to = max(high.to, tl.recv[j]+slack)
			}
		}
		low.to = high.to
		tl.spans[i] = [2]span{low, high}
	}
}

// ticks returns the times at which the model changes the state under the
// numbers of a reload's window (see widen): the end of each.
func (tl *timeline) ticks() []int64 {
	var ts []int64
	for i := range tl.reloads {
		ts = append(ts, tl.spans[i][1].to)
	}
	return ts
}

// window returns the span of reload i in which the model takes the lower
// (high false) or the higher (high true) numbers.
func (tl *timeline) window(i int, high bool) span {
	if high {
		return tl.spans[i][1]
	}
	return tl.spans[i][0]
}

// limitAt returns the limit the model applies at t: the one in force,
// or, where a reload may make a state's change at t follow either (see
// widen), the lower of the two numbers (high false) or the higher (high
// true).
func (tl *timeline) limitAt(t int64, high bool) Limit {
	l := tl.initial
	for i, r := range tl.reloads {
		w := tl.window(i, high)
		switch {
		case t < w.from:
			return l
		case t <= w.to:
			return combine(l, r.To, high)
		}
		l = r.To
	}
	return l
}

// limitDuring returns the lowest (high false) or highest (high true)
// numbers the model applies at some time of [a, b].
func (tl *timeline) limitDuring(a, b int64, high bool) Limit {
	l := tl.limitAt(a, high)
	for i := range tl.reloads {
		if w := tl.window(i, high); w.overlaps(span{a, b}) {
			l = combine(l, tl.limitAt(w.to+1, high), high)
			l = combine(l, tl.limitAt(max(w.from, a), high), high)
		}
	}
	return l
}

// reloadTimes returns the times in [a, b] at which the numbers the model
// applies may change.
func (tl *timeline) reloadTimes(a, b int64) []int64 {
	var ts []int64
	for i := range tl.reloads {
		for _, w := range []span{tl.window(i, false), tl.window(i, true)} {
			for _, t := range []int64{w.from, w.to + 1} {
				if t >= a && t <= b {
					ts = append(ts, t)
				}
			}
		}
	}
	return ts
}

// combine returns a limit of a's algorithm and window with the lower (high
// false) or higher (high true) of a's and b's numbers.
func combine(a, b Limit, high bool) Limit {
	pick := func(x, y uint64) uint64 { return min(x, y) }
	if high {
		pick = func(x, y uint64) uint64 { return max(x, y) }
	}
	l := a
	l.Requests = pick(a.Requests, b.Requests)
	if a.Algorithm.Spec().Burst {
		l.Burst = pick(a.Capacity(), b.Capacity())
		if l.Requests == 0 {
			l.Burst = 0
		}
	}
	l.Debt = a.Debt || b.Debt
	return l
}

// lossIndex returns how many losses end (with hold after them) at or
// before t: the segment of the history a decision at t belongs to.
func (tl *timeline) lossIndex(t, hold int64) int {
	k := 0
	for _, z := range tl.losses {
		if z.to+hold <= t {
			k++
		}
	}
	return k
}

// nearLoss reports whether s overlaps a loss or the hold after it.
func (tl *timeline) nearLoss(s span, hold int64) bool {
	for _, z := range tl.losses {
		if s.overlaps(span{z.from, z.to + hold}) {
			return true
		}
	}
	return false
}
