// Package lease serves the hot limits of one replica from leases: a
// reservation of k hits taken from the backend with one take of k, from
// which the replica admits takes locally for at most a lease time τ, and
// gives back what it did not use.
//
// A lease is a take the backend admitted before any hit is served from it,
// so all replicas together never admit more than a limit allows: every hit
// a lease serves was counted when the lease was taken. Per algorithm:
//
//   - token_bucket: the k tokens are taken when the lease is; unused ones
//     go back into the bucket, up to its capacity.
//   - sliding_window_log: the k hits are logged at the lease's end, now + τ
//     (algorithms.Op.Hold), so none leaves the window before a hit served
//     from the lease would.
//   - fixed_window and sliding_window_counter: the reservation counts in the
//     window it was made in, and the lease ends with that window.
//
// What leases cost is under-admission: the hits leased and not yet used or
// given back, which no other replica can admit meanwhile, at most the k of
// each replica's lease for at most τ (and, for a replica that dies holding
// one, until its window or τ has passed). k follows the replica's demand on
// the limit over τ and is at most a quarter of the room the backend last
// reported, so it shrinks down to single takes as a limit fills, and no
// replica holds for long the room others need. A limit whose demand on this
// replica would not fill MinHits in τ is cold and never leased: its takes go
// to the backend as they are.
package lease

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// Event is what became of hits of a lease, for an Observer.
type Event uint8

// The events of a lease.
const (
	// Taken: a lease of the hits was taken from the backend.
	Taken Event = iota
	// Served: the hits were admitted from a lease, without the backend.
	Served
	// GivenBack: the hits of a lease were not used and went back.
	GivenBack
)

// Observer is told what the leases of op's limit do, for metrics (op's Tag
// names the rule it counts for). Implementations MUST be safe for
// concurrent use, should be quick, and must not keep op.
type Observer interface {
	ObserveLease(op *algorithms.Op, e Event, hits uint64)
}

type nopObserver struct{}

func (nopObserver) ObserveLease(*algorithms.Op, Event, uint64) {}

// Options configure New.
type Options struct {
	// Time is τ, the longest a lease is served locally. It must be
	// positive.
	Time time.Duration
	// MinHits is the least a lease holds: a limit whose demand on this
	// replica over Time is less is not leased. It must be at least 2.
	MinHits uint64
	// Observer is told what the leases do; nil observes nothing.
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// GiveBack, when set, takes the give-backs of the hits leases did not
	// use, and of the hits served to calls that then failed (a give-back
	// queue, which retries). Nil sends them to the Limiter wrapped, once,
	// in the background. Close gives back to the Limiter wrapped directly.
	GiveBack func([]algorithms.Op)
	// KeepFailedTakes keeps the hits served to a call that failed: its
	// caller was answered as admitted (the failure mode allow).
	KeepFailedTakes bool
}

// Limiter is a Limiter that serves hot limits from leases taken from the
// Limiter it wraps (see the package documentation), and passes every other
// op through. It is safe for concurrent use.
type Limiter struct {
	next     algorithms.Limiter
	tau      time.Duration
	minHits  uint64
	observer Observer
	now      func() time.Time
	// queue, when set, takes the give-backs; keepFailed is
	// Options.KeepFailedTakes.
	queue      func([]algorithms.Op)
	keepFailed bool
	seed       maphash.Seed
	shards     [leaseShards]shard
	stop       chan struct{}
	done       chan struct{}
	// pending counts the calls made in the background.
	pending sync.WaitGroup
}

const leaseShards = 64

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

// New returns a Limiter serving leases of next as opts say. Close stops it.
func New(next algorithms.Limiter, opts Options) (*Limiter, error) {
	switch {
	case opts.Time <= 0:
		return nil, fmt.Errorf("lease: Time must be positive, not %s", opts.Time)
	case opts.MinHits < 2:
		return nil, fmt.Errorf("lease: MinHits must be at least 2, not %d", opts.MinHits)
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Limiter{next: next, tau: opts.Time, minHits: opts.MinHits, observer: opts.Observer, now: opts.Now,
		queue: opts.GiveBack, keepFailed: opts.KeepFailedTakes,
		seed: maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*entry)
	}
	go l.sweep()
	return l, nil
}

// Close gives back every lease and stops the Limiter's sweeper. It does not
// close the Limiter it wraps.
func (l *Limiter) Close() {
	close(l.stop)
	<-l.done
	l.pending.Wait()
	var back []algorithms.Op
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			back = e.detach(&e.lease, back, l.observer)
			back = e.detach(&e.next, back, l.observer)
		}
		s.mu.Unlock()
	}
	l.giveBack(back)
}

