package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
)

// stopGrace is how long workers may take to finish their call in flight
// once the measurement ends, before those calls are cancelled.
const stopGrace = 10 * time.Second

// callFunc makes one call, or one pipelined round of calls, and says how
// many of the answers admitted and how many denied. A callFunc belongs to
// one worker and is never called concurrently with itself.
type callFunc func(ctx context.Context) (allowed, denied int, err error)

// phases says how long a measurement warms up and measures, and what it
// reports while it runs.
type phases struct {
	Warmup   time.Duration
	Duration time.Duration
	// Progress receives a line every second while measuring; nil for none.
	Progress io.Writer
	// Stats, when not nil, is read before and after measuring.
	Stats *statsReader
	// CPU, when not nil, is read before and after measuring.
	CPU *cpuMeter
	// Leases, when not nil, is read before and after measuring.
	Leases *leaseReader
}

// worker is one caller's counters. Only its own goroutine writes them; the
// progress line reads them concurrently.
type worker struct {
	hist    *Histogram
	allowed atomic.Uint64
	denied  atomic.Uint64
	errors  atomic.Uint64

	mu       sync.Mutex
	codes    map[string]uint64
	firstErr string
}

func (w *worker) failed(err error) {
	w.errors.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.codes == nil {
		w.codes = map[string]uint64{}
	}
	w.codes[errorCode(err)]++
	if w.firstErr == "" {
		w.firstErr = err.Error()
	}
}

// errorCode names the kind of err: its gRPC code, or "error".
func errorCode(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	return "error"
}

// measure runs one worker per call function until the phases are over: it
// warms up, then counts answers and latencies for ph.Duration (or until ctx
// ends) and returns what it counted, with the run's Redis cost when
// ph.Stats is set and what leases did when ph.Leases is. Calls that end during the warm-up, or after the
// measurement, are not counted.
func measure(ctx context.Context, ph phases, calls []callFunc) (*result, error) {
	if len(calls) == 0 {
		return nil, errors.New("loadgen: no callers")
	}
	if ph.Duration <= 0 {
		return nil, fmt.Errorf("loadgen: -duration %s must be positive", ph.Duration)
	}
	workers := make([]*worker, len(calls))
	for i := range workers {
		workers[i] = &worker{hist: NewHistogram()}
	}
	var measuring, stop atomic.Bool
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()
	var wg sync.WaitGroup
	for i, call := range calls {
		w := workers[i]
		wg.Go(func() {
			for !stop.Load() && callCtx.Err() == nil {
				start := time.Now()
				allowed, denied, err := call(callCtx)
				elapsed := time.Since(start)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					w.failed(err)
					continue
				}
				w.hist.Record(elapsed)
				w.allowed.Add(uint64(allowed))
				w.denied.Add(uint64(denied))
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	finish := func() {
		stop.Store(true)
		select {
		case <-done:
		case <-time.After(stopGrace):
			cancelCalls()
			<-done
		}
	}

	if !sleep(ctx, ph.Warmup) {
		finish()
		return nil, fmt.Errorf("loadgen: interrupted while warming up: %w", ctx.Err())
	}
	var before commandStats
	if ph.Stats != nil {
		var err error
		if before, err = ph.Stats.read(ctx); err != nil {
			finish()
			return nil, err
		}
	}
	var cpuBefore map[string]time.Duration
	if ph.CPU != nil {
		var err error
		if cpuBefore, err = ph.CPU.read(); err != nil {
			finish()
			return nil, err
		}
	}
	// The lease counters last before and first after, so that they count
	// the calls measured and few others.
	var leasesBefore leaseCounts
	if ph.Leases != nil {
		var err error
		if leasesBefore, err = ph.Leases.read(); err != nil {
			finish()
			return nil, err
		}
	}
	measuring.Store(true)
	start := time.Now()
	end := start.Add(ph.Duration)
	tick := time.NewTicker(time.Second)
	var last progressPoint
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			if !now.Before(end) {
				break loop
			}
			last = writeProgress(ph.Progress, workers, start, now, last)
		case <-time.After(time.Until(end)):
			break loop
		}
	}
	tick.Stop()
	measuring.Store(false)
	seconds := time.Since(start).Seconds()
	var cpuAfter map[string]time.Duration
	var cpuErr error
	if ph.CPU != nil {
		cpuAfter, cpuErr = ph.CPU.read()
	}
	var leases *leaseCounts
	var leasesErr error
	if ph.Leases != nil {
		leases, leasesErr = ph.Leases.readSince(leasesBefore)
	}
	finish()
	if err := errors.Join(cpuErr, leasesErr); err != nil {
		return nil, err
	}

	r := &result{Concurrency: len(calls), Seconds: seconds}
	total := NewHistogram()
	for _, w := range workers {
		w.hist.MergeInto(total)
		r.Allowed += w.allowed.Load()
		r.Denied += w.denied.Load()
		r.Errors += w.errors.Load()
		for code, n := range w.codes {
			if r.ErrorCodes == nil {
				r.ErrorCodes = map[string]uint64{}
			}
			r.ErrorCodes[code] += n
		}
		if r.FirstError == "" {
			r.FirstError = w.firstErr
		}
	}
	r.Decisions = r.Allowed + r.Denied
	r.Rate = float64(r.Decisions) / seconds
	r.setLatencies(total)
	if ph.CPU != nil {
		r.CPU = cpuPerDecision(cpuBefore, cpuAfter, r.Decisions)
	}
	if ph.Stats != nil {
		// A fresh context: the measurement stands even if ctx ended.
		statsCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		after, err := ph.Stats.read(statsCtx)
		if err != nil {
			return nil, err
		}
		r.Redis = newRedisCost(after.since(before), r.Decisions)
	}
	r.Leases = leases
	return r, nil
}

// progressPoint is what the previous progress line counted.
type progressPoint struct {
	at        time.Time
	decisions uint64
}

// writeProgress writes one line to w (when not nil): the decisions per
// second since start and over the last interval, the p99 since start and
// the errors so far. It returns the point the next line starts from.
func writeProgress(w io.Writer, workers []*worker, start, now time.Time, last progressPoint) progressPoint {
	if w == nil {
		return last
	}
	if last.at.IsZero() {
		last.at = start
	}
	h := NewHistogram()
	var decisions, errs uint64
	for _, wk := range workers {
		wk.hist.MergeInto(h)
		decisions += wk.allowed.Load() + wk.denied.Load()
		errs += wk.errors.Load()
	}
	elapsed := now.Sub(start).Seconds()
	interval := now.Sub(last.at).Seconds()
	fmt.Fprintf(w, "%5.1fs  %8.0f decisions/s (last %.0fs: %8.0f/s)  p99 %-8s  errors %d\n",
		elapsed, float64(decisions)/elapsed, interval, float64(decisions-last.decisions)/interval,
		fmtMicros(micros(h.Quantile(0.99))), errs)
	return progressPoint{at: now, decisions: decisions}
}

// sleep waits for d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
