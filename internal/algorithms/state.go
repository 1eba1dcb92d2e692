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
// (rate.Op.Hold, cut to [0, MaxHold] in whole microseconds), whose holder
// settles it before then: it is decided as a take, a sliding_window_log
// logs its hits at now + hold and a token_bucket holds them until then; a
// window counts them as a take does. Its receipt names the state's Epoch. A
// hold of 0 makes Lease a Take.
//
// Settle settles the leases one holder holds: for each, the hits it served
// since the holder's last settlement (Lease.Served), and, for those that
// Close, the hits they did not serve, which go back. A sliding_window_log
// logs the served hits at their times instead of the leases' ends; a
// token_bucket holds them no longer, and gets back, besides the unused
// tokens, the refill that its cap kept out since they were served (so that
// the bucket is what it would be had they been taken when served); a window
// gives the unused hits back as a refund does. A lease that names another
// Epoch than the state's, or, for a token_bucket, that has ended, changes
// nothing: what it would give back was given up when its hold ended or the
// state was lost.
//
// Clone returns a copy of the state that shares nothing with it.
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
	Settle(l Limit, now time.Time, leases []Lease)
	Expiry(l Limit) time.Time
	Clone() State
}

// NewState returns a new, empty state for algorithm a, or nil when a is not
// a valid Algorithm.
func NewState(a Algorithm) State {
	if !a.Valid() {
		return nil
	}
	return specs[a].newState()
}
