package rls

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// GiveBackResult says what became of hits the service owed back to the
// backend, or could not tell whether it owed.
type GiveBackResult uint8

// The results of give-backs.
const (
	// GivenBack is a refund that the give-back queue got to the backend.
	GivenBack GiveBackResult = iota
	// GiveBackDropped is a refund that the give-back queue dropped: the
	// queue was full, or its time limit passed first.
	GiveBackDropped
	// GiveBackUncertain is an op whose call failed after it was sent and
	// that cannot be sent again without risk: a take answered with the
	// failure mode error or deny, whose hits may stay counted, or a refund
	// that may or may not have run and is not idempotent.
	GiveBackUncertain
)

// GiveBackResults lists every GiveBackResult.
var GiveBackResults = []GiveBackResult{GivenBack, GiveBackDropped, GiveBackUncertain}

// String returns the result's label: "given_back", "dropped" or "uncertain".
func (r GiveBackResult) String() string {
	switch r {
	case GivenBack:
		return "given_back"
	case GiveBackDropped:
		return "dropped"
	case GiveBackUncertain:
		return "uncertain"
	}
	return "unknown"
}

// Settle takes what became of the ops of backend calls that failed (a
// Limiter that keeps waiting for the answers of callers that gave up
// reports them; see algorithms.Outcome), and gives back what the service
// owes:
//
//   - an admitted take whose caller was answered with the failure mode
//     error or deny is given back with its receipt, so that only admitted
//     answers keep hits (with the failure mode allow the answer admitted
//     the request, and its hits stay);
//   - a refund of the service's own (one with a receipt: a denied request's
//     give-back, or one of this queue's) that certainly did not run is sent
//     again, and so is one that may have run when running it twice changes
//     nothing (a sliding window log's, which removes exactly the receipt's
//     entries); a counter's refund that may have run is not, since a second
//     one would over-admit;
//   - a charge is usage already spent, which stays recorded whatever became
//     of its caller: one that certainly did not run is recorded later (see
//     Service.deferCharges); one that may have run is not sent again, since
//     a second one would count it twice.
//
// The refunds and charges go through a queue of at most
// Options.GiveBackQueue ops, each dropped when it could not be sent within
// Options.GiveBackTimeout; the observer counts what is given back (or, of
// charges, recorded), dropped and left uncertain. Any answer also tells the
// circuit breaker that the backend answers.
//
// Settle is safe for concurrent use and quick: it never waits for the
// backend.
func (s *Service) Settle(outcomes []algorithms.Outcome) {
	now := time.Now()
	uncertain, uncertainCharges := 0, 0
	for _, o := range outcomes {
		if o.Fate == algorithms.Applied {
			s.breaker.answered(o.At)
		}
		op := o.Op
		switch {
		case op.Hits == 0:
		case op.Charge:
			switch o.Fate {
			case algorithms.Applied:
				s.giveBacks.ran(op)
			case algorithms.NotApplied:
				s.giveBacks.add(op, now)
			default:
				s.giveBacks.forget(op)
				uncertainCharges++
			}
		case !op.Refund:
			if s.opts.FailureMode == FailAllow {
				continue
			}
			switch {
			case o.Fate == algorithms.Applied && o.Result.Allowed:
				op.Refund, op.Receipt = true, o.Result.Receipt
				s.giveBacks.add(op, now)
			case o.Fate == algorithms.Unknown:
				uncertain++
			}
		case op.Receipt != (algorithms.Receipt{}):
			switch {
			case o.Fate == algorithms.Applied:
				s.giveBacks.ran(op)
			case o.Fate == algorithms.NotApplied, op.IdempotentRefund():
				s.giveBacks.add(op, now)
			default:
				s.giveBacks.forget(op)
				uncertain++
			}
		}
	}
	if uncertain > 0 {
		s.observer.ObserveGiveBack(GiveBackUncertain, uncertain)
	}
	if uncertainCharges > 0 {
		s.observer.ObserveDeferredCharge(GiveBackUncertain, uncertainCharges)
	}
}

// deferCharges queues the charges among ops, which never reached the
// backend (the request was shed, or the circuit breaker was open), to be
// recorded as soon as the backend answers: a charge is usage already spent,
// and Envoy, which sends it once the stream is done, does not send it again.
func (s *Service) deferCharges(ops []algorithms.Op, now time.Time) {
	for _, op := range ops {
		if op.Charge && op.Hits > 0 {
			s.giveBacks.add(op, now)
		}
	}
}

// The give-back queue's fixed choices.
const (
	// giveBackBatch bounds the refunds of one backend call.
	giveBackBatch = 64
	// giveBackCallTimeout bounds one backend call of the queue.
	giveBackCallTimeout = 250 * time.Millisecond
	// giveBackPause is the wait after a failed call, so that a backend that
	// is down is not asked again at once.
	giveBackPause = 50 * time.Millisecond
)

