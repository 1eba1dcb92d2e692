package rls

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// DenyCache is a Limiter that remembers its inner Limiter's denials. Once a
// take of n hits on a limit is denied with a wait R, every take of n hits on
// that limit is denied locally until R has passed, with the wait that is
// left, without asking the backend: a hot key that is over its limit costs
// no Redis round trips.
//
// The answer it gives is the one the backend would give. Until R has passed,
// the backend itself would deny n hits, whatever the algorithm, unless the
// limit's state changes; so every other op on that limit that goes through
// this cache to the backend (a refund, admitted hits, a request under other
// numbers after a reload or with an override) drops what it remembers. R is counted from before the backend was asked, so the cache never
// denies past the backend's own reset; its reported wait may be up to one
// round trip shorter than the backend's, and the remaining count it reports
// is the one of the remembered denial.
// Two things it cannot see: hits given back through another replica (or
// given back after a denial it remembers was decided), and a limit split
// over shards, which it leaves to the backend, as it does peeks and requests
// for more hits than the limit can ever hold. For the first, a denial is
// answered locally for at most maxDenyHold, after which the backend is
// asked again.
//
// DenyCache is safe for concurrent use.
type DenyCache struct {
	inner    Limiter
	now      func() time.Time
	seed     maphash.Seed
	perShard int
	shards   [denyShards]denyShard
	hits     atomic.Uint64
}

const denyShards = 64

// maxDenyHold bounds how long a denial is answered locally. Hits can be
// given back after the denial was decided without this cache seeing it
// (through another replica, or a take given back because its caller was
// answered with the failure mode, see Service.Settle); within maxDenyHold
// the backend is asked again and admits into the room they made. A hot key
// over its limit then costs the backend one call a second per replica.
const maxDenyHold = time.Second

type denyShard struct {
	mu sync.Mutex
	m  map[string]denial
}

// denial is a remembered denial of a limit.
type denial struct {
	limit     algorithms.Limit
	hits      uint64 // the hits denied
	until     time.Time
	held      time.Time // until when it is answered locally: until, or maxDenyHold after it was decided
	remaining uint64
}

// NewDenyCache returns a DenyCache in front of inner that remembers at most
// about maxEntries denials. now is the clock; nil means time.Now.
func NewDenyCache(inner Limiter, maxEntries int, now func() time.Time) *DenyCache {
	if now == nil {
		now = time.Now
	}
	c := &DenyCache{inner: inner, now: now, seed: maphash.MakeSeed(), perShard: max(1, maxEntries/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]denial)
	}
	return c
}

// Hits returns how many takes the cache has answered without the backend.
func (c *DenyCache) Hits() uint64 { return c.hits.Load() }

// Do answers the takes it remembers as denied and passes every other op to
// the inner Limiter, in one call.
func (c *DenyCache) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	now := c.now()
	results := make([]algorithms.Result, len(ops))
	ids := make([]string, len(ops))
	var pass []algorithms.Op
	var index []int
	for i := range ops {
		op := &ops[i]
		if op.Shards <= 1 {
			ids[i] = algorithms.Identity(op.Key, op.Limit)
			if cacheable(op) {
				if wait, remaining, ok := c.denied(ids[i], op, now); ok {
					results[i] = algorithms.Result{Remaining: remaining, ResetAfter: wait}
					c.hits.Add(1)
					continue
				}
			}
			// Whatever reaches the backend may change the limit's state:
			// a refund, admitted hits, even a peek under other numbers.
			c.forget(ids[i])
		}
		pass = append(pass, *op)
		index = append(index, i)
	}
	if len(pass) == 0 {
		return results, nil
	}
	got, err := c.inner.Do(ctx, pass)
	if err != nil {
		return nil, err
	}
	for j, r := range got {
		i := index[j]
		results[i] = r
		if op := &ops[i]; ids[i] != "" && cacheable(op) && !r.Allowed && r.ResetAfter > 0 {
			c.remember(ids[i], denial{limit: op.Limit, hits: op.Hits, until: now.Add(r.ResetAfter),
				held: now.Add(min(r.ResetAfter, maxDenyHold)), remaining: r.Remaining}, now)
		}
	}
	return results, nil
}

// cacheable reports whether op's denial can be remembered and answered: a
// take of at least one hit and no more than the limit can ever hold.
func cacheable(op *algorithms.Op) bool {
	return !op.Refund && op.Hits > 0 && op.Hits <= op.Limit.Capacity()
}

func (c *DenyCache) shard(id string) *denyShard {
	return &c.shards[maphash.String(c.seed, id)%denyShards]
}

// denied reports whether op is known to be denied at now, and for how long.
func (c *DenyCache) denied(id string, op *algorithms.Op, now time.Time) (time.Duration, uint64, bool) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[id]
	if !ok {
		return 0, 0, false
	}
	if d.limit != op.Limit || !now.Before(d.held) {
		delete(s.m, id)
		return 0, 0, false
	}
	if op.Hits != d.hits {
		// More hits would be denied too, but their wait is longer.
		return 0, 0, false
	}
	// The wait in whole microseconds, rounded up, as the backend reports it.
	wait := d.until.Sub(now)
	wait = (wait + time.Microsecond - 1).Truncate(time.Microsecond)
	return wait, d.remaining, true
}

// remember records a denial, replacing what was known of the limit. A full
// shard first drops what has expired at now; if it is still full, the
// denial is not remembered.
func (c *DenyCache) remember(id string, d denial, now time.Time) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok && len(s.m) >= c.perShard {
		for k, v := range s.m {
			if !now.Before(v.held) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= c.perShard {
			return
		}
	}
	s.m[id] = d
}

// forget drops what the cache remembers of a limit, because hits were given
// back to it.
func (c *DenyCache) forget(id string) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}
