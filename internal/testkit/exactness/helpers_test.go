package exactness

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// t0 starts a whole second, so that windows of seconds start there.
var t0 = time.Unix(1_700_000_000, 0)

// at returns t0 + ms milliseconds.
func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// lim returns a limit named "l" of alg: requests per window, burst for a
// token bucket (0 for its requests).
func lim(alg algorithms.Algorithm, requests uint64, window time.Duration, burst uint64) map[string]Limit {
	return map[string]Limit{"l": {Limit: algorithms.Limit{Algorithm: alg, Requests: requests, Window: window, Burst: burst}}}
}

// admit returns an admitted call of kind on "l" of n hits, sent at from
// and answered at to (milliseconds after t0), by caller 0 of replica 0.
func admit(kind Kind, n uint64, from, to float64) Call {
	return Call{Limit: "l", Kind: kind, Hits: n, Sent: at(from), Received: at(to), Allowed: true}
}

// deny returns the call of admit, answered over the limit.
func deny(kind Kind, n uint64, from, to float64) Call {
	c := admit(kind, n, from, to)
	c.Allowed = false
	return c
}

// left returns c answering remaining r.
func left(c Call, r uint64) Call {
	c.Remaining = r
	return c
}

// by returns c made by caller k of replica r.
func by(c Call, r, k int) Call {
	c.Replica, c.Caller = r, k
	return c
}

// takes returns k admitted takes of 1 hit by caller 0, the first sent at
// from, one every step milliseconds, each answered half a millisecond
// after it was sent.
func takes(k int, from, step float64) []Call {
	var cs []Call
	for i := range k {
		s := from + float64(i)*step
		cs = append(cs, admit(Take, 1, s, s+0.5))
	}
	return cs
}

// hist returns the history of calls against limits.
func hist(limits map[string]Limit, calls ...Call) History {
	r := NewRecorder(limits)
	for _, c := range calls {
		r.Add(c)
	}
	return r.History()
}

// with returns h with its events replaced: the losses and reloads given.
func with(h History, losses []Loss, reloads ...Reload) History {
	h.Losses, h.Reloads = losses, reloads
	return h
}

// concat joins lists of calls.
func concat(lists ...[]Call) []Call {
	var out []Call
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
