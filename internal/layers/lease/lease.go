// Package lease serves the hot limits of one replica from leases: a
// reservation of k hits taken from the backend with one take of k, from
// which the replica admits takes locally for at most a lease time τ, and
// settles with the backend: when it served each hit, and what it did not
// use.
//
// A lease is a take the backend admitted before any hit is served from it,
// so all replicas together never admit more than a limit allows: every hit
// a lease serves was counted when the lease was taken. Per algorithm:
//
//   - token_bucket: the k tokens are taken when the lease is, and held
//     (counted as in the bucket) until its hold ends, h after it was taken;
//   - sliding_window_log: the k hits are logged at the hold's end, now + h
//     (rate.Op.Hold), so none leaves the window before a hit served
//     from the lease would;
//   - fixed_window and sliding_window_counter: the reservation counts in the
//     window it was made in, and the lease ends with that window.
//
// A lease never makes an answer other than the backend would give without
// it, this replica being the only one:
//
//   - Every call the replica makes on a limit first settles its leases of it
//     (rate.Op.Leases): the hits each served since the last
//     settlement, at the times it served them, and, for the leases that end,
//     what they did not serve. So the backend holds what it would hold had it
//     taken each hit when it was served: a log logs it then, a bucket gets
//     back the refill its hold kept out, and the unused hits go back.
//   - A take no lease can serve, and every op that is no take of the lease
//     (a check, a charge, a refund), goes to the backend after a settlement
//     that ends the limit's leases, so that it is decided on the limit as it
//     would be without them. Charges and checks never take or hold a lease.
//   - A served take is answered as the backend would answer it without the
//     leases: from the state the last lease's answer showed (Result.State),
//     with this replica's leases settled and ended there, moved on by the
//     takes served since (the mirror).
//   - A settlement names the state that took the lease (its receipt's
//     epoch): one that reaches a state that lost it (flushed, evicted,
//     failed over), or a bucket after the lease's hold ended, gives nothing
//     back.
//
// What leases cost is under-admission across replicas: the hits other
// replicas' leases hold, unused, which this one cannot admit meanwhile: at
// most the k of each of their leases for at most h (and, for a replica
// that dies holding one, until its window or hold has passed). k follows
// the replica's demand on the limit over τ and is at most a quarter of the
// room the backend last reported, so it shrinks down to single takes as a
// limit fills, and no replica holds for long the room others need. A limit
// whose demand on this replica would not fill MinHits in τ is cold and never
// leased: its takes go to the backend as they are. So are charges, records,
// checks, refunds and sharded limits.
//
// In numbers: a replica holds at most two leases of a limit (the one
// serving and the next, taken ahead as it runs low), each at most the
// least of its demand over τ plus n, a quarter of the room last reported,
// and the limit's capacity (B or L). A limit of 1 000 a second asked 2 000
// a second by one replica, at τ = 50ms, gets leases of at most 101 hits,
// 202 held at once, each for at most τ; with less than 4·MinHits of room
// left there is no lease, and every take goes to the backend. A burst that
// stops dead can end with fewer than L admitted, the hits still held; they
// come back when the lease is settled, within τ. A token bucket's
// settlement gives back the refill its hold kept out only since the last
// settlement of any holder, so when several settle a full bucket it may
// hold up to a lease's worth less than it would, until it refills.
//
// With one replica, two things differ from the answers without leases: a
// log records a served hit at the end of its slot (algorithms.ServedSlot),
// so a request may be denied up to a slot earlier; and a served answer is
// given at this replica's estimate of the backend's clock (backendClock).
// With several, a replica counts other replicas' leases as taken, and
// moves a served answer on by its own takes and the limit's refill or
// expiry, not by other replicas' takes since its last lease (at most τ):
// its remaining can be higher than the room they left. A refund without a
// receipt on a sliding_window_log gives back the newest hits logged by its
// time, never another replica's leased hits (logged at their lease's end,
// which it may still serve); when those are all the log holds, it gives
// back less than it asks.
package lease

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
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
	ObserveLease(op *rate.Op, e Event, hits uint64)
}

type nopObserver struct{}

func (nopObserver) ObserveLease(*rate.Op, Event, uint64) {}

