package redisx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/rate"
)

// coalescer runs the script calls of concurrent Do calls together: a fixed
// number of workers each take the calls waiting at the moment they are free
// and send them all in one pipeline (one per node in a cluster), so that many
// requests share one write and one read instead of a round trip each. A
// request that finds a worker idle is sent at once: coalescing adds no wait,
// it only gathers what is already waiting.
//
// A caller stops waiting at its own deadline, but its pipeline waits for
// its answers up to grace longer, so that what became of the calls of a
// caller that gave up is known and reported. A batch whose caller is gone
// before it is sent is not sent at all. It is safe for concurrent use.
type coalescer struct {
	client  redis.UniversalClient
	retries int // see execScripts
	grace   time.Duration
	slack   time.Duration // see counterCall.process
	queue   chan *batch
	stop    chan struct{}
	done    chan struct{}
}

// errClosed is returned by a closed Limiter.
var errClosed = errors.New("redisx: limiter closed")

// maxCoalesced bounds the calls one pipeline carries.
const maxCoalesced = 256

// batch is the calls of one Do, and where their outcome goes. The zero
// value is ready for coalescer.run.
type batch struct {
	ctx   context.Context
	calls []*scriptCall
	// outcomes receives what became of the calls when they fail.
	outcomes *rate.Outcomes
	err      chan error
	// state is batchWaiting until the worker delivers the outcome
	// (batchDelivered) or the caller stops waiting (batchAbandoned),
	// whichever comes first.
	state atomic.Int32
}

// The states of a batch.
const (
	batchWaiting = iota
	batchDelivered
	batchAbandoned
)

// newCoalescer starts workers goroutines sending calls through client.
func newCoalescer(client redis.UniversalClient, workers int, grace, slack time.Duration) *coalescer {
	c := &coalescer{
		client:  client,
		retries: clientRetries(client),
		grace:   grace,
		slack:   slack,
		queue:   make(chan *batch, 4*maxCoalesced),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	finished := make(chan struct{}, workers)
	for range workers {
		go func() {
			c.work()
			finished <- struct{}{}
		}()
	}
	go func() {
		for range workers {
			<-finished
		}
		close(c.done)
	}()
	return c
}

// errChans holds the channels through which workers deliver outcomes, so
// that a decision need not make one: run returns a channel only when it is
// empty and no worker will send on it.
var errChans = sync.Pool{New: func() any { return make(chan error, 1) }}

// run sends calls in a pipeline shared with whatever else is waiting, using
// b, a new batch, and returns their first failure. It returns ctx's error as
// soon as ctx ends; calls already sent are then still waited for, and what
// became of them is reported to out once known. When it returns an error,
// what became of each call is reported to out, but after the coalescer was
// closed: nothing is sent then.
func (c *coalescer) run(ctx context.Context, calls []*scriptCall, b *batch, out *rate.Outcomes) error {
	b.ctx, b.calls, b.outcomes = ctx, calls, out
	b.err = errChans.Get().(chan error)
	// Whichever way run returns, b.err is empty and no worker will send on
	// it: a worker sends once, and only to a batch whose caller still waits
	// (deliver), which then receives it.
	defer errChans.Put(b.err)
	select {
	case <-c.stop:
		return errClosed
	default:
	}
	select {
	case c.queue <- b:
	case <-ctx.Done():
		return c.unsent(b, ctx.Err())
	case <-c.stop:
		return errClosed
	}
	select {
	case err := <-b.err:
		return c.delivered(b, err)
	case <-ctx.Done():
		if b.state.CompareAndSwap(batchWaiting, batchAbandoned) {
			return ctx.Err() // the worker reports
		}
		return c.delivered(b, <-b.err)
	case <-c.done:
		// Closed with this batch still queued: no worker will send it.
		select {
		case err := <-b.err:
			return c.delivered(b, err)
		default:
			return errClosed
		}
	}
}

// unsent reports the calls of b, which were never sent, and returns err.
func (c *coalescer) unsent(b *batch, err error) error {
	b.outcomes.Report(outcomesOf(b.calls, time.Now()))
	return err
}

// delivered returns the outcome err the caller of b was given, reporting
// the calls when it is a failure.
func (c *coalescer) delivered(b *batch, err error) error {
	if err != nil {
		b.outcomes.Report(outcomesOf(b.calls, time.Now()))
	}
	return err
}

// deliver gives b's caller its outcome err, or, when the caller stopped
// waiting, reports what became of its calls.
func (c *coalescer) deliver(b *batch, err error) {
	if b.state.CompareAndSwap(batchWaiting, batchDelivered) {
		b.err <- err
		return
	}
	b.outcomes.Report(outcomesOf(b.calls, time.Now()))
}

// work sends batches until the coalescer closes.
func (c *coalescer) work() {
	var batches []*batch
	var calls []*scriptCall
	for {
		select {
		case b := <-c.queue:
			batches = append(batches[:0], b)
		case <-c.stop:
			return
		}
		n := len(batches[0].calls)
	gather:
		for n < maxCoalesced {
			select {
			case b := <-c.queue:
				batches = append(batches, b)
				n += len(b.calls)
			default:
				break gather
			}
		}
		calls = c.send(batches, calls[:0])
		clear(batches)
		clear(calls)
	}
}

// send runs the calls of batches whose callers still wait in one pipeline,
// appending them to calls, and tells each batch its outcome. The pipeline
// may take until the latest deadline among the batches, and grace longer:
// each caller still stops waiting at its own.
func (c *coalescer) send(batches []*batch, calls []*scriptCall) []*scriptCall {
	var latest time.Time
	unbounded := false
	live := batches[:0]
	for _, b := range batches {
		if err := b.ctx.Err(); err != nil {
			c.deliver(b, err)
			continue
		}
		live = append(live, b)
		calls = append(calls, b.calls...)
		if d, ok := b.ctx.Deadline(); !ok {
			unbounded = true
		} else if d.After(latest) {
			latest = d
		}
	}
	if len(live) == 0 {
		return calls
	}
	ctx := context.Background()
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest.Add(c.grace))
		defer cancel()
	}
	execScripts(ctx, c.client, calls, c.retries, c.slack)
	for _, b := range live {
		c.deliver(b, callsError(b.calls))
	}
	return calls
}

// close stops the workers once the batches they are sending are done.
func (c *coalescer) close() {
	close(c.stop)
	<-c.done
}
