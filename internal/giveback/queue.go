// Package giveback is the give-back queue of the request path: it gives
// back, in the background, what the path's calls leave owed to the backend:
// the hits of takes that the backend admitted for callers that were told
// it failed, refunds whose calls failed, and charges (usage already spent)
// that could not be recorded with their request. It is not a layer of the
// path: it follows what the backend and the service report of the ops
// whose answers their callers could not use (rate.Outcomes).
package giveback

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Result says what became of hits owed back to the backend, or of a charge
// that could not be recorded with its request.
type Result uint8

// The results of give-backs.
const (
	// GivenBack is a refund that the queue got to the backend, or a
	// charge it recorded.
	GivenBack Result = iota
	// Dropped is a refund or charge that the queue dropped: the queue was
	// full, or its time limit passed first.
	Dropped
	// Uncertain is an op whose call failed after it was sent and that
	// cannot be sent again without risk: a take answered with the failure
	// mode error or deny, whose hits may stay counted, a refund that may
	// or may not have run and is not idempotent, or a charge that may have
	// been recorded.
	Uncertain
)

// Results lists every Result.
var Results = []Result{GivenBack, Dropped, Uncertain}

// String returns the result's label: "given_back", "dropped" or "uncertain".
func (r Result) String() string {
	switch r {
	case GivenBack:
		return "given_back"
	case Dropped:
		return "dropped"
	case Uncertain:
		return "uncertain"
	}
	return "unknown"
}

// Observer is told what became of what the queue owed the backend, for
// metrics. Implementations MUST be safe for concurrent use and should be
// quick.
type Observer interface {
	// ObserveGiveBack is called with n refunds that the queue gave back,
	// dropped, or could not tell had run, and with n takes it could not
	// tell had run (Uncertain).
	ObserveGiveBack(result Result, n int)
	// ObserveDeferredCharge is called with n charges that could not be
	// recorded with their request and that the queue recorded later
	// (GivenBack), dropped, or could not tell had run.
	ObserveDeferredCharge(result Result, n int)
}

// Options configure New. Size and Timeout must be set, as DefaultOptions
// sets them; the server's settings change what RLS_GIVE_BACK_* say.
type Options struct {
	// Size bounds the refunds waiting to be given back to the backend, and
	// the charges waiting to be recorded; at least 1.
	Size int
	// Timeout is how long a refund may wait to be given back, or a charge
	// to be recorded, before it is dropped; positive.
	Timeout time.Duration
	// KeepFailedTakes leaves counted the hits that the backend took for a
	// call that failed, rather than giving them back: right when the
	// caller of such a call answers its request as admitted (the failure
	// mode allow), wrong when it answers with an error or a denial.
	KeepFailedTakes bool
	// Observer is told what became of each op owed; nil observes nothing.
	Observer Observer
	// Logger receives the queue's logs; nil discards them.
	Logger *slog.Logger
}

// Queue keeps what the calls of the request path leave owed to the backend:
// refunds, and charges that could not be recorded at once. It learns what
// is owed by one route: what became of the ops whose answers their callers
// could not use, which the backend reports of failed calls, and the
// service of answers that came too late and of charges never sent, and
// which the Queue follows (Settle). A goroutine sends the queue's ops
// to the Limiter it was given, while there are any, and ends when the
// queue is empty. It is safe for concurrent use.
type Queue struct {
	next      rate.Limiter
	keepTakes bool
	limit     int
	ttl       time.Duration
	observer  Observer
	log       *slog.Logger

	mu      sync.Mutex
	queue   []giveBack
	running bool
	// sent holds the expiry of each op of the queue under way, by
	// giveBackKey, so that one that comes back (settle) keeps its time
	// limit.
	sent map[string]time.Time
}

// DefaultOptions returns the Options of a server's give-back queue: room
// for 10 000 ops owed, each kept for up to 10s while the backend fails.
func DefaultOptions() Options {
	return Options{Size: 10_000, Timeout: 10 * time.Second}
}

// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	switch {
	case o.Size <= 0:
		return fmt.Errorf("giveback: %w", option.Errorf("Size", "must be at least 1, not %d", o.Size))
	case o.Timeout <= 0:
		return fmt.Errorf("giveback: %w", option.Errorf("Timeout", "must be positive, not %s", o.Timeout))
	}
	return nil
}

// New returns a Limiter with a give-back queue as opts say in front of next,
// or the error of opts.Validate.
func New(next rate.Limiter, opts Options) (*Queue, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Queue{
		next: next, keepTakes: opts.KeepFailedTakes, limit: opts.Size, ttl: opts.Timeout,
		observer: opts.Observer, log: opts.Logger, sent: map[string]time.Time{},
	}, nil
}

// Settle takes what became of the ops whose answers their callers could
// not use (the backend reports those of failed calls, and the service
// those of answers that came too late and of charges never sent, see
// rate.Outcomes: the request path's builder has the Queue follow it), and
// queues what is owed:
//
//   - an admitted take is given back with its receipt, so that only
//     admitted answers keep hits, unless KeepFailedTakes (the failure mode
//     allow answered the request as admitted, and its hits stay); a
//     lease's take is not: its holder settles it;
//   - a refund with a receipt (a denied request's give-back, or one of
//     this queue's) that certainly did not run is sent again, and so is
//     one that may have run when running it twice changes nothing (a
//     sliding window log's, which removes exactly the receipt's entries);
//     a counter's refund that may have run is not, since a second one
//     would over-admit;
//   - a charge is usage already spent, which stays recorded whatever
//     became of its caller: one that certainly did not run is recorded
//     later; one that may have run is not sent again, since a second one
//     would count it twice.
//
// The observer counts what is given back (or, of charges, recorded),
// dropped and left uncertain. It is quick: it never waits for the backend.
func (l *Queue) Settle(outcomes []rate.Outcome) {
	now := time.Now()
	uncertain, uncertainCharges := 0, 0
	for _, o := range outcomes {
		op := o.Op
		switch {
		case op.Hits == 0:
		case op.Kind == rate.Charge:
			switch o.Fate {
			case rate.Applied:
				l.ran(op)
			case rate.NotApplied:
				l.add(op, now)
			default:
				l.forget(op)
				uncertainCharges++
			}
		case op.Kind == rate.Take:
			if l.keepTakes || op.Leasing() {
				// A lease's take is its holder's to settle (the lease
				// layer ends a lease granted to no one): a refund of it
				// too would give its hits back twice.
				continue
			}
			switch {
			case o.Fate == rate.Applied && o.Result.Allowed:
				op.Kind, op.Receipt = rate.Refund, o.Result.Receipt
				l.add(op, now)
			case o.Fate == rate.Unknown:
				uncertain++
			}
		case op.Receipt != (algorithms.Receipt{}):
			switch {
			case o.Fate == rate.Applied:
				l.ran(op)
			case o.Fate == rate.NotApplied, op.IdempotentRefund():
				l.add(op, now)
			default:
				l.forget(op)
				uncertain++
			}
		}
	}
	if uncertain > 0 {
		l.observer.ObserveGiveBack(Uncertain, uncertain)
	}
	if uncertainCharges > 0 {
		l.observer.ObserveDeferredCharge(Uncertain, uncertainCharges)
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

// giveBack is one refund in the queue.
type giveBack struct {
	op      rate.Op
	expires time.Time
}

// giveBackKey identifies a refund by its limit and receipt, and a charge by
// its limit and hits. Two equal charges under way at once share a key: the
// second to come back gets a time limit of its own.
func giveBackKey(op rate.Op) string {
	if op.Kind == rate.Charge {
		return op.Identity() + "|charge|" + strconv.FormatUint(op.Hits, 10)
	}
	r := op.Receipt
	return op.Identity() + "|" + strconv.FormatInt(r.At, 10) + "|" +
		strconv.FormatUint(r.Seq, 10) + "|" + strconv.FormatUint(uint64(r.Shard), 10)
}

// observe tells the observer what became of n ops of the queue, charges or
// refunds.
func (l *Queue) observe(charge bool, r Result, n int) {
	switch {
	case n == 0:
	case charge:
		l.observer.ObserveDeferredCharge(r, n)
	default:
		l.observer.ObserveGiveBack(r, n)
	}
}

// observeOps tells the observer what became of ops, charges and refunds
// apart.
func (l *Queue) observeOps(ops []rate.Op, r Result) {
	charges := 0
	for _, op := range ops {
		if op.Kind == rate.Charge {
			charges++
		}
	}
	l.observe(true, r, charges)
	l.observe(false, r, len(ops)-charges)
}

// add queues refund or charge op at now: within the time limit of its first
// try when it is one of the queue's that came back, else within a new one.
func (l *Queue) add(op rate.Op, now time.Time) {
	key := giveBackKey(op)
	l.mu.Lock()
	expires, again := l.sent[key]
	delete(l.sent, key)
	if !again {
		expires = now.Add(l.ttl)
	}
	if !now.Before(expires) || len(l.queue) >= l.limit {
		l.mu.Unlock()
		l.observe(op.Kind == rate.Charge, Dropped, 1)
		return
	}
	l.queue = append(l.queue, giveBack{op: op, expires: expires})
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go l.work()
	}
}

// ran records that op, one of the queue's, reached the backend although its
// call failed.
func (l *Queue) ran(op rate.Op) {
	key := giveBackKey(op)
	l.mu.Lock()
	_, ours := l.sent[key]
	delete(l.sent, key)
	l.mu.Unlock()
	if ours {
		l.observe(op.Kind == rate.Charge, GivenBack, 1)
	}
}

// forget stops tracking op, which will not be sent again.
func (l *Queue) forget(op rate.Op) {
	l.mu.Lock()
	delete(l.sent, giveBackKey(op))
	l.mu.Unlock()
}

// work sends the queue's ops, a batch per backend call, until the queue is
// empty.
func (l *Queue) work() {
	for {
		ops, keys := l.batch(time.Now())
		if ops == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), giveBackCallTimeout)
		_, err := l.next.Do(ctx, ops)
		cancel()
		if err == nil {
			l.mu.Lock()
			for _, k := range keys {
				delete(l.sent, k)
			}
			l.mu.Unlock()
			l.observeOps(ops, GivenBack)
			continue
		}
		// What became of each op the backend reports (Settle), which
		// queues again those that may be sent again.
		l.log.Debug("give-back to the backend failed", "ops", len(ops), "err", err)
		time.Sleep(giveBackPause)
	}
}

// batch takes the next batch of ops from the queue, dropping those whose
// time limit has passed at now, and records them as under way; it returns
// nil, and marks the worker stopped, when the queue is empty.
func (l *Queue) batch(now time.Time) ([]rate.Op, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ops, expired []rate.Op
	var keys []string
	i := 0
	for ; i < len(l.queue) && len(ops) < giveBackBatch; i++ {
		gb := l.queue[i]
		if !now.Before(gb.expires) {
			expired = append(expired, gb.op)
			continue
		}
		key := giveBackKey(gb.op)
		l.sent[key] = gb.expires
		ops = append(ops, gb.op)
		keys = append(keys, key)
	}
	l.queue = append(l.queue[:0], l.queue[i:]...)
	l.observeOps(expired, Dropped)
	if len(ops) == 0 {
		l.running = false
		// Refunds under way whose outcome never came back (a limiter that
		// reports none) are forgotten once their time limit has passed.
		for k, exp := range l.sent {
			if !now.Before(exp) {
				delete(l.sent, k)
			}
		}
		return nil, nil
	}
	return ops, keys
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) ObserveGiveBack(Result, int)       {}
func (nopObserver) ObserveDeferredCharge(Result, int) {}
