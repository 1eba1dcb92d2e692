package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Observer is told what the gate sheds and how many requests it lets have
// calls under way, for metrics. Implementations MUST be safe for concurrent
// use and should be quick.
type Observer interface {
	// ObserveShed is called once per request shed before it reached the
	// backend (see ErrShed).
	ObserveShed(ShedReason)
	// ObserveInflightLimit is called with the limit of requests with calls
	// under way, at start and whenever it changes.
	ObserveInflightLimit(int)
}

// Options configure New.
type Options struct {
	// MaxInflight fixes how many requests may have calls under way at
	// once; 0 adapts the limit to what the backend answers in time (see
	// gate). Requests beyond it wait, and are shed when they could no
	// longer be answered before their deadline.
	MaxInflight int
	// Observer is told every request shed and every change of the limit;
	// nil observes nothing.
	Observer Observer
}

// Limiter is a Limiter that admits calls to the Limiter it wraps through an
// admission gate: a call takes a slot for as long as it is under way, waits
// for one while the backend carries as much as it should, and is shed, with
// an error matching ErrShed, when it could no longer be answered before its
// context's deadline. A call that only gives room back (refunds and
// settlements: every op Loosens) goes through at once, without a slot: it
// follows a take the gate let through (the refund of what a denied request
// took, the settlement of a lease), so there are never more of them than
// calls it admitted, and shedding it would leave hits counted that no
// request holds. The gate learns the backend's latency from the calls it
// lets through. Deadlines are on the wall clock, as contexts' are. It is
// safe for concurrent use.
type Limiter struct {
	next     rate.Limiter
	gate     *gate
	observer Observer
}

// DefaultOptions returns the Options of a server's admission gate: a limit
// that adapts to what the backend answers in time.
func DefaultOptions() Options { return Options{} }

// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	if o.MaxInflight < 0 {
		return fmt.Errorf("admission: %w", option.Errorf("MaxInflight", "must not be negative, not %d", o.MaxInflight))
	}
	return nil
}

// New returns a Limiter with a gate as opts say in front of next, or the
// error of opts.Validate.
func New(next rate.Limiter, opts Options) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	return &Limiter{next: next, gate: newGate(opts.MaxInflight, opts.Observer.ObserveInflightLimit), observer: opts.Observer}, nil
}

// Do passes ops to the wrapped Limiter once the call holds a slot, or at
// once when every op gives room back. A call that is shed, or whose caller
// goes away while it waits, gets an error matching rate.ErrNotSent:
// none of its ops reached the backend.
//
// Its frame stays on the stack while the backend decides: the work before
// the call and after it is done in functions of their own (enter,
// observe), whose locals are not part of it.
func (l *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	held, err := l.enter(ctx, ops)
	if err != nil {
		return nil, err
	}
	if held {
		defer l.gate.release(time.Now())
	}
	began := time.Now()
	results, err := l.next.Do(ctx, ops)
	l.observe(ctx, began, err)
	return results, err
}

// enter takes a slot for a call of ops, unless every op gives room back,
// and reports whether it took one. It returns the error of a call that is
// shed or whose caller goes away while it waits.
//
//go:noinline
func (l *Limiter) enter(ctx context.Context, ops []rate.Op) (held bool, err error) {
	if givesBack(ops) {
		return false, nil
	}
	reason, err := l.gate.acquire(ctx, time.Now())
	if err != nil {
		if errors.Is(err, ErrShed) {
			l.observer.ObserveShed(reason)
		}
		return false, rate.NotSent(err)
	}
	return true, nil
}

// givesBack reports whether every op of a call gives room back.
func givesBack(ops []rate.Op) bool {
	for i := range ops {
		if !ops[i].Loosens() {
			return false
		}
	}
	return len(ops) > 0
}

// observe tells the gate how long a call that began at began took to end
// with err.
//
//go:noinline
func (l *Limiter) observe(ctx context.Context, began time.Time, err error) {
	// A call that never reached the backend, or whose caller went away,
	// says nothing of the backend's latency.
	if kind := rate.Classify(ctx, err); kind != rate.FailureCanceled && !errors.Is(err, rate.ErrNotSent) {
		now := time.Now()
		l.gate.observe(now.Sub(began), kind == rate.FailureTimeout, now)
	}
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) ObserveShed(ShedReason)   {}
func (nopObserver) ObserveInflightLimit(int) {}
