package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Observer is told how the backend's calls go and how the breaker changes,
// for metrics. Implementations MUST be safe for concurrent use and should be
// quick.
type Observer interface {
	// ObserveBackend is called once per call to the Limiter, including the
	// calls the breaker refused.
	ObserveBackend(Call)
	// ObserveBreaker is called when the breaker changes state.
	ObserveBreaker(State)
}

// Call is one call to the backend.
type Call struct {
	// Duration is how long the call took; 0 when the breaker refused it.
	Duration time.Duration
	// Failure classifies the call's failure (rate.Classify);
	// rate.FailureCircuitOpen when the breaker refused it,
	// rate.FailureNone when it succeeded.
	Failure rate.Failure
}

// Options configure New. The zero value disables the breaker: calls are
// still timed and observed. An enabled breaker (Failures above 0) needs
// Probes and Cooldown set, as DefaultOptions sets them.
type Options struct {
	// Failures is how many consecutive failures of the backend open the
	// breaker, which then refuses every call at once for Cooldown; after
	// that Probes probe calls go through at once, and the first success
	// closes it. A timeout is a failure only when no other call succeeded
	// while it waited: the backend answered nothing. 0 disables the
	// breaker.
	Failures int
	// Probes is how many probe calls a half-open breaker lets through at
	// once, and how many of them must fail to open it again; at least 1
	// when the breaker is enabled.
	Probes int
	// Cooldown is how long the breaker stays open; positive when the
	// breaker is enabled.
	Cooldown time.Duration
	// Grace is how long the backend keeps waiting for the answers of calls
	// whose callers gave up (for Redis, its read timeout) and reports them
	// (rate.Outcomes, to Answered). The breaker judges a timeout that long after it
	// happened: one that the backend answered by then, or after which it
	// answered another call, is no failure. 0 judges a timeout when it
	// happens, for a backend that reports no late answers.
	Grace time.Duration
	// Now is the clock of the breaker and of the calls' durations; nil
	// means time.Now.
	Now func() time.Time
	// Observer is told every call and every change of state; nil observes
	// nothing.
	Observer Observer
	// Logger receives the breaker's changes of state; nil discards them.
	Logger *slog.Logger
}

// validate reports an option that is negative, or unset where an enabled
// breaker needs it.
// Validate returns an error naming the first field of o that New refuses.
func (o Options) Validate() error {
	var err error
	switch {
	case o.Failures < 0:
		err = option.Errorf("Failures", "must not be negative, not %d", o.Failures)
	case o.Probes < 0:
		err = option.Errorf("Probes", "must not be negative, not %d", o.Probes)
	case o.Cooldown < 0:
		err = option.Errorf("Cooldown", "must not be negative, not %s", o.Cooldown)
	case o.Grace < 0:
		err = option.Errorf("Grace", "must not be negative, not %s", o.Grace)
	case o.Failures > 0 && o.Probes == 0:
		err = option.Errorf("Probes", "must be at least 1 for a breaker that opens after %d failures", o.Failures)
	case o.Failures > 0 && o.Cooldown == 0:
		err = option.Errorf("Cooldown", "must be positive for a breaker that opens after %d failures", o.Failures)
	}
	if err != nil {
		return fmt.Errorf("breaker: %w", err)
	}
	return nil
}

// DefaultOptions returns the Options of a server's breaker: it opens after
// 20 failures in a row, for a second, and then lets 3 probes through at
// once. 20: a master lost from a Redis Cluster of three fails about a third
// of the calls, and 20 of them in a row come with a probability of
// (1/3)^20, a few in ten billion, so the breaker opens when nearly every
// call fails, not while one master of several is failed over. Three probes
// keep the one probe that a busy host happens to hold up from costing
// another cool-down, while a backend that is down costs three timeouts per
// cool-down instead of one. Grace is 0: the server sets it from its
// backend.
func DefaultOptions() Options {
	return Options{Failures: 20, Probes: 3, Cooldown: time.Second}
}

