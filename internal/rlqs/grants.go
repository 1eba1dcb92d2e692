package rlqs

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// holding is what one stream (one Envoy) holds of one bucket: the limit
// its rule counts it against now, and its grants, oldest first. The last
// grant is the one the Envoy was last sent; the others were superseded,
// and are ended once no report can still carry hits they admitted.
type holding struct {
	op     rate.Op // the bucket's limit now: key, limit, tag, identity
	cfg    *config.Config
	grants []*grant
	// unlimited is a bucket whose rule counts nothing: it is allowed all;
	// granted one whose rule the service grants (op's limit); recorded one
	// allowed all whose usage is charged to op's limit (shadow mode).
	unlimited, granted, recorded bool
}

// grant is k hits reserved on a limit, as a lease's take reserves them,
// and handed to an Envoy as a token bucket of k tokens that does not
// refill: every request the Envoy admits under it is one of them.
type grant struct {
	op      rate.Op // the limit it was taken on
	receipt algorithms.Receipt
	size    uint64
	hold    time.Duration
	// ends is when the Envoy can use it no more: the end of its time to
	// live, counted from when the action may reach it. superseded is when a later grant was sent, and reports how
	// many reports came since.
	ends       time.Time
	superseded time.Time
	reports    int
	// reported is what earlier settlements said it served; pending what
	// reports attributed to it since.
	reported, pending uint64
}

// inFlight bounds how long a report or an action takes on its way: a
// report handled this long after a grant ended or was superseded was made
// after its Envoy could use the grant no more. A windowed limit's grant
// ends inFlight before its window (size), so an Envoy whose path is slower
// than that would serve it past its window by the difference.
const inFlight = time.Second

// done reports whether no report handled from now on can carry hits of g:
// a report came at least inFlight after g ended, or after a later grant
// was sent (the Envoy applies an action as it arrives).
func (g *grant) done(now time.Time) bool {
	if !g.superseded.IsZero() && g.reports > 0 && now.Sub(g.superseded) >= inFlight {
		return true
	}
	return now.Sub(g.ends) >= inFlight
}

// left returns the hits of g that no report has attributed to it yet.
func (g *grant) left() uint64 { return g.size - min(g.reported+g.pending, g.size) }

// current returns the grant the Envoy was last sent, or nil.
func (h *holding) current() *grant {
	if len(h.grants) == 0 {
		return nil
	}
	return h.grants[len(h.grants)-1]
}

// attribute gives n requests an Envoy reported as allowed to its grants,
// the newest first, each up to its size, and returns what no grant holds:
// requests the Envoy allowed without a grant (its own fallback, or before
// the first grant). Newest first never counts a hit in an earlier window
// than the one it was admitted in: a grant taken in a later window than
// another is newer, and the Envoy uses the newest grant it has applied.
//
// Which grant served a request is not in the report: the Envoy serves a
// superseded grant until the action that replaced it arrives. So each
// superseded grant also counts as served as many of the n as it has left,
// beside the grants they were given to: it is never given back a request
// it may have served. What that counts twice is held from the others until
// the grants end, at most the leftover of the grant replaced.
func (h *holding) attribute(n uint64) uint64 {
	given := make([]uint64, len(h.grants))
	rest := n
	for i := len(h.grants) - 1; i >= 0 && rest > 0; i-- {
		given[i] = min(rest, h.grants[i].left())
		h.grants[i].pending += given[i]
		rest -= given[i]
	}
	for i, g := range h.grants {
		if !g.superseded.IsZero() {
			g.pending += min(n-given[i], g.left())
		}
	}
	return rest
}

// settlement returns the settlements of h's grants at now, one per limit
// they were taken on (a reload may have changed it), with each grant's hits
// attributed since the last one served at now on the backend's clock (at
// most ahead of the server's), ending those that no report can carry hits
// of any more (grant.done); or every grant when all is set, as fully
// served, what no report attributed to it served when it ends (a stream
// that ended: its Envoy serves the grant until then, unreported), and a
// bucket's left held until its hold ends. The grants that end leave h.
func (h *holding) settlement(now time.Time, ahead time.Duration, all bool) []rate.Op {
	var ops []rate.Op
	kept := h.grants[:0]
	at := now.Add(ahead).UnixMicro()
	for _, g := range h.grants {
		var late uint64 // hits the Envoy may serve until g ends
		end, closes := all || g.done(now), true
		switch {
		case !all:
		case g.op.Limit.Algorithm == algorithms.TokenBucket:
			// A bucket stops holding a grant's tokens when it is told
			// they were served, whenever that was: what the Envoy may
			// still serve stays held until the grant's hold ends.
			closes = false
		default:
			late = g.left()
		}
		// A window counted a grant's hits when it was taken: a settlement
		// changes it only by giving back what the grant did not serve, so
		// one that gives nothing back is not sent.
		send := g.pending > 0 || end
		if g.op.Limit.Algorithm.Spec().Windowed {
			send = end && g.left() > late
		}
		if send {
			ls := algorithms.Lease{Receipt: g.receipt, Hold: g.hold, Size: g.size, Reported: g.reported, Close: end && closes}
			if g.pending > 0 {
				ls.Served = append(ls.Served, algorithms.Served{At: at, Seq: g.receipt.Seq + g.reported, N: g.pending})
			}
			if late > 0 {
				ls.Served = append(ls.Served, algorithms.Served{At: max(at, g.ends.Add(ahead).UnixMicro()),
					Seq: g.receipt.Seq + g.reported + g.pending, N: late})
			}
			g.reported += g.pending + late
			g.pending = 0
			if n := len(ops); n > 0 && ops[n-1].ID == g.op.ID && ops[n-1].Limit == g.op.Limit {
				ops[n-1].Leases = append(ops[n-1].Leases, ls)
			} else {
				op := g.op
				op.Kind, op.Leases = rate.Settle, []algorithms.Lease{ls}
				ops = append(ops, op)
			}
		}
		if !end {
			kept = append(kept, g)
		}
	}
	clear(h.grants[len(kept):])
	h.grants = kept
	return ops
}

// reported counts a report of h's bucket on its superseded grants.
func (h *holding) reported() {
	for _, g := range h.grants {
		if !g.superseded.IsZero() {
			g.reports++
		}
	}
}
