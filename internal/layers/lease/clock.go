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
// over the calls of the last clockWindow bound the backend's time of any
// instant of this replica's: a lease records the times it serves at the
// upper bound (never earlier than the backend's clock read then), and
// counts a hit as recent from the lower one. Its answers are given at the
// best estimate, which is off by no more than half the quickest recent
// call's round trip: the middle of that call, decided − (sent + received)/2,
// kept within the bounds. On a busy host no call of a second may be quick
// on both legs, and either bound may then be milliseconds from the
// backend's clock, where the quickest round trip is still short. It is safe
// for concurrent use; the zero value knows no offset.
type backendClock struct {
	mu  sync.Mutex
	hi  bound // the least decided − sent
	lo  bound // the greatest decided − received
	mid bound // decided − (sent + received)/2 of the quickest call
}

// bound is a bound on the offset (µs), or an estimate of it, and when it
// was seen; for an estimate, the round trip (µs) of the call it came from.
type bound struct {
	known bool
	off   int64
	rtt   int64
	at    time.Time
}

// tighten keeps off, seen at at, if it is tighter than b (below it when
// upper), or b has been kept for clockWindow.
func (b *bound) tighten(off int64, at time.Time, upper bool) {
	if !b.known || upper && off <= b.off || !upper && off >= b.off || at.Sub(b.at) > clockWindow {
		*b = bound{known: true, off: off, at: at}
	}
}

// clockWindow is how long a bound on the offset is kept before a looser
// one may replace it: the clocks drift apart by at most microseconds in it.
const clockWindow = time.Second

// note takes a call sent at sent, answered at received, that the backend
// decided at decided (µs since the Unix epoch, by its clock).
func (c *backendClock) note(sent, received time.Time, decided int64) {
	c.mu.Lock()
	c.hi.tighten(decided-sent.UnixMicro(), received, true)
	c.lo.tighten(decided-received.UnixMicro(), received, false)
	rtt := received.Sub(sent).Microseconds()
	if m := &c.mid; !m.known || rtt <= m.rtt || received.Sub(m.at) > clockWindow {
		*m = bound{known: true, off: decided - (sent.UnixMicro()+received.UnixMicro())/2, rtt: rtt, at: received}
	}
	c.mu.Unlock()
}

// read returns the bounds of the backend's time (µs) of t, this replica's
// time: hi no earlier than the backend's clock read at t, lo no later.
func (c *backendClock) read(t time.Time) (hi, lo int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	us := t.UnixMicro()
	return us + c.hi.off, min(us+c.lo.off, us+c.hi.off)
}

// estimate returns the best estimate of the backend's time (µs) of t,
// within read's bounds.
func (c *backendClock) estimate(t time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo := min(c.lo.off, c.hi.off)
	return t.UnixMicro() + min(max(c.mid.off, lo), c.hi.off)
}