// Options configure New.
type Options struct {
	// Time is τ, the longest a lease is served locally. It must be
	// positive. The backend holds a lease for h = τ + max(τ, 500ms), so
	// that its settlement comes before its hold ends, even on a busy host.
	Time time.Duration
	// MinHits is the least a lease holds: a limit whose demand on this
	// replica over Time is less is not leased. It must be at least 2.
	MinHits uint64
	// Observer is told what the leases do; nil observes nothing.
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// KeepFailedTakes keeps the hits served to a call that failed: its
	// caller was answered as admitted (the failure mode allow).
	KeepFailedTakes bool
	// manual leaves the sweeper's rounds to the caller (the tests, on a
	// fake clock, call expire).
	manual bool
}

// DefaultOptions returns the Options of a server's leases: a lease time of
// 50ms, and at least 8 hits of demand on this replica within it for a
// limit to be leased, so that cold limits never are.
//
// The lease time is chosen from TestLeaseTimeTradeOff: past 50ms the
// backend calls saved are few, while a sliding_window_log and a
// token_bucket start to hold back part of what a binding limit allows;
// below it, a lease taken ahead has less time to arrive before the current
// one runs out, which matters when the backend answers in milliseconds
// under load.
func DefaultOptions() Options {
	return Options{Time: 50 * time.Millisecond, MinHits: 8}
}

// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	switch {
	case o.Time <= 0:
		return fmt.Errorf("lease: %w", option.Errorf("Time", "must be positive, not %s", o.Time))
	case o.MinHits < 2:
		return fmt.Errorf("lease: %w", option.Errorf("MinHits", "must be at least 2, not %d", o.MinHits))
	}
	return nil
}

// Limiter is a Limiter that serves hot limits from leases taken from the
// Limiter it wraps (see the package documentation), and passes every other
// op through. It is safe for concurrent use.
type Limiter struct {
	next     rate.Limiter
	tau      time.Duration
	minHits  uint64
	observer Observer
	now      func() time.Time
	// keepFailed is Options.KeepFailedTakes.
	keepFailed bool
	seed       maphash.Seed
	shards     [leaseShards]shard
	stop       chan struct{}
	done       chan struct{}
	closeOnce  sync.Once
	// clock follows the backend's clock, from the receipts of its answers.
	clock backendClock
	// pending counts the calls made in the background for Do.
	pending sync.WaitGroup
	// owed holds what the sweeper sends on its next round: settlements
	// whose calls failed before they ran, leases granted to no one, and the
	// refunds of hits served to calls that failed.
	owedMu sync.Mutex
	owed   []rate.Op
}

const leaseShards = 64

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

// New returns a Limiter serving leases of next as opts say. Close stops it.
func New(next rate.Limiter, opts Options) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Limiter{next: next, tau: opts.Time, minHits: opts.MinHits, observer: opts.Observer, now: opts.Now,
		keepFailed: opts.KeepFailedTakes,
		seed:       maphash.MakeSeed(), stop: make(chan struct{}), done: make(chan struct{})}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*entry)
	}
	if opts.manual {
		close(l.done)
	} else {
		go l.sweep()
	}
	return l, nil
}

// hold returns the hold of a lease in the backend, h: its time and some
// more (holdSpare), so that the sweeper settles it before the hold ends.
func (l *Limiter) hold() time.Duration { return l.tau + max(l.tau, holdSpare) }

// holdSpare is the least time the backend holds a lease past its lease
// time: the sweeper settles a lease within a quarter of τ of its end, and a
// busy host or a slow Redis may take some hundreds of milliseconds more. A
// bucket's lease settled after its hold ended gives nothing back.
const holdSpare = 500 * time.Millisecond

// Close settles every lease, sends what the sweeper still owes, and stops
// the sweeper. It does not close the Limiter it wraps. Calls after the first do nothing.
func (l *Limiter) Close() {
	l.closeOnce.Do(l.close)
}

func (l *Limiter) close() {
	close(l.stop)
	<-l.done
	l.pending.Wait()
	l.owedMu.Lock()
	ops := l.owed
	l.owed = nil
	l.owedMu.Unlock()
	now := l.now()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if op := l.settle(e, true, now); op != nil {
				ops = append(ops, *op)
			}
		}
		s.mu.Unlock()
	}
	l.send(ops)
}