// giveBacks is the service's queue of what it owes the backend: refunds,
// and charges it could not record at once (see Service.Settle). A goroutine
// sends them while there are any, and ends when the queue is empty. It is
// safe for concurrent use.
type giveBacks struct {
	s     *Service
	limit int
	ttl   time.Duration

	mu      sync.Mutex
	queue   []giveBack
	running bool
	// sent holds the expiry of each refund under way, by giveBackKey, so
	// that one that comes back (Settle) keeps its time limit.
	sent map[string]time.Time
}

// giveBack is one refund in the queue.
type giveBack struct {
	op      algorithms.Op
	expires time.Time
}

func newGiveBacks(s *Service, limit int, ttl time.Duration) *giveBacks {
	return &giveBacks{s: s, limit: limit, ttl: ttl, sent: map[string]time.Time{}}
}

// giveBackKey identifies a refund by its limit and receipt, and a charge by
// its limit and hits. Two equal charges under way at once share a key: the
// second to come back gets a time limit of its own.
func giveBackKey(op algorithms.Op) string {
	if op.Charge {
		return op.Identity() + "|charge|" + strconv.FormatUint(op.Hits, 10)
	}
	r := op.Receipt
	return op.Identity() + "|" + strconv.FormatInt(r.At, 10) + "|" +
		strconv.FormatUint(r.Seq, 10) + "|" + strconv.FormatUint(uint64(r.Shard), 10)
}

// observe tells the observer what became of n ops of the queue, charges or
// refunds.
func (g *giveBacks) observe(charge bool, r GiveBackResult, n int) {
	switch {
	case n == 0:
	case charge:
		g.s.observer.ObserveDeferredCharge(r, n)
	default:
		g.s.observer.ObserveGiveBack(r, n)
	}
}

// observeOps tells the observer what became of ops, charges and refunds
// apart.
func (g *giveBacks) observeOps(ops []algorithms.Op, r GiveBackResult) {
	charges := 0
	for _, op := range ops {
		if op.Charge {
			charges++
		}
	}
	g.observe(true, r, charges)
	g.observe(false, r, len(ops)-charges)
}

// add queues refund or charge op at now: within the time limit of its first
// try when it is one of the queue's that came back, else within a new one.
func (g *giveBacks) add(op algorithms.Op, now time.Time) {
	key := giveBackKey(op)
	g.mu.Lock()
	expires, again := g.sent[key]
	delete(g.sent, key)
	if !again {
		expires = now.Add(g.ttl)
	}
	if !now.Before(expires) || len(g.queue) >= g.limit {
		g.mu.Unlock()
		g.observe(op.Charge, GiveBackDropped, 1)
		return
	}
	g.queue = append(g.queue, giveBack{op: op, expires: expires})
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go g.work()
	}
}

// ran records that op, one of the queue's, reached the backend although its
// call failed.
func (g *giveBacks) ran(op algorithms.Op) {
	key := giveBackKey(op)
	g.mu.Lock()
	_, ours := g.sent[key]
	delete(g.sent, key)
	g.mu.Unlock()
	if ours {
		g.observe(op.Charge, GivenBack, 1)
	}
}

// forget stops tracking op, which will not be sent again.
func (g *giveBacks) forget(op algorithms.Op) {
	g.mu.Lock()
	delete(g.sent, giveBackKey(op))
	g.mu.Unlock()
}

// work sends the queue's ops, a batch per backend call, until the queue is
// empty.
func (g *giveBacks) work() {
	for {
		ops, keys := g.next(time.Now())
		if ops == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), giveBackCallTimeout)
		_, err := g.s.limiter.Do(ctx, ops)
		cancel()
		if err == nil {
			g.mu.Lock()
			for _, k := range keys {
				delete(g.sent, k)
			}
			g.mu.Unlock()
			g.observeOps(ops, GivenBack)
			continue
		}
		// The limiter reports what became of each op (Settle), which
		// queues again those that may be sent again.
		g.s.log.Debug("give-back to the backend failed", "ops", len(ops), "err", err)
		time.Sleep(giveBackPause)
	}
}

// next takes the next batch of ops from the queue, dropping those whose
// time limit has passed at now, and records them as under way; it returns
// nil, and marks the worker stopped, when the queue is empty.
func (g *giveBacks) next(now time.Time) ([]algorithms.Op, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ops, expired []algorithms.Op
	var keys []string
	i := 0
	for ; i < len(g.queue) && len(ops) < giveBackBatch; i++ {
		gb := g.queue[i]
		if !now.Before(gb.expires) {
			expired = append(expired, gb.op)
			continue
		}
		key := giveBackKey(gb.op)
		g.sent[key] = gb.expires
		ops = append(ops, gb.op)
		keys = append(keys, key)
	}
	g.queue = append(g.queue[:0], g.queue[i:]...)
	g.observeOps(expired, GiveBackDropped)
	if len(ops) == 0 {
		g.running = false
		// Refunds under way whose outcome never came back (a limiter that
		// reports none) are forgotten once their time limit has passed.
		for k, exp := range g.sent {
			if !now.Before(exp) {
				delete(g.sent, k)
			}
		}
		return nil, nil
	}
	return ops, keys
}
