package redisx

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer runs the script calls of concurrent Do calls together: a fixed
// number of workers each take the calls waiting at the moment they are free
// and send them all in one pipeline (one per node in a cluster), so that many
// requests share one write and one read instead of a round trip each. A
// request that finds a worker idle is sent at once: coalescing adds no wait,
// it only gathers what is already waiting. It is safe for concurrent use.
type coalescer struct {
	client  redis.UniversalClient
	retries int // see execScripts
	queue   chan *batch
	stop    chan struct{}
	done    chan struct{}
}

// errClosed is returned by a closed Limiter.
var errClosed = errors.New("redisx: limiter closed")

// maxCoalesced bounds the calls one pipeline carries.
const maxCoalesced = 256

// batch is the calls of one Do, and where their outcome goes.
type batch struct {
	ctx   context.Context
	calls []*scriptCall
	err   chan error
}

// newCoalescer starts workers goroutines sending calls through client.
func newCoalescer(client redis.UniversalClient, workers int) *coalescer {
	c := &coalescer{
		client:  client,
		retries: clientRetries(client),
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

// run sends calls in a pipeline shared with whatever else is waiting, and
// returns their first failure. It returns ctx's error as soon as ctx ends;
// the calls may still be sent.
func (c *coalescer) run(ctx context.Context, calls []*scriptCall) error {
	select {
	case <-c.stop:
		return errClosed
	default:
	}
	b := &batch{ctx: ctx, calls: calls, err: make(chan error, 1)}
	select {
	case c.queue <- b:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return errClosed
	}
	select {
	case err := <-b.err:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		// Closed with this batch still queued: no worker will send it.
		select {
		case err := <-b.err:
			return err
		default:
			return errClosed
		}
	}
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
// appending them to calls, and tells each batch its outcome. The pipeline may
// take until the latest deadline among the batches: each caller still stops
// waiting at its own.
func (c *coalescer) send(batches []*batch, calls []*scriptCall) []*scriptCall {
	var latest time.Time
	unbounded := false
	live := batches[:0]
	for _, b := range batches {
		if err := b.ctx.Err(); err != nil {
			b.err <- err
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
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	execScripts(ctx, c.client, calls, c.retries)
	for _, b := range live {
		b.err <- callsError(b.calls)
	}
	return calls
}

// close stops the workers once the batches they are sending are done.
func (c *coalescer) close() {
	close(c.stop)
	<-c.done
}