// Limiter is a Limiter with a circuit breaker in front of the Limiter it
// wraps: while the breaker is open it refuses calls without calling the
// backend, with an error matching rate.ErrCircuitOpen and
// rate.ErrNotSent; it tells its Observer the duration and the
// kind of failure of every call. It is safe for concurrent use.
type Limiter struct {
	next    rate.Limiter
	breaker *breaker // nil when disabled
	opts    Options  // with a clock, an observer and a logger in place of nil
}

// New returns a Limiter with a breaker as opts say in front of next.
// Options that are not valid (see Options) are an error naming the option.
func New(next rate.Limiter, opts Options) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{next: next, opts: opts}
	l.breaker = newBreaker(opts.Failures, opts.Probes, opts.Cooldown, opts.Grace, l.changed)
	return l, nil
}

// Do calls the wrapped Limiter unless the breaker is open, and tells the
// breaker and the observer how the call went. Calls whose callers went
// away, and calls with a limit no backend could enforce, say nothing about
// the backend's health. The answers the backend reads after the call failed
// count as answers, when it reports them (Answered): the backend was
// answering.
//
// Its frame stays on the stack while the backend decides: what is done
// after the call is done in a function of its own (done), whose locals are
// not part of it.
func (l *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	ticket, ok := l.breaker.allow(l.opts.Now())
	if !ok {
		return nil, l.refused()
	}
	results, err := l.next.Do(ctx, ops)
	return l.done(ctx, &ticket, results, err)
}

// refused tells the observer of a call the open breaker refused, and
// returns its error.
//
//go:noinline
func (l *Limiter) refused() error {
	l.opts.Observer.ObserveBackend(Call{Failure: rate.FailureCircuitOpen})
	return rate.NotSent(rate.ErrCircuitOpen)
}

// done tells the breaker and the observer how the call that ticket let
// through went, and returns its answer.
//
//go:noinline
func (l *Limiter) done(ctx context.Context, ticket *breakerTicket, results []algorithms.Result, err error) ([]algorithms.Result, error) {
	end := l.opts.Now()
	kind := rate.Classify(ctx, err)
	switch {
	case kind == rate.FailureNone:
		l.breaker.success(*ticket, end)
	case kind == rate.FailureCanceled, errors.Is(err, algorithms.ErrInvalidLimit):
		l.breaker.abandon(*ticket)
	default:
		l.breaker.failure(*ticket, end, kind == rate.FailureTimeout)
	}
	l.opts.Observer.ObserveBackend(Call{Duration: end.Sub(ticket.start), Failure: kind})
	return results, err
}

// State returns the breaker's state; Closed when it is disabled.
func (l *Limiter) State() State { return l.breaker.current() }

// Answered tells the breaker of the answers among outcomes, which the
// backend reports (rate.Outcomes): it answered those calls, although their
// callers had stopped waiting. The request path's builder has it follow
// the backend's Outcomes.
func (l *Limiter) Answered(outcomes []rate.Outcome) {
	for _, o := range outcomes {
		if o.Fate == rate.Applied {
			l.breaker.answered(o.At)
		}
	}
}

// changed logs and reports a change of the breaker's state: opening and
// closing at warn and info, the probes of an outage (once per cool-down) at
// debug.
func (l *Limiter) changed(from, to State) {
	switch {
	case to == Open && from == Closed:
		l.opts.Logger.Warn("backend circuit breaker opened: answering with the failure mode without calling the backend",
			"failures", l.opts.Failures, "cooldown", l.opts.Cooldown)
	case to == Open:
		l.opts.Logger.Debug("backend circuit breaker probes failed; open again", "probes", l.opts.Probes, "cooldown", l.opts.Cooldown)
	case to == HalfOpen:
		l.opts.Logger.Debug("backend circuit breaker half-open: probing the backend")
	case to == Closed:
		l.opts.Logger.Info("backend circuit breaker closed: the backend answers again")
	}
	l.opts.Observer.ObserveBreaker(to)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) ObserveBackend(Call)  {}
func (nopObserver) ObserveBreaker(State) {}
