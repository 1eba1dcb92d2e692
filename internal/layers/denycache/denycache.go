// Package denycache is the deny cache of the request path: a Limiter that
// wraps the Limiter below it and answers the takes of a limit it saw denied,
// until the denial's wait has passed, without asking the backend.
package denycache

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Limiter is a Limiter that remembers its inner Limiter's denials. Once a
// take of n hits on a limit is denied with a wait R and n − 1 remaining,
// every take of n hits on that limit is denied locally until R has passed,
// with the wait that is left, without asking the backend: a hot key that is
// over its limit costs no Redis round trips.
//
// The answer it gives is the one the backend would give. Until R has passed,
// the backend itself denies n hits, whatever the algorithm, unless an op
// leaves the limit more room: hits given back (a refund or is_negative_hits),
// or the limit's state changed under other numbers (after a reload, or by a
// request's override), which may, say, refill a token bucket faster. Takes
// under the same numbers only ever leave less room, though admitted ones
// make the wait longer. So the cache drops a denial when a loosening op on
// its limit is sent through it, and when any op on its limit is answered
// with hits taken; and it remembers a denial only when no loosening op on
// the limit was on its way to the backend or back at any moment while the
// denied take was, and no take on it was admitted meanwhile. The backend may
// run scripts in another order than they were sent, and answer them in
// another order than it ran them: a denial that overlapped a give-back may
// have been decided before it, and is not kept. A denial the backend marks
// transient (it may have met hits another op was about to give back) is
// kept for transientHold at most.
//
// R is counted from before the backend was asked, so the cache never denies
// past the backend's own reset; its reported wait may be up to one round trip
// shorter than the backend's. The remaining count it reports is the one of
// the remembered denial, which stays the backend's until R only when it is
// n − 1 (see steady): a denial that left less room is not remembered, since
// the room grows as time passes (a window slides, a bucket refills) while
// n hits still do not fit. A take of one hit, the usual one, always leaves
// 0 when denied.
//
// What it cannot see: hits given back through another replica, and a
// give-back whose call failed (a timeout, say) but whose script ran later;
// for those, a denial is answered locally for at most maxDenyHold, after
// which the backend is asked again. It leaves sharded limits to the
// backend, as it does peeks, requests for more hits than the limit can ever
// hold, and charges (usage already spent, which must be recorded, and which
// change the state like any other op that reaches the backend).
//
// The cost per op that reaches the backend is two short critical sections of
// one of 64 locks. It is safe for concurrent use.
type Limiter struct {
	inner    rate.Limiter
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
// answered with the failure mode, see internal/giveback); within maxDenyHold
// the backend is asked again and admits into the room they made. A hot key
// over its limit then costs the backend one call a second per replica.
const maxDenyHold = time.Second

// transientHold bounds how long a denial the backend marked transient
// (algorithms.Result.Transient) is answered locally. Such a denial may have
// met hits another op, through any replica, was about to give back, and
// then the room is there a round trip later; or it met a count that stays
// above the limit (one that records counted past it, or a limit since
// lowered), and the denial holds. The short hold bounds what the first
// costs in admissions, and keeps most of what the cache saves the backend
// in the second.
const transientHold = 50 * time.Millisecond

type denyShard struct {
	mu sync.Mutex
	// m holds the limits that have ops in flight or a remembered denial.
	m map[string]limitState
	// denials counts the entries of m that hold a denial.
	denials int
}

// limitState is what the cache knows of one limit.
type limitState struct {
	// inflight counts the ops on the limit sent to the backend and not yet
	// answered; loosening counts those among them that may leave the limit
	// more room.
	inflight, loosening int32
	// gen changes whenever a loosening op is sent or answered, and when a
	// take is answered with hits taken.
	gen uint64
	// limit holds the numbers of the ops in flight and of the denial.
	limit algorithms.Limit
	// denial is the remembered denial; its hits are 0 when there is none.
	denial denial
}

// denial is a remembered denial of a limit.
type denial struct {
	hits  uint64 // the hits denied
	until time.Time
	// held is until when it is answered locally: until, or maxDenyHold
	// after it was decided, whichever comes first.
	held      time.Time
	remaining uint64
}

// ticket is what the cache notes of an op it sends to the backend, to settle
// it when the answer comes.
type ticket struct {
	id string // empty for an op the cache does not follow
	// gen is the limit's generation when the op was sent.
	gen uint64
	// loosening reports that the op may leave the limit more room; clean,
	// that no loosening op on the limit was in flight when it was sent.
	loosening, clean bool
	// passed reports that the op went to the inner Limiter: it was not
	// answered from a remembered denial.
	passed bool
}

// Options configure New.
type Options struct {
	// MaxEntries bounds the denials remembered, to about that many.
	MaxEntries int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultOptions returns the Options of a server's deny cache: about
// 100 000 denials remembered.
func DefaultOptions() Options { return Options{MaxEntries: 100_000} }

// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	if o.MaxEntries < 1 {
		return fmt.Errorf("denycache: %w", option.Errorf("MaxEntries", "must be at least 1, not %d", o.MaxEntries))
	}
	return nil
}

