package lease

import (
	"sync"
	"time"
)

// backendClock follows the backend's clock (which decides, and which the
// times of a settlement must be in) from this replica's. A call sent at
// sent and answered at received was decided at some instant between them,
// which the backend's clock read as decided: so the offset θ between the
// clocks lies in [decided − received, decided − sent]. The tightest bounds
// over the calls of the last clockWindow (up to the last) bound the backend's time of any
// instant of this replica's: a lease records the times it serves at the
// upper bound (never earlier than the backend's clock read then), and
// counts a hit as recent from the lower one. Its answers are given at the
// best estimate, the middle of the bounds: off by at most half their gap,
// which is the quickest leg to the backend of the calls of the last second
// plus the quickest leg back, and so never more than the quickest round
// trip. The legs are taken from any calls, each the quickest of its own
// way: on a host starved of CPU the answers are read late (a slow leg back)
// while requests still leave at once, and no single call may be quick both
// ways. It is safe for concurrent use; the zero value knows no offset.
type backendClock struct {
	mu sync.Mutex
	hi bounds // of decided − sent, the least
	lo bounds // of decided − received, the greatest
}

// bounds keeps the tightest bound on the offset (µs) seen in each slice of
// the clock's window, and the tightest of those of the window up to the
// last call noted: a bound of the window is of its calls, not of a looser
// call that came after a tighter one ended its time.
type bounds struct {
	slices [clockSlices]bound
	best   int64 // the tightest of the window when the last call was noted
}

// bound is a bound on the offset (µs) seen in the slice numbered slice.
type bound struct {
	known bool
	slice int64
	off   int64
}

// clockWindow is how long a bound on the offset is kept, in clockSlices
// slices: the clocks drift apart by at most microseconds in it.
const (
	clockWindow = time.Second
	clockSlices = 10
)

// note keeps off, of a call answered at at, among bs, the least when upper
// is set and the greatest otherwise.
func (bs *bounds) note(off int64, at time.Time, upper bool) {
	tighter := func(a, b int64) bool { return upper && a < b || !upper && a > b }
	slice := at.UnixNano() / int64(clockWindow/clockSlices)
	b := &bs.slices[slice%clockSlices]
	if !b.known || b.slice != slice || tighter(off, b.off) {
		*b = bound{known: true, slice: slice, off: off}
	}
	bs.best = off
	for _, b := range bs.slices {
		if b.known && b.slice > slice-clockSlices && tighter(b.off, bs.best) {
			bs.best = b.off
		}
	}
}

// note takes a call sent at sent, answered at received, that the backend
// decided at decided (µs since the Unix epoch, by its clock).
func (c *backendClock) note(sent, received time.Time, decided int64) {
	c.mu.Lock()
	c.hi.note(decided-sent.UnixMicro(), received, true)
	c.lo.note(decided-received.UnixMicro(), received, false)
	c.mu.Unlock()
}

// read returns the bounds of the backend's time (µs) of t, this replica's
// time: hi no earlier than the backend's clock read at t, lo no later.
func (c *backendClock) read(t time.Time) (hi, lo int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	us := t.UnixMicro()
	return us + c.hi.best, min(us+c.lo.best, us+c.hi.best)
}

// estimate returns the best estimate of the backend's time (µs) of t: the
// middle of read's bounds.
func (c *backendClock) estimate(t time.Time) int64 {
	hi, lo := c.read(t)
	return lo + (hi-lo)/2
}