// leasable reports whether op may be served from a lease: a take of at
// least one hit and no more than its limit can hold, of a limit that is
// not split and owes nothing. Charges, records and checks are not: they
// never take or hold a lease.
func leasable(op *rate.Op) bool {
	return op.Kind == rate.Take && !op.Debt && op.Shards <= 1 && op.Hits > 0 &&
		op.Hits <= op.Limit.Capacity() && op.Limit.Algorithm.Valid()
}

// What an op of a Do became.
type stepKind uint8

const (
	passed  stepKind = iota // sent to the backend as it is
	served                  // answered here, from a lease
	leasing                 // sent as the take of a lease
)

type step struct {
	kind stepKind
	at   int // its op's index among those sent
	// e is the entry of a take's limit, in shard s, when it has one.
	e *entry
	s *shard
}

// call is what one Do sends: settlements first, then the ops passed on
// and the takes no lease serves, then the takes of leases, so that each op
// is decided on a limit its settlement has settled, and a lease's answer
// shows the state after all of them.
type call struct {
	settles, passes, leases []rate.Op
	// claimed are the entries the call is the one under way on; sent
	// those of the other ops it sends (entry.sent).
	claimed, sent []*entry
}

// sending counts an op of e that the call sends (entry.sent), until done.
func (c *call) sending(e *entry) {
	e.sent.Add(1)
	c.sent = append(c.sent, e)
}

// done ends what the call counted in entry.sent.
func (c *call) done() {
	for _, e := range c.sent {
		e.sent.Add(-1)
	}
	c.sent = nil
}

// Do serves the takes it can from leases, takes leases for the hot limits
// among the others, settles the leases of the limits it sends ops of, and
// passes everything else to the Limiter it wraps, in one call. A lease the
// backend would not grant is retried as the take alone, in a second call.
// A lease running out has its successor taken ahead, in the background, so
// that a hot limit's takes keep being served while it comes.
func (l *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	// The frame that waits for the backend is kept small (plan and finish
	// do the work): a request's goroutine then fits the stack it starts
	// with, and is not copied to a larger one on every request.
	results := make([]algorithms.Result, len(ops))
	steps := make([]step, len(ops))
	var c call
	send := l.plan(ctx, ops, results, steps, &c)
	if send == nil {
		return results, nil
	}
	sent := l.now()
	got, err := l.next.Do(ctx, send)
	return l.finish(ctx, ops, results, steps, &c, send, sent, got, err)
}

// plan answers the ops of Do that leases serve, into results, notes in
// steps what became of each, and returns what to send to the backend:
// settlements first, then the ops passed on and the takes no lease
// serves, then the takes of leases; nil when nothing is.
//
//go:noinline
func (l *Limiter) plan(ctx context.Context, ops []rate.Op, results []algorithms.Result, steps []step, c *call) []rate.Op {
	now := l.now()
	var ahead []*entry
	for i := range ops {
		op := &ops[i]
		id := op.Identity()
		s := l.shard(id)
		s.mu.Lock()
		e := s.m[id]
		if !leasable(op) {
			if e != nil && op.Loosens() && (op.Receipt.At != 0 || op.Receipt.Seq != 0) {
				// A refund of a take a lease served takes it back from the
				// lease, if the lease has not reported it yet.
				if r, ok := e.unserve(op, now); ok {
					s.mu.Unlock()
					results[i], steps[i] = r, step{kind: served}
					continue
				}
			}
			if e != nil && (e.holds() || e.busy != nil) {
				e = l.await(ctx, s, id, e, c)
				l.claim(e, c, true, now)
			}
			if e != nil && !c.has(e) {
				c.sending(e)
			}
			s.mu.Unlock()
			steps[i] = step{kind: passed, at: len(c.passes)}
			c.passes = append(c.passes, *op)
			continue
		}
		if e == nil {
			e = s.entry(id)
		}
		e.count(op.Hits, now)
		if e.holds() && e.op.Limit != op.Limit {
			// The limit changed (a reload): its leases end first.
			e = l.await(ctx, s, id, e, c)
			l.claim(e, c, true, now)
		}
		r, ok := e.serve(op, now)
		if !ok && e.busy != nil && !c.has(e) {
			// A call on the limit is under way, which may bring a lease:
			// the take waits for it, as long as it would wait for the
			// backend, rather than ask the backend for room this replica
			// may be about to hold.
			e = l.await(ctx, s, id, e, c)
			now = l.now()
			r, ok = e.serve(op, now)
		}
		if ok {
			l.observer.ObserveLease(op, Served, op.Hits)
			if e.ahead(now, l.tau) {
				if k := e.size(op, 0, now, l.tau, l.minHits); k > 0 {
					e.busy = make(chan struct{})
					ahead = append(ahead, e)
				}
			}
			s.mu.Unlock()
			results[i], steps[i] = r, step{kind: served}
			continue
		}
		// The backend decides: on the limit with this replica's leases of
		// it ended, as it would without them. A call that takes a lease,
		// or settles leases, is the one under way on the limit; a cold
		// limit's take goes as it is.
		k := uint64(0)
		if !c.has(e) && e.free() {
			// No other call is under way on the limit (one still is when
			// this take's deadline passed waiting for it): it may lease.
			k = e.size(op, op.Hits, now, l.tau, l.minHits)
		}
		if k > 0 || e.holds() {
			l.claim(e, c, true, now)
		}
		if !c.has(e) {
			c.sending(e)
		}
		s.mu.Unlock()
		if k > 0 {
			steps[i] = step{kind: leasing, at: len(c.leases)}
			c.leases = append(c.leases, l.leaseOp(op, id, k))
		} else {
			steps[i] = step{kind: passed, at: len(c.passes), e: e, s: s}
			one := *op
			one.ID = id
			c.passes = append(c.passes, one)
		}
	}
	for _, e := range ahead {
		l.takeAhead(e)
	}
	switch {
	case len(c.settles)+len(c.passes)+len(c.leases) == 0:
		c.done()
		return nil
	case len(c.settles)+len(c.leases) == 0:
		return c.passes
	}
	send := make([]rate.Op, 0, len(c.settles)+len(c.passes)+len(c.leases))
	return append(append(append(send, c.settles...), c.passes...), c.leases...)
}

