package algorithms

import "time"

// Receipt records what an admitted take consumed.
type Receipt struct {
	// At is the time of the decision, in microseconds since the Unix epoch.
	At int64
	// Seq is, for a sliding window log, the sequence number of the first entry
	// the Take added; 0 otherwise.
	Seq uint64
	// Shard is the shard that admitted the Take when its op was split.
	Shard uint32
	// Epoch names the incarnation of the state that admitted a lease's take,
	// 0 for other takes: a settlement or refund by a receipt with an Epoch
	// applies only to the state of that Epoch, so that one made after the
	// state was lost (flushed, evicted, failed over, or dropped once
	// replenished) changes nothing. A backend chooses its Epochs; they are
	// opaque to everyone else.
	Epoch int64
}

// Decided returns when the backend decided the take r is the receipt of,
// a take of limit l with hold hold (a lease's, or 0), in microseconds
// since the Unix epoch by the backend's clock: r.At, which for a
// sliding_window_log's lease names where its entries are logged, its end.
func (r Receipt) Decided(l Limit, hold time.Duration) int64 {
	if hold > 0 && l.Algorithm.Spec().ExactRefund {
		return r.At - HoldMicros(hold)
	}
	return r.At
}

// Lease is one lease in a settlement (rate.Op.Leases): the lease of Size hits
// taken with Receipt and Hold, of which Reported were served and reported
// by the holder's earlier settlements. Served lists the hits served since,
// oldest first; Close ends the lease, giving back what it did not serve.
type Lease struct {
	Receipt  Receipt
	Hold     time.Duration
	Size     uint64
	Reported uint64
	Served   []Served
	Close    bool
}

// served returns the hits ls.Served lists, at most what ls has not
// reported yet.
func (ls *Lease) served() uint64 {
	var n uint64
	for _, s := range ls.Served {
		n += s.N
	}
	return min(n, ls.Size-min(ls.Reported, ls.Size))
}

// unused returns what ls gives back when it closes: what it never served.
func (ls *Lease) unused() uint64 {
	return ls.Size - min(ls.Reported, ls.Size) - ls.served()
}

// Served is hits of a lease served at one time, At (µs since the Unix
// epoch, no earlier than the backend's clock read when they were served):
// for a sliding_window_log, the N consecutive sequence numbers from Seq.
type Served struct {
	At  int64
	Seq uint64
	N   uint64
}

// Result is the outcome of one operation on a state (rate.Op).
type Result struct {
	// Allowed reports whether the hits were admitted. A refund is always
	// allowed.
	Allowed bool
	// Remaining is how many more hits the limit would admit now.
	Remaining uint64
	// ResetAfter is, when denied, the exact wait after which the same request
	// would be admitted; when allowed, the wait until the limit is fully
	// replenished. Its resolution is one microsecond.
	ResetAfter time.Duration
	// Receipt identifies what an admitted Take consumed, for a later refund.
	Receipt Receipt
	// Transient reports, on a denial, that the state it was decided on may
	// have held hits another op was about to give back, so that the same
	// take may be admitted at once: ResetAfter is then the longest wait, not
	// the exact one. Only a backend that admits by adding first and gives
	// back after (the fixed window on Redis, counted without a script) sets
	// it, and whoever remembers denials must not remember such a one.
	Transient bool
	// State is, for an admitted lease's take (rate.Op.Hold) of a backend that
	// tells it, the limit's state just after the take, as the backend
	// holds it, from which the lease's holder answers the takes it serves
	// as the backend would (see State); nil otherwise. It is the caller's.
	State State
	// StateUntil is, with State, when State stops answering as the
	// backend's state does, the holder's own takes aside (µs since the
	// Unix epoch): a backend that told only part of the state says when
	// that part runs out. 0 when it answers for as long as the lease lasts.
	StateUntil int64
}

// HoldMicros returns d, a lease's hold, in whole microseconds, cut to
// [0, MaxHold], as the states and the scripts apply it.
func HoldMicros(d time.Duration) int64 { return min(max(d, 0), MaxHold).Microseconds() }
