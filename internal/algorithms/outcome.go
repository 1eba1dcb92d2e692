package algorithms

import "time"

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
	Result Result
	// At is when the fate became known: for an Applied Op, when the
	// backend's answer was read.
	At time.Time
}