// finish answers the ops of Do that went to the backend, sent at sent, in
// send, from its answer got (or err), takes the leases it granted, and
// retries alone the takes of leases it denied.
//
//go:noinline
func (l *Limiter) finish(ctx context.Context, ops []rate.Op, results []algorithms.Result, steps []step, c *call,
	send []rate.Op, sent time.Time, got []algorithms.Result, err error) ([]algorithms.Result, error) {
	c.done()
	base := len(c.settles)
	if err != nil {
		l.release(c.claimed)
		l.failed(ops, results, steps)
		return nil, err
	}
	at := l.now()
	l.follow(c.leases, got[base+len(c.passes):], sent, at)
	var retry []int
	for i := range ops {
		st := steps[i]
		switch st.kind {
		case served:
			continue
		case passed:
			r := got[base+st.at]
			results[i] = r
			if st.e != nil {
				st.s.mu.Lock()
				st.e.noteRoom(r)
				st.s.mu.Unlock()
			}
		case leasing:
			r := got[base+len(c.passes)+st.at]
			lop := &c.leases[st.at]
			if !r.Allowed {
				l.update(lop, func(e *entry) { e.noteRoom(r) })
				retry = append(retry, i)
				continue
			}
			l.observer.ObserveLease(lop, Taken, lop.Hits)
			l.update(lop, func(e *entry) { results[i] = e.grant(lop, ops[i].Hits, r, sent, at, l.tau, &l.clock) })
		}
	}
	l.release(c.claimed)
	if len(retry) == 0 {
		return results, nil
	}
	again := make([]rate.Op, len(retry))
	for j, i := range retry {
		again[j] = ops[i]
	}
	got, err = l.next.Do(ctx, again)
	if err != nil {
		for _, i := range retry {
			steps[i].kind = passed // not answered: nothing to give back
		}
		l.failed(ops, results, steps)
		return nil, err
	}
	for j, i := range retry {
		results[i] = got[j]
		l.update(&again[j], func(e *entry) { e.noteRoom(got[j]) })
	}
	return results, nil
}

// follow notes, of the takes ops (leases') of a call sent at sent and
// answered at received with results, when the backend decided those it
// admitted: the clock that maps a lease's times to the backend's follows
// them.
func (l *Limiter) follow(ops []rate.Op, results []algorithms.Result, sent, received time.Time) {
	for i := range ops {
		if op, r := &ops[i], &results[i]; r.Allowed && op.Kind == rate.Take && r.Receipt.At != 0 {
			l.clock.note(sent, received, r.Receipt.Decided(op.Limit, op.Hold))
		}
	}
}