// leasable reports whether op may be served from a lease: a take, or a
// record (a charge that owes no debt, as envoyproxy/ratelimit counts every
// hit), of at least one hit and no more than its limit can hold, of a limit
// that is not split and owes nothing. A record a lease holds the hits of
// is admitted as its take would be; one it cannot serve goes to the backend
// as a record, counted past the limit if it must be.
func leasable(op *algorithms.Op) bool {
	return !op.Refund && !op.Debt && op.Shards <= 1 && op.Hits > 0 &&
		op.Hits <= op.Limit.Capacity() && op.Limit.Algorithm.Valid()
}

// What an op of a Do became.
type stepKind uint8

const (
	passed  stepKind = iota // sent to the backend as it is
	served                  // admitted from a lease
	leasing                 // sent as the take of a lease
)

type step struct {
	kind stepKind
	at   int // its op's index among those sent
}

// Do serves the takes it can from leases, takes leases for the hot limits
// among the others, and passes everything else to the Limiter it wraps, in
// one call. A lease the backend would not grant is retried as the take
// alone, in a second call. A lease running out has its successor taken
// ahead, in the background, so that a hot limit's takes keep being served
// while it comes.
func (l *Limiter) Do(ctx context.Context, ops []algorithms.Op) ([]algorithms.Result, error) {
	now := l.now()
	results := make([]algorithms.Result, len(ops))
	steps := make([]step, len(ops))
	var send, back, ahead []algorithms.Op
	// fetching holds the limits this call takes a lease of: its own takes
	// must not wait for those.
	var fetching []string
	for i := range ops {
		op := &ops[i]
		if !leasable(op) {
			steps[i] = step{kind: passed, at: len(send)}
			send = append(send, *op)
			continue
		}
		id := op.Identity()
		s := l.shard(id)
		s.mu.Lock()
		e := s.entry(id)
		e.count(op.Hits, now)
		at := now
		r, ok, early, back2 := e.serve(op, at, l.tau, back, l.observer)
		if !ok && e.fetching() && !slices.Contains(fetching, id) {
			// A lease of the limit is on its way: the take waits for it, as
			// long as it would wait for the backend, rather than ask the
			// backend for room this replica may be about to hold.
			arrived := e.arrived
			s.mu.Unlock()
			select {
			case <-arrived:
			case <-ctx.Done():
			}
			at = l.now()
			s.mu.Lock()
			e = s.entry(id)
			r, ok, early, back2 = e.serve(op, at, l.tau, back2, l.observer)
		}
		back = back2
		if ok {
			if early {
				if k := e.size(op, 0, at, l.tau, l.minHits); k > 0 {
					e.fetch()
					fetching = append(fetching, id)
					ahead = append(ahead, l.leaseOp(op, id, k))
				}
			}
			s.mu.Unlock()
			results[i] = r
			steps[i] = step{kind: served}
			continue
		}
		k := e.size(op, op.Hits, at, l.tau, l.minHits)
		if k > 0 {
			e.fetch()
			fetching = append(fetching, id)
		}
		s.mu.Unlock()
		steps[i] = step{kind: passed, at: len(send)}
		if k > 0 {
			steps[i].kind = leasing
			send = append(send, l.leaseOp(op, id, k))
		} else {
			one := *op
			one.ID = id
			send = append(send, one)
		}
	}
	if len(back) > 0 || len(ahead) > 0 {
		l.background(back, ahead)
	}
	if len(send) == 0 {
		return results, nil
	}
	sent := l.now()
	got, err := l.next.Do(ctx, send)
	if err != nil {
		for i := range ops {
			if steps[i].kind == leasing {
				l.settle(&send[steps[i].at], func(e *entry) { e.fetched() })
			}
		}
		l.failed(ops, results, func(i int) bool { return steps[i].kind == served })
		return nil, err
	}
	var retry []int
	for i := range ops {
		st := steps[i]
		if st.kind == served {
			continue
		}
		r := got[st.at]
		sentOp := &send[st.at]
		switch {
		case st.kind == passed:
			results[i] = r
			if leasable(&ops[i]) {
				l.settle(sentOp, func(e *entry) { e.noteRoom(r) })
			}
		case r.Allowed:
			// The entry is there: one is not forgotten while a lease of
			// it is on its way.
			n := ops[i].Hits
			var back []algorithms.Op
			l.settle(sentOp, func(e *entry) {
				e.fetched()
				back = e.detach(&e.lease, back, l.observer)
				e.lease, results[i] = e.grant(sentOp, n, r, sent, l.tau, l.observer)
			})
			if len(back) > 0 {
				l.background(back, nil)
			}
		default:
			l.settle(sentOp, func(e *entry) {
				e.fetched()
				e.noteRoom(r)
			})
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return results, nil
	}
	again := make([]algorithms.Op, len(retry))
	for j, i := range retry {
		again[j] = ops[i]
	}
	got, err = l.next.Do(ctx, again)
	if err != nil {
		l.failed(ops, results, func(i int) bool { return !slices.Contains(retry, i) })
		return nil, err
	}
	for j, i := range retry {
		results[i] = got[j]
		l.settle(&again[j], func(e *entry) { e.noteRoom(got[j]) })
	}
	return results, nil
}

// failed gives back what a call that failed took for the ops for which
// answered reports true, answered with results before it failed (from
// leases, or by an earlier call): its caller, told the call failed, got
// none of it. What the backend did with the ops sent in the failed call
// comes with its error, for the layers below to give back. Charges are
// usage already spent, and stay; so does everything with KeepFailedTakes.
func (l *Limiter) failed(ops []algorithms.Op, results []algorithms.Result, answered func(int) bool) {
	if l.keepFailed {
		return
	}
	var back []algorithms.Op
	for i, op := range ops {
		if !answered(i) || !results[i].Allowed || op.Refund || op.Charge || op.Hits == 0 {
			continue
		}
		op.Refund, op.Receipt, op.Hold = true, results[i].Receipt, 0
		back = append(back, op)
	}
	l.background(back, nil)
}

// leaseOp returns the take of a lease of k hits of op's limit, whose
// identity is id: a take whether op is one or a record.
func (l *Limiter) leaseOp(op *algorithms.Op, id string, k uint64) algorithms.Op {
	one := *op
	one.ID, one.Hits, one.Hold = id, k, l.tau
	// A lease is a take, for a record too: it holds hits within the limit.
	one.Charge = false
	one.Receipt = algorithms.Receipt{}
	return one
}

// background sends back, the give-backs of leases, and takes ahead, the
// leases taken ahead, to the backend off the caller's path: the give-backs
// through the queue, when there is one.
func (l *Limiter) background(back, ahead []algorithms.Op) {
	if l.queue != nil && len(back) > 0 {
		l.queue(back)
		back = nil
	}
	if len(back) == 0 && len(ahead) == 0 {
		return
	}
	l.pending.Add(1)
	go func() {
		defer l.pending.Done()
		l.giveBack(back)
		l.takeAhead(ahead)
	}()
}

// takeAhead takes ops, leases taken ahead, and keeps each the backend
// grants as its limit's next lease.
func (l *Limiter) takeAhead(ops []algorithms.Op) {
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
	defer cancel()
	sent := l.now()
	got, err := l.next.Do(ctx, ops)
	var back []algorithms.Op
	for i := range ops {
		op := &ops[i]
		l.settle(op, func(e *entry) {
			e.fetched()
			if err != nil {
				return
			}
			if !got[i].Allowed {
				e.noteRoom(got[i])
				return
			}
			back = e.detach(&e.next, back, l.observer)
			e.next, _ = e.grant(op, 0, got[i], sent, l.tau, l.observer)
		})
	}
	l.sendBack(back)
}

// settle runs f on the entry of op's limit, if it is still held.
func (l *Limiter) settle(op *algorithms.Op, f func(*entry)) {
	id := op.Identity()
	s := l.shard(id)
	s.mu.Lock()
	if e := s.m[id]; e != nil {
		f(e)
	}
	s.mu.Unlock()
}

// entry returns the entry of the limit named id, made when there is none.
// It runs under the shard's lock.
func (s *shard) entry(id string) *entry {
	e := s.m[id]
	if e == nil {
		e = &entry{}
		s.m[id] = e
	}
	return e
}

func (l *Limiter) shard(id string) *shard {
	return &l.shards[maphash.String(l.seed, id)%leaseShards]
}

// backgroundTimeout bounds the calls made off the callers' path: the
// give-backs of unused leases and the leases taken ahead.
const backgroundTimeout = time.Second

// sendBack gives ops back through the queue, when there is one, or
// straight to the backend.
func (l *Limiter) sendBack(ops []algorithms.Op) {
	if l.queue != nil {
		if len(ops) > 0 {
			l.queue(ops)
		}
		return
	}
	l.giveBack(ops)
}

// giveBack sends ops, the refunds of what leases did not use, to the
// backend. One that fails leaves its hits counted until its window passes
// or, for a token bucket, until it refills: under-admission, never more.
func (l *Limiter) giveBack(ops []algorithms.Op) {
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
	defer cancel()
	_, _ = l.next.Do(ctx, ops)
}

// sweep gives back the leases that expired unused, and forgets the limits
// no one asked for lately, every lease time until Close.
func (l *Limiter) sweep() {
	defer close(l.done)
	t := time.NewTicker(l.tau)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.expire(l.now())
	}
}

// expire gives back the leases that have expired at now, and forgets the
// limits no one asked for lately.
func (l *Limiter) expire(now time.Time) {
	var back []algorithms.Op
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for id, e := range s.m {
			for _, p := range [...]**held{&e.lease, &e.next} {
				if *p != nil && !now.Before((*p).expires) {
					back = e.detach(p, back, l.observer)
				}
			}
			if e.idle(now) {
				delete(s.m, id)
			}
		}
		s.mu.Unlock()
	}
	l.sendBack(back)
}

// idleAfter is how long a limit no one asks for is remembered.
const idleAfter = 10 * time.Second
