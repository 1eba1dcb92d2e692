package algorithms

import "time"

// State is the state one limit keeps under one algorithm: FixedWindowState,
// SlidingWindowLogState, SlidingWindowCounterState or TokenBucketState.
//
// Take asks for n hits at time now and consumes them when admitted; n = 0
// checks without consuming. Charge records n hits of usage already spent,
// even past the limit: what it records beyond L (up to Limit.MaxDebt) is a
// debt that later windows, or the bucket's refill, pay off. A charge is
// never refused: its Result is Allowed when a Take of n would have been
// admitted just before it, and otherwise reports the Remaining and
// ResetAfter that a Take of 0 would report just after it; it has no
// Receipt. Record records n hits of usage already spent as Charge does, but
// what it records beyond L is no debt: it counts as long as any hit does,
// until the window it was recorded in has passed (see the package
// documentation, "Records"). Refund gives n hits back at time now: with the
// Receipt of an admitted Take, what that Take consumed; with the zero Receipt
// (At and Seq both 0), the newest n hits. A refund is always allowed and
// reports the remaining hits and the reset of an admitted request. Expiry
// returns the time from which the state behaves as a new one under l, so a
// store may drop it; a past time, possibly the zero Time, when it already
// does.
//
// Lease is Take for a lease that serves the hits it takes until now + hold
// (Op.Hold, cut to [0, MaxHold] in whole microseconds): it is decided as a
// take, and a sliding_window_log logs its hits at now + hold, a
// token_bucket holds them until then; a window counts them as a take does.
// Release gives back n unused hits of the lease taken with receipt r and
// hold, as Refund does, and a token_bucket holds them no longer if the lease
// has not ended yet. A hold of 0 makes Lease a Take.
//
// Times count in whole microseconds (now.UnixMicro()); l must satisfy
// Limit.Validate. The rules are those of the package documentation. A State
// is not safe for concurrent use.
type State interface {
	Take(l Limit, now time.Time, n uint64) Result
	Charge(l Limit, now time.Time, n uint64) Result
	Record(l Limit, now time.Time, n uint64) Result
	Refund(l Limit, now time.Time, n uint64, r Receipt) Result
	Lease(l Limit, now time.Time, n uint64, hold time.Duration) Result
	Release(l Limit, now time.Time, n uint64, r Receipt, hold time.Duration) Result
	Expiry(l Limit) time.Time
}

// NewState returns a new, empty state for algorithm a, or nil when a is not
// a valid Algorithm.
func NewState(a Algorithm) State {
	if !a.Valid() {
		return nil
	}
	return specs[a].newState()
}

// Apply applies op to st at now, as its flags ask: a refund (a lease's
// give-back with Op.Hold), a charge that owes (Op.Charge with Op.Debt), a
// record (Op.Charge alone), or a take (a lease's with Op.Hold).
func Apply(st State, op *Op, now time.Time) Result {
	hold := time.Duration(op.HoldMicros()) * time.Microsecond
	held := hold > 0
	switch {
	case op.Refund && held:
		return st.Release(op.Limit, now, op.Hits, op.Receipt, hold)
	case op.Refund:
		return st.Refund(op.Limit, now, op.Hits, op.Receipt)
	case op.Charge && op.Debt:
		return st.Charge(op.Limit, now, op.Hits)
	case op.Charge:
		return st.Record(op.Limit, now, op.Hits)
	case held:
		return st.Lease(op.Limit, now, op.Hits, hold)
	}
	return st.Take(op.Limit, now, op.Hits)
}
