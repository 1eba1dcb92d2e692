package rate

import (
	"github.com/ratewarden/ratewarden/internal/algorithms"

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
// callers gave up reports (to Outcomes), for each of their ops, whether it
// ran, with its Result when it did, so that the hits of an admitted take
// whose caller was told the backend failed can be given back.
type Outcome struct {
	Op   Op
	Fate Fate
	// Result is the Op's result when it was Applied.
	Result algorithms.Result
	// At is when the fate became known: for an Applied Op, when the
	// backend's answer was read.
	At time.Time
}

// Outcomes passes what became of the ops of failed calls, as the backend
// learns it, to the layers of the request path that follow it: at once for
// the ops that certainly did not run and those whose answers are in, and
// later for those of a call its caller gave up on while the backend was
// still running it. The builder of the path makes one, gives it to the
// backend, which reports to it, and has the layers follow it: the give-back
// queue gives back what was taken for a caller that was told the backend
// failed, the circuit breaker counts late answers as answers, and the lease
// layer ends the leases it was granted for no one. A call's error says only
// that it failed. The zero value is ready to use, and a nil *Outcomes takes
// reports and passes them to no one. It is safe for concurrent use.
type Outcomes struct {
	mu      sync.RWMutex
	follows []func([]Outcome)
}

// Follow makes f follow o: every report from then on is passed to f, in the
// order followers followed. f is called from the goroutine that reports,
// possibly several at once: it must be quick, safe for concurrent use, and
// must not call o.
func (o *Outcomes) Follow(f func([]Outcome)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.follows = append(o.follows, f)
}

// Report passes out, what became of some ops of failed calls, to every
// follower.
func (o *Outcomes) Report(out []Outcome) {
	if o == nil || len(out) == 0 {
		return
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, f := range o.follows {
		f(out)
	}
}