// New returns a Limiter in front of inner that remembers denials as opts
// say, or the error of opts.Validate.
func New(inner rate.Limiter, opts Options) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	c := &Limiter{inner: inner, now: now, seed: maphash.MakeSeed(), perShard: max(1, opts.MaxEntries/denyShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]limitState)
	}
	return c, nil
}

// Hits returns how many takes the cache has answered without the backend.
func (c *Limiter) Hits() uint64 { return c.hits.Load() }

// Do answers the takes it remembers as denied and passes every other op to
// the inner Limiter, in one call.
//
// Its frame stays on the stack while the backend decides: the work before
// the call and after it is done in functions of their own (pass, settleAll),
// whose locals are not part of it.
func (c *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	now := c.now()
	results := make([]algorithms.Result, len(ops))
	tickets := make([]ticket, len(ops))
	pass := c.pass(ops, now, results, tickets)
	if len(pass) == 0 {
		return results, nil
	}
	got, err := c.inner.Do(ctx, pass)
	c.settleAll(ops, tickets, now, results, got, err)
	if err != nil {
		return nil, err
	}
	return results, nil
}

// pass answers in results the ops it remembers as denied at now, and
// returns the others, to be passed to the inner Limiter, noting each in its
// ticket.
//
//go:noinline
func (c *Limiter) pass(ops []rate.Op, now time.Time, results []algorithms.Result, tickets []ticket) []rate.Op {
	var pass []rate.Op
	for i := range ops {
		op := &ops[i]
		if op.Shards <= 1 {
			id := op.Identity()
			if r, ok := c.send(id, op, now, &tickets[i]); ok {
				results[i] = r
				c.hits.Add(1)
				continue
			}
			pass = append(pass, *op)
			pass[len(pass)-1].ID = id // built once: the backend keys its state by it
		} else {
			pass = append(pass, *op)
		}
		tickets[i].passed = true
	}
	return pass
}

// settleAll settles every op passed to the inner Limiter at now, answered
// (got, into results) or not (err).
//
//go:noinline
func (c *Limiter) settleAll(ops []rate.Op, tickets []ticket, now time.Time, results, got []algorithms.Result, err error) {
	j := 0
	for i := range ops {
		t := &tickets[i]
		if !t.passed {
			continue
		}
		var r *algorithms.Result
		if err == nil {
			r = &got[j]
			results[i] = *r
		}
		j++
		if t.id != "" {
			c.settle(t, &ops[i], r, now)
		}
	}
}

// cacheable reports whether op's denial can be remembered and answered: a
// take (not a charge) of at least one hit and no more than the limit can
// ever hold.
func cacheable(op *rate.Op) bool {
	return op.Kind == rate.Take && op.Hits > 0 && op.Hits <= op.Limit.Capacity()
}