// has reports whether the call has claimed e.
func (c *call) has(e *entry) bool {
	for _, x := range c.claimed {
		if x == e {
			return true
		}
	}
	return false
}

// claim makes the call the one under way on e, if no other is: e is busy
// until it returns. e's settlement (ending every lease when all is set)
// goes first in it. It runs under e's shard's lock.
func (l *Limiter) claim(e *entry, c *call, all bool, now time.Time) {
	if !c.has(e) && e.busy == nil {
		e.busy = make(chan struct{})
		c.claimed = append(c.claimed, e)
	}
	if op := l.settle(e, all, now); op != nil {
		c.settles = append(c.settles, *op)
	}
}

// settle returns e's settlement at now, ending every lease when all is
// set, and tells the observer what the leases that end give back.
func (l *Limiter) settle(e *entry, all bool, now time.Time) *rate.Op {
	op := e.settle(all, now)
	if op == nil {
		return nil
	}
	for _, ls := range op.Leases {
		if ls.Close {
			if back := ls.Size - servedHits(ls); back > 0 {
				l.observer.ObserveLease(op, GivenBack, back)
			}
		}
	}
	return op
}

// servedHits returns what a settled lease served in all.
func servedHits(ls algorithms.Lease) uint64 {
	n := ls.Reported
	for _, s := range ls.Served {
		n += s.N
	}
	return min(n, ls.Size)
}

// await waits, with s locked, until no call on e is under way, unless the
// call c is the one: then, or once ctx is done, it returns e's entry, which
// may be a new one (s locked again).
func (l *Limiter) await(ctx context.Context, s *shard, id string, e *entry, c *call) *entry {
	for e.busy != nil && !c.has(e) {
		busy := e.busy
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			s.mu.Lock()
			return s.entry(id)
		}
		s.mu.Lock()
		e = s.entry(id)
	}
	return e
}

// release ends the calls under way on entries.
func (l *Limiter) release(entries []*entry) {
	for _, e := range entries {
		s := l.shard(e.id)
		s.mu.Lock()
		if e.busy != nil {
			close(e.busy)
			e.busy = nil
		}
		s.mu.Unlock()
	}
}

// failed handles a call that failed, of ops answered as steps say: what it
// served locally goes back (its caller, told the call failed, got none of
// it), unless KeepFailedTakes: taken back from its lease when the lease has
// not reported it yet, or else refunded by the sweeper's next round (a
// refund that fails then is the backend's to report, and the give-back
// queue's to send again). What the backend did with what was sent it
// reports to Settle.
func (l *Limiter) failed(ops []rate.Op, results []algorithms.Result, steps []step) {
	if l.keepFailed {
		return
	}
	var back []rate.Op
	now := l.now()
	for i := range ops {
		if steps[i].kind != served || !results[i].Allowed || ops[i].Loosens() {
			continue
		}
		op := ops[i]
		op.Kind, op.Receipt, op.Hold = rate.Refund, results[i].Receipt, 0
		id := op.Identity()
		s := l.shard(id)
		s.mu.Lock()
		e := s.m[id]
		ok := false
		if e != nil {
			_, ok = e.unserve(&op, now)
		}
		s.mu.Unlock()
		if !ok {
			back = append(back, op)
		}
	}
	l.owe(back)
}

// Settle takes what became of the ops of failed calls, as the backend
// reports it (rate.Outcomes: the request path's builder has the Limiter
// follow it), and sees to the leases among them: a lease granted to no one
// (its take applied, its caller told the call failed) ends unused, and the
// settlements that certainly did not run, or that are safe to run twice,
// are sent again, by the sweeper's next round. Every lease's take and
// settlement is this layer's: no other op is a lease's.
func (l *Limiter) Settle(outs []rate.Outcome) {
	var again []rate.Op
	for _, o := range outs {
		op := o.Op
		switch {
		case op.Kind == rate.Settle:
			if o.Fate == rate.NotApplied || o.Fate == rate.Unknown && op.IdempotentRefund() {
				again = append(again, op)
			}
		case op.Leasing() && o.Fate == rate.Applied && o.Result.Allowed:
			again = append(again, rate.Op{Key: op.Key, Limit: op.Limit, Kind: rate.Settle, ID: op.ID, Tag: op.Tag,
				Leases: []algorithms.Lease{{Receipt: o.Result.Receipt, Hold: op.Hold, Size: op.Hits, Close: true}}})
		}
	}
	l.owe(again)
}

