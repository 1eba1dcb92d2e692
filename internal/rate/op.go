package rate

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// ErrUnavailable is wrapped by a limiter's error when its backend cannot
// decide for now (a cluster without a master for a slot, a server still
// loading its data, a replica that cannot write), as opposed to a broken
// request.
var ErrUnavailable = errors.New("backend unavailable")

// Entry is one (key, value) pair of a rate limit descriptor.
type Entry struct {
	Key   string
	Value string
}

// Key names whose state a limit counts: a domain and the descriptor entries
// that matched the limit's rule. Two requests with equal Keys and limits of
// the same algorithm and window share one state.
type Key struct {
	Domain  string
	Entries []Entry
}

// Kind is what an Op does to its limit's state. The zero value is Take.
// A check is a Take of 0 hits, and a lease's take a Take with a Hold;
// Op.Debt qualifies the state a limit keeps, whatever the kind.
type Kind uint8

// The kinds of Op.
const (
	// Take asks for Op.Hits and consumes them when they are admitted
	// (State.Take). Taking 0 hits checks the limit without consuming; a
	// Hold makes the take a lease's (State.Lease).
	Take Kind = iota
	// Charge records Op.Hits as usage already spent: they are recorded
	// even past the limit, and the Result says whether they kept the limit
	// within it. What they record beyond the limit counts until the window
	// it was recorded in has passed (State.Record), as envoyproxy/ratelimit
	// counts hits, or with Op.Debt as a debt that later windows pay off
	// (State.Charge). A split limit charges one shard.
	Charge
	// Refund gives Op.Hits back (State.Refund): with Op.Receipt, exactly
	// what the take it names consumed.
	Refund
	// Settle settles Op.Leases, the leases of the limit that one holder
	// holds (State.Settle): what each served since the holder's last
	// settlement, and which end. It has at least one lease.
	Settle
)

// kindNames are the kinds' names, by Kind.
var kindNames = [...]string{Take: "take", Charge: "charge", Refund: "refund", Settle: "settle"}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return int(k) < len(kindNames) }

// String returns the kind's name: "take", "charge", "refund" or "settle".
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one operation on one limit's state: take Hits, charge them, give
// them back, or settle leases, as its Kind says.
type Op struct {
	Key   Key
	Limit algorithms.Limit
	// Kind is what the op does; the zero value takes.
	Kind Kind
	// Hits is n. Taking 0 hits checks the limit without consuming.
	Hits uint64
	// Shards, when above 1, asks a backend that spreads state over several
	// nodes to split the limit over that many independent states whose limits
	// sum to Limit exactly. The in-memory backend keeps one exact state and
	// ignores it.
	Shards uint32
	// Debt reports that the limit's state may owe a debt: its rule charges
	// with debt. A Charge with Debt carries what it records beyond the
	// limit into later windows (State.Charge), one without it records
	// (State.Record). A backend may keep such states apart, so every op of
	// such a rule says so, whatever its Kind.
	Debt bool
	// Receipt, for a Refund, is the receipt of the Take being undone, so
	// that exactly what it consumed is given back. The zero Receipt gives
	// back the newest Hits hits of the current window.
	Receipt algorithms.Receipt
	// ID is Identity(Key, Limit) when the caller has computed it already,
	// or empty. Limiters that need the identity take it from Op.Identity,
	// so that it is built once per operation.
	ID string
	// Hold, for a Take, is a lease: the hits are served until now + Hold
	// by the one who holds the lease, who settles it before then (Settle).
	// 0 for an ordinary op. A sliding_window_log logs a lease's hits at
	// now + Hold until they are settled (State.Lease); a token_bucket holds
	// them until then; the windows count a lease as a take. It counts in
	// whole microseconds up to algorithms.MaxHold (Op.HoldMicros); the other kinds
	// ignore it.
	Hold time.Duration
	// Leases, for a Settle, are the leases it settles (State.Settle). Hits
	// is then ignored.
	Leases []algorithms.Lease
	// Tag names the op for observations, opaque to Limiters: the service
	// sets the metric key of the rule the op counts for, under which the
	// layers that keep state of their own (leases) report it.
	Tag string
}

// Loosens reports whether op can only give room back: a Refund or a
// Settle, which is always allowed, and after which a denial seen before it
// may no longer hold.
func (op *Op) Loosens() bool { return op.Kind == Refund || op.Kind == Settle }

// Leasing reports whether op is a lease's take: a Take whose hold is at
// least a whole microsecond (HoldMicros).
func (op *Op) Leasing() bool { return op.Kind == Take && op.HoldMicros() > 0 }

// Validate returns nil when a backend can apply op: its limit satisfies
// Limit.Validate, whose error it returns, its Kind is valid, and a Settle
// has leases.
func (op *Op) Validate() error {
	if err := op.Limit.Validate(); err != nil {
		return err
	}
	switch {
	case !op.Kind.Valid():
		return fmt.Errorf("rate: unknown op kind %s", op.Kind)
	case op.Kind == Settle && len(op.Leases) == 0:
		return errors.New("rate: a settlement of no leases")
	}
	return nil
}

// HoldMicros returns the hold the states and the scripts apply, in whole
// microseconds, cut to [0, MaxHold]: a lease's or its settlement's, 0 for
// an ordinary op.
func (op *Op) HoldMicros() int64 { return algorithms.HoldMicros(op.Hold) }

// Identity returns op.ID, or Identity(op.Key, op.Limit) when it is empty.
func (op *Op) Identity() string {
	if op.ID != "" {
		return op.ID
	}
	return Identity(op.Key, op.Limit)
}

// IdempotentRefund reports whether applying op, which Loosens, twice gives
// back no more than applying it once: a refund by the receipt of a take, or
// a settlement of leases, whose algorithm gives back exactly the receipt's
// entries (Spec.ExactRefund), and nothing once they are gone.
func (op *Op) IdempotentRefund() bool {
	return op.Limit.Algorithm.Spec().ExactRefund && (op.Receipt.Seq != 0 || op.Kind == Settle)
}