// steady reports whether the remaining count of r, a denial of op, stays
// what it is until r's reset if nothing else happens: whether it is
// op.Hits − 1. Time alone only ever leaves a limit more room, whatever the
// algorithm (a window slides, a bucket refills, a debt is paid), and op's
// hits have no room before the reset; so a remaining of n − 1 can only stay
// n − 1 until then, while a lower one rises as the room comes back (a
// sliding window's previous count slides out hit by hit), and a denial that
// repeated it would report less room than the backend has.
func steady(op *rate.Op, r *algorithms.Result) bool { return r.Remaining+1 == op.Hits }

func (c *Limiter) shard(id string) *denyShard {
	return &c.shards[maphash.String(c.seed, id)%denyShards]
}

// send answers op, on the limit named id, from a denial remembered at now and
// reports true; or notes in t that op goes to the backend and reports false.
func (c *Limiter) send(id string, op *rate.Op, now time.Time, t *ticket) (algorithms.Result, bool) {
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.m[id]
	if st.denial.hits != 0 && !now.Before(st.denial.held) {
		s.drop(&st)
	}
	if st.denial.hits != 0 && st.denial.hits == op.Hits && st.limit == op.Limit && cacheable(op) {
		// The wait in whole microseconds, rounded up, as the backend
		// reports it.
		wait := st.denial.until.Sub(now)
		wait = (wait + time.Microsecond - 1).Truncate(time.Microsecond)
		return algorithms.Result{Remaining: st.denial.remaining, ResetAfter: wait}, true
	}
	if !known || st.inflight == 0 && st.denial.hits == 0 {
		st.limit = op.Limit
	}
	*t = ticket{id: id}
	if op.Loosens() || st.limit != op.Limit {
		t.loosening = true
		st.loosening++
		st.gen++
		s.drop(&st)
		if !op.Loosens() {
			st.limit = op.Limit
		}
	}
	st.inflight++
	t.gen, t.clean = st.gen, st.loosening == 0
	s.m[id] = st
	return algorithms.Result{}, false
}

// settle records the backend's answer r to op (nil when there was none),
// sent at now with ticket t: it remembers a denial that no loosening op can
// have overtaken, and forgets the limit once nothing is left to know.
func (c *Limiter) settle(t *ticket, op *rate.Op, r *algorithms.Result, now time.Time) {
	s := c.shard(t.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[t.id]
	st.inflight--
	switch {
	case t.loosening:
		st.loosening--
		st.gen++
		s.drop(&st)
	case r == nil || op.Hits > 0 && (op.Kind == rate.Charge || op.Kind == rate.Take && r.Allowed):
		// Hits taken, or perhaps taken (a charge records its hits even
		// when it takes the limit past L): a remembered wait is too short
		// now, and so may be the wait of a denial decided before them.
		st.gen++
		s.drop(&st)
	case r != nil && !r.Allowed && r.ResetAfter > 0 && t.clean && st.gen == t.gen && cacheable(op) && steady(op, r):
		hold := maxDenyHold
		if r.Transient {
			hold = transientHold
		}
		c.remember(s, &st, denial{hits: op.Hits, until: now.Add(r.ResetAfter),
			held: now.Add(min(r.ResetAfter, hold)), remaining: r.Remaining}, now)
	}
	if st.inflight == 0 && st.denial.hits == 0 {
		delete(s.m, t.id)
		return
	}
	s.m[t.id] = st
}

// remember records d as st's denial, replacing the one it holds. When the
// shard holds as many denials as it may, it first drops those that have
// expired at now; if it is still full, d is not remembered.
func (c *Limiter) remember(s *denyShard, st *limitState, d denial, now time.Time) {
	if st.denial.hits == 0 && s.denials >= c.perShard {
		for id, other := range s.m {
			if other.denial.hits != 0 && !now.Before(other.denial.held) {
				s.drop(&other)
				if other.inflight == 0 {
					delete(s.m, id)
				} else {
					s.m[id] = other
				}
			}
		}
		if s.denials >= c.perShard {
			return
		}
	}
	if st.denial.hits == 0 {
		s.denials++
	}
	st.denial = d
}

// drop forgets st's denial, if it has one.
func (s *denyShard) drop(st *limitState) {
	if st.denial.hits != 0 {
		st.denial = denial{}
		s.denials--
	}
}