// owe leaves ops to the sweeper's next round.
func (l *Limiter) owe(ops []rate.Op) {
	if len(ops) == 0 {
		return
	}
	l.owedMu.Lock()
	l.owed = append(l.owed, ops...)
	l.owedMu.Unlock()
}

// leaseOp returns the take of a lease of k hits of op's limit, whose
// identity is id.
func (l *Limiter) leaseOp(op *rate.Op, id string, k uint64) rate.Op {
	one := *op
	one.ID, one.Hits, one.Hold = id, k, l.hold()
	one.Receipt = algorithms.Receipt{}
	return one
}

// takeAhead takes, in the background, the next lease of e's limit, with
// the settlement of what its leases served so far, and keeps it when the
// backend grants it. e is busy until then.
func (l *Limiter) takeAhead(e *entry) {
	id := e.id
	s := l.shard(id)
	s.mu.Lock()
	now := l.now()
	var ops []rate.Op
	if op := l.settle(e, false, now); op != nil {
		ops = append(ops, *op)
	}
	k := e.size(&e.op, 0, now, l.tau, l.minHits)
	if k > 0 {
		ops = append(ops, l.leaseOp(&e.op, id, k))
	}
	s.mu.Unlock()
	l.pending.Add(1)
	go func() {
		defer l.pending.Done()
		defer l.release([]*entry{e})
		ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
		defer cancel()
		if len(ops) == 0 {
			return
		}
		sent := l.now()
		got, err := l.next.Do(ctx, ops)
		if err != nil {
			return // what the backend did, it reports (Settle)
		}
		if k == 0 {
			return
		}
		lop := &ops[len(ops)-1]
		r := got[len(got)-1]
		at := l.now()
		l.follow(ops, got, sent, at)
		l.update(lop, func(e *entry) {
			if !r.Allowed {
				e.noteRoom(r)
				return
			}
			l.observer.ObserveLease(lop, Taken, lop.Hits)
			e.grant(lop, 0, r, sent, at, l.tau, &l.clock)
		})
	}()
}

// update runs f on the entry of op's limit, if it is still held.
func (l *Limiter) update(op *rate.Op, f func(*entry)) {
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
		e = &entry{id: id}
		s.m[id] = e
	}
	return e
}

func (l *Limiter) shard(id string) *shard {
	return &l.shards[maphash.String(l.seed, id)%leaseShards]
}

// backgroundTimeout bounds the calls made off the callers' path: the
// settlements of leases and the leases taken ahead.
const backgroundTimeout = time.Second

// send sends ops to the backend, once, within backgroundTimeout. A
// settlement that fails leaves its hits counted until its window passes or,
// for a token bucket, until its hold ends: under-admission, never more.
func (l *Limiter) send(ops []rate.Op) {
	if len(ops) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
	defer cancel()
	_, _ = l.next.Do(ctx, ops)
}

// sweep settles the leases that ended, and forgets the limits no one asked
// for lately, every quarter of a lease time until Close: a lease serves
// for τ and is held for h, so its settlement comes before its hold ends.
func (l *Limiter) sweep() {
	defer close(l.done)
	t := time.NewTicker(l.tau / 4)
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

// expire settles the leases that have ended at now on limits no call is
// under way on, sends what earlier calls left owed, and forgets the limits
// no one asked for lately.
func (l *Limiter) expire(now time.Time) {
	l.owedMu.Lock()
	ops := l.owed
	l.owed = nil
	l.owedMu.Unlock()
	var claimed []*entry
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for id, e := range s.m {
			if e.busy != nil {
				continue
			}
			if e.due(now) {
				if op := l.settle(e, false, now); op != nil {
					e.busy = make(chan struct{})
					ops = append(ops, *op)
					claimed = append(claimed, e)
				}
			}
			if e.idle(now) {
				delete(s.m, id)
			}
		}
		s.mu.Unlock()
	}
	if len(ops) == 0 {
		return
	}
	defer l.release(claimed)
	ctx, cancel := context.WithTimeout(context.Background(), backgroundTimeout)
	defer cancel()
	_, _ = l.next.Do(ctx, ops) // what a failed call did, the backend reports (Settle)
}

// idleAfter is how long a limit no one asks for is remembered.
const idleAfter = 10 * time.Second
