package lease

import (
	"sync"
	"time"
)

// backendClock follows the backend's clock (which decides, and which the
// times of a settlement must be in) from this replica's. A call sent at
// sent and answered at received was decided at some instant between them,
// which the backend's clock read as decided: so the offset θ between the
// clocks is at most decided − sent. The least such bound over the calls of
// the last clockWindow is the offset a lease maps its times with: they are
// never earlier than the backend's clock read at the same instant, and
// later by no more than the quickest recent call took to be decided. It is
// safe for concurrent use; the zero value knows no offset.
type backendClock struct {
	mu    sync.Mutex
	known bool
	// best is the least decided − sent (µs) seen since at, and rtt the
	// round trip of that call, which bounds how much best is above θ.
	best int64
	rtt  time.Duration
	at   time.Time
}

// clockWindow is how long a bound on the offset is kept before a larger
// one may replace it: the clocks drift apart by at most microseconds in it.
const clockWindow = time.Second

// note takes a call sent at sent, answered at received, that the backend
// decided at decided (µs since the Unix epoch, by its clock).
func (c *backendClock) note(sent, received time.Time, decided int64) {
	bound := decided - sent.UnixMicro()
	c.mu.Lock()
	if !c.known || bound <= c.best || received.Sub(c.at) > clockWindow {
		c.known, c.best, c.rtt, c.at = true, bound, received.Sub(sent), received
	}
	c.mu.Unlock()
}

// read returns the backend's time (µs) of t, this replica's time: no
// earlier than the backend's clock read at t, and how much later it may be.
func (c *backendClock) read(t time.Time) (int64, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.UnixMicro() + c.best, c.rtt
}
