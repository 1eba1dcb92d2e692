package redisx

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverClock follows Redis's clock, which the scripts read with TIME, so
// that the ops decided without a script (counter.go) count in the window
// Redis is in, whatever this host's clock says: every replica then counts in
// the same window. It reads TIME every serverClockInterval and keeps the
// offset from the local clock at the midpoint of the round trip, so that its
// error is at most half a round trip plus the drift of an interval. Until
// the first reading it is the local clock. It is safe for concurrent use.
type serverClock struct {
	client redis.UniversalClient
	offset atomic.Int64 // ns to add to the local clock
	stop   chan struct{}
	done   chan struct{}
}

// serverClockMargin is how much longer than their state needs the keys
// written at the time serverClock gives are kept, so that an error of the
// clock of up to that much never drops a state too early.
const serverClockMargin = 100 * time.Millisecond

// serverClockInterval is how often the offset is read again.
const serverClockInterval = 10 * time.Second

func newServerClock(client redis.UniversalClient) *serverClock {
	c := &serverClock{client: client, stop: make(chan struct{}), done: make(chan struct{})}
	go c.follow()
	return c
}

// now returns Redis's time, as last read.
func (c *serverClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// follow reads the offset until close.
func (c *serverClock) follow() {
	defer close(c.done)
	t := time.NewTicker(serverClockInterval)
	defer t.Stop()
	for {
		c.read()
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
	}
}

// serverClockSamples is how many round trips a reading takes; the one that
// took least says the most.
const serverClockSamples = 3

// read reads Redis's TIME, keeps the reading of the shortest round trip,
// and sets the offset from it: the server's time less the midpoint of the
// round trip. An offset within what that round trip leaves uncertain (half
// of it, and a millisecond of TIME's rounding and the hosts' scheduling) is
// no offset: the clocks agree as far as can be told, as they do on hosts
// kept in time.
func (c *serverClock) read() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	best, offset := time.Duration(-1), time.Duration(0)
	for range serverClockSamples {
		before := time.Now()
		server, err := c.client.Time(ctx).Result()
		if err != nil {
			return // keep the last offset; the next tick tries again
		}
		rtt := time.Since(before)
		if best < 0 || rtt < best {
			best, offset = rtt, server.Sub(before.Add(rtt/2))
		}
	}
	if offset.Abs() <= best/2+time.Millisecond {
		offset = 0
	}
	c.offset.Store(int64(offset))
}

func (c *serverClock) close() {
	close(c.stop)
	<-c.done
}
