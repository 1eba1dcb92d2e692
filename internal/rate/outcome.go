package rate

import (
	"github.com/ratewarden/ratewarden/internal/algorithms"

	"errors"
	"sync"
	"time"
)

// Fate is what became of an Op whose call to a backend failed: whether it
// changed the backend's state.
type Fate uint8

// The fates of an Op.
const (
	// NotApplied is an Op that certainly changed nothing: it was never sent,
	// or the backend refused it before running it.
	NotApplied Fate = iota
	// Applied is an Op the backend ran; its Result is known.
	Applied
	// Unknown is an Op that was sent and whose answer never came: it may or
	// may not have run.
	Unknown
)

// String returns the fate's name: "not_applied", "applied" or "unknown".
func (f Fate) String() string {
	switch f {
	case NotApplied:
		return "not_applied"
	case Applied:
		return "applied"
	case Unknown:
		return "unknown"
	}
	return "Fate(?)"
}

// Outcome is what became of one Op of a call that returned an error to its
// caller: a backend that keeps waiting for the answers of calls whose
// callers gave up reports, for each of their ops, whether it ran, with its
// Result when it did, so that the hits of an admitted take whose caller was
// told the backend failed can be given back.
type Outcome struct {
	Op   Op
	Fate Fate
	// Result is the Op's result when it was Applied.
	Result algorithms.Result
	// At is when the fate became known: for an Applied Op, when the
	// backend's answer was read.
	At time.Time
}

// Outcomes gathers what became of the ops of one failed call, as its backend
// learns it: at once for the ops that certainly did not run and those whose
// answers are in, and later for those of a call its caller gave up on while
// the backend was still running it. The error of such a call carries its
// Outcomes (see Unsettled), so that the layers the error passes on its way
// back follow them: the give-back queue gives back what was taken for a
// caller that was told the backend failed, and the circuit breaker counts
// late answers as answers. The zero value is ready to use. It is safe for
// concurrent use.
type Outcomes struct {
	mu      sync.Mutex
	known   []Outcome
	follows []func([]Outcome)
}

// Report adds out to what is known of the call and passes it to every
// follower, in the order they followed.
func (o *Outcomes) Report(out []Outcome) {
	if len(out) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.known = append(o.known, out...)
	for _, f := range o.follows {
		f(out)
	}
}

// Follow calls f with what is known of the call so far, at once, and with
// every later report, each outcome once. f is called with o's lock held,
// from the goroutine that reports: it must be quick and must not call o. A
// nil *Outcomes has nothing to follow.
func (o *Outcomes) Follow(f func([]Outcome)) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.known) > 0 {
		f(o.known[:len(o.known):len(o.known)])
	}
	o.follows = append(o.follows, f)
}

// Unsettled returns err, the error of a failed call, carrying o, what became
// of the call's ops (see OutcomesOf). Its text is err's, and errors.Is and
// errors.As see through it to err.
func Unsettled(err error, o *Outcomes) error { return &unsettled{err: err, outcomes: o} }

// unsettled is an error made by Unsettled.
type unsettled struct {
	err      error
	outcomes *Outcomes
}

func (e *unsettled) Error() string { return e.err.Error() }
func (e *unsettled) Unwrap() error { return e.err }

// OutcomesOf returns the Outcomes that err carries (see Unsettled), or nil
// when it carries none: the backend reports nothing of the call.
func OutcomesOf(err error) *Outcomes {
	var u *unsettled
	if errors.As(err, &u) {
		return u.outcomes
	}
	return nil
}
