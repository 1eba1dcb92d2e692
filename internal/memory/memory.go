package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Defaults of a Limiter, overridden by Options.
const (
	defaultShards        = 128
	defaultSweepInterval = time.Second
	// sweepSample is how many entries of one shard a sweep round looks at
	// under the shard's lock.
	sweepSample = 32
	// sweepRounds bounds the rounds per shard and tick. Another round runs
	// while more than a quarter of the last sample had expired.
	sweepRounds = 16
)

// Package memory is the in-memory backend: an rate.Limiter that keeps
// every limit's state in this process.
//
// Limiter is the in-memory rate.Limiter: it keeps every limit's state in
// process, in maps sharded by a hash of the state's identity, each behind its
// own mutex. A state is dropped once its Expiry has passed, when it is next
// touched or by a background sweep, so memory follows the active keys.
//
// Limiter is safe for concurrent use. Create one with New (the zero
// Limiter is not usable) and call Close to stop its sweep.
type Limiter struct {
	now    func() time.Time
	seed   maphash.Seed
	mask   uint64
	shards []shard

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type shard struct {
	mu      sync.Mutex
	entries map[string]*entry
	_       [48]byte // keep neighbouring locks off one cache line
}

type entry struct {
	state algorithms.State
	// expires is the state's Expiry in microseconds, as of its last change.
	expires int64
}

// Option configures a Limiter.
type Option func(*config)

type config struct {
	now    func() time.Time
	shards int
	sweep  time.Duration
}

// WithClock makes a Limiter read the time from now instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// WithShards sets the number of lock shards, rounded up to a power of two
// (default 128).
func WithShards(n int) Option {
	return func(c *config) { c.shards = n }
}

// WithSweepInterval sets how often the background sweep drops expired
// states (default one second); 0 or less runs no sweep, leaving expired
// states to be dropped when touched.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweep = d }
}

// New returns an empty Limiter and starts its background sweep.
func New(opts ...Option) *Limiter {
	cfg := config{now: time.Now, shards: defaultShards, sweep: defaultSweepInterval}
	for _, o := range opts {
		o(&cfg)
	}
	n := 1
	if cfg.shards > 1 {
		n = 1 << bits.Len(uint(cfg.shards-1))
	}
	m := &Limiter{
		now:    cfg.now,
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
	}
	for i := range m.shards {
		m.shards[i].entries = make(map[string]*entry)
	}
	if cfg.sweep > 0 {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go m.sweepEvery(cfg.sweep)
	}
	return m
}

// Do applies ops in order, each atomically on the state of op.Identity(), all
// at one reading of the clock, and returns their results in the same order.
// Op.Shards is ignored: one exact state serves the whole limit. A refund of a
// state that does not exist creates none. Do fails, applying nothing, when
// ctx is already done or an op is invalid (rate.Op.Validate; for its
// limit, the error wraps algorithms.ErrInvalidLimit).
func (m *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	for i := range ops {
		if err := ops[i].Validate(); err != nil {
			return nil, fmt.Errorf("memory: op %d: %w", i, err)
		}
	}
	now := m.now()
	t := now.UnixMicro()
	results := make([]algorithms.Result, len(ops))
	for i := range ops {
		results[i] = m.apply(&ops[i], now, t)
	}
	return results, nil
}

// apply runs one op under its shard's lock.
func (m *Limiter) apply(op *rate.Op, now time.Time, t int64) algorithms.Result {
	id := op.Identity()
	sh := &m.shards[maphash.String(m.seed, id)&m.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()

	e := sh.entries[id]
	if e != nil && e.expires <= t {
		// Expired under the limit it was last used with: it is new again.
		delete(sh.entries, id)
		e = nil
	}
	if e == nil {
		st := algorithms.NewState(op.Limit.Algorithm)
		res := rate.Apply(st, op, now)
		if op.Loosens() {
			return res
		}
		if exp := st.Expiry(op.Limit).UnixMicro(); exp > t {
			sh.entries[id] = &entry{state: st, expires: exp}
		}
		return tell(op, st, res)
	}
	res := rate.Apply(e.state, op, now)
	if e.expires = e.state.Expiry(op.Limit).UnixMicro(); e.expires <= t {
		delete(sh.entries, id)
	}
	return tell(op, e.state, res)
}

// tell returns res with, for an admitted lease's take of at least one hit,
// a copy of the state st it left (Result.State).
func tell(op *rate.Op, st algorithms.State, res algorithms.Result) algorithms.Result {
	if res.Allowed && op.Leasing() && op.Hits > 0 {
		res.State = st.Clone()
	}
	return res
}

// Close stops the background sweep and waits for it to return. Do keeps
// working afterwards; expired states are then dropped only when touched.
// Close may be called more than once.
func (m *Limiter) Close() {
	m.closeOnce.Do(func() {
		if m.stop != nil {
			close(m.stop)
			<-m.done
		}
	})
}

func (m *Limiter) sweepEvery(d time.Duration) {
	defer close(m.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
			m.sweep()
		}
	}
}

// sweep visits every shard once and drops expired states from a random
// sample of it, taking more samples while they are mostly expired. It
// returns how many states it dropped.
func (m *Limiter) sweep() int {
	t := m.now().UnixMicro()
	dropped := 0
	for i := range m.shards {
		dropped += m.shards[i].sweep(t)
	}
	return dropped
}

func (sh *shard) sweep(t int64) int {
	dropped := 0
	for range sweepRounds {
		seen, expired := 0, 0
		sh.mu.Lock()
		// Map iteration starts at a random entry, so successive samples
		// cover the whole shard.
		for id, e := range sh.entries {
			if seen == sweepSample {
				break
			}
			seen++
			if e.expires <= t {
				delete(sh.entries, id)
				expired++
			}
		}
		sh.mu.Unlock()
		dropped += expired
		if seen < sweepSample || 4*expired <= seen {
			break
		}
	}
	return dropped
}
