package exactness

import "time"

// Tolerance is how far a history may stray from the model before a check
// reports it: the timing noise and the allowances a deployment states. The
// zero value is the strictest: one replica, decisions within each call's
// [Sent, Received], every admitted hit counted when it was served.
type Tolerance struct {
	// Slack is δ: the server may have decided a call up to δ before its
	// Sent or after its Received (clocks that disagree, a coarse clock).
	Slack time.Duration
	// Lag is how much later than the call that admitted it an admitted
	// hit may count against the limit, and so how stale a remaining may
	// be: a sliding_window_log's lease logs its hits at its end, up to the
	// lease time after they were served, and answers the remaining of when
	// it was taken.
	Lag time.Duration
	// Hold is how long after a Loss a call may still be answered from what
	// was decided before it (a lease's time): such calls count on neither
	// side of the loss.
	Hold time.Duration
	// Forget is how long after a Loss a replica may still deny from what
	// it remembered before it (the deny cache remembers a denial up to a
	// second): denials and remainings that may have been decided within it
	// are not judged. Hold applies too, when it is longer.
	Forget time.Duration
	// Below is how many hits the server may hold back from a caller while
	// the model has room for them: hits other replicas' leases hold. A
	// denial is false only when the model had room for n + Below, and a
	// remaining may be that much below the model's.
	Below uint64
	// Above is how many hits a remaining may be above the model's: what
	// other replicas took since the remaining was last read from the
	// backend.
	Above uint64
	// AddFirst says that the backend decides a take by adding its hits
	// first and giving them back when it is denied, and a refund by taking
	// its hits and giving back what went below zero (a fixed window on
	// Redis, counted with INCRBY): a denied take counts while it is being
	// decided, and a take decided while a refund went below zero is
	// denied. Denials that may have met a refund, and their remainings,
	// are then not judged.
	AddFirst bool
	// Repeat, with AddFirst, is how long a replica may repeat a denial
	// that met a count another op was about to give back (the deny cache
	// keeps such a denial 50 ms): a denial of as many hits on the same
	// replica within Repeat after one that may have met such a count is
	// not judged, nor its remaining.
	Repeat time.Duration
}

// micros returns the tolerance's durations in microseconds.
func (t Tolerance) micros() (slack, lag, hold int64) {
	return t.Slack.Microseconds(), t.Lag.Microseconds(), t.Hold.Microseconds()
}

// unjudged returns how long after a loss the model does not judge
// denials and remainings: the longer of Hold and Forget, in microseconds.
func (t Tolerance) unjudged() int64 { return max(t.Hold, t.Forget).Microseconds() }
