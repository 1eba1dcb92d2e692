package exactness

import (
	"fmt"
	"time"
)

// Kind is what a call asked of its limit.
type Kind uint8

// The kinds of call.
const (
	// Take asks for Hits hits, consumed when admitted.
	Take Kind = iota + 1
	// Check asks for 0 hits (hits_addend 0): admitted while the limit has
	// not gone past its end, consuming nothing.
	Check
	// Charge records Hits hits of usage already spent (a rule with
	// charge: window or charge: debt): recorded even past the limit; its
	// answer is OK when a take of Hits would have been admitted just before
	// it.
	Charge
	// Refund gives Hits hits back (is_negative_hits on a descriptor that
	// allows it).
	Refund
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Take:
		return "take"
	case Check:
		return "check"
	case Charge:
		return "charge"
	case Refund:
		return "refund"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Call is one recorded call and its answer. Sent is read from the caller's
// clock just before the request was sent and Received just after the answer
// came, so the server decided the call somewhere in between. The zero value
// is no call.
type Call struct {
	// Replica is the index of the server process that answered.
	Replica int
	// Caller names the sequence of calls this one belongs to: one caller
	// makes one call at a time, so its calls are ordered.
	Caller int
	// Limit names the limit the call counts against: a key of
	// History.Limits.
	Limit string
	Kind  Kind
	// Hits is n: 0 for a Check.
	Hits uint64
	// Sent and Received bracket the call.
	Sent, Received time.Time
	// Allowed reports that the answer was OK (for a Charge: that it kept the
	// limit within its end).
	Allowed bool
	// Remaining is the answer's limit_remaining.
	Remaining uint64
	// Reset is the answer's duration_until_reset.
	Reset time.Duration
	// Err is the call's error, if it failed; the answer is then unknown.
	Err error
}

// String returns the call in one line: its caller, kind and answer, with
// its times as a clock (UTC, microseconds).
func (c Call) String() string {
	answer := "OK"
	switch {
	case c.Err != nil:
		answer = "error: " + c.Err.Error()
	case !c.Allowed:
		answer = "OVER_LIMIT"
	}
	return fmt.Sprintf("r%d/c%d %s %s %d [%s, %s] → %s remaining %d reset %s",
		c.Replica, c.Caller, c.Limit, c.Kind, c.Hits, clock(c.Sent), clock(c.Received), answer, c.Remaining, c.Reset)
}

// clock formats t as a time of day in UTC, to the microsecond.
func clock(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

// consumes reports whether the call may have taken room from its limit:
// an admitted take of hits, any charge of hits (recorded even when over the
// limit), or a take or charge whose answer is unknown.
func (c *Call) consumes() bool {
	if c.Hits == 0 {
		return false
	}
	switch c.Kind {
	case Take:
		return c.Allowed || c.Err != nil
	case Charge:
		return true
	}
	return false
}

// surelyConsumes reports whether the call certainly took room from its
// limit: an admitted take, or a charge that was answered.
func (c *Call) surelyConsumes() bool {
	return c.consumes() && c.Err == nil
}

// admitted reports whether the server admitted hits to the caller: an
// admitted take, or a charge answered OK.
func (c *Call) admitted() bool {
	return c.Err == nil && c.Allowed && c.Hits > 0 && (c.Kind == Take || c.Kind == Charge)
}

// refunds reports whether the call may have given hits back.
func (c *Call) refunds() bool { return c.Kind == Refund && c.Hits > 0 }

// surelyRefunds reports whether the call certainly gave hits back.
func (c *Call) surelyRefunds() bool { return c.refunds() && c.Err == nil }

// denial reports whether the call is a denial the model can judge: an
// answered take, check or charge over the limit.
func (c *Call) denial() bool {
	return c.Err == nil && !c.Allowed && c.Kind != Refund
}
