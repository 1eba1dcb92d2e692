package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// A binding run offers one limit of bindingLimit a second twice what it
// allows, at a fixed rate (an open loop: each call is sent at its time,
// whatever became of the others), through ratewarden's replicas, and checks
// from the times of the admitted answers that the limit was never passed
// and that what it allows was admitted.

// The shape of a binding run.
const (
	// bindingWindows is how many windows (of bindingWindow) a run lasts.
	bindingWindows = 10
	bindingWindow  = time.Second
	// bindingOffered is the offered load, as a multiple of the limit.
	bindingOffered = 2
	// bindingAdmittedTarget is the least share of what the limit allows
	// over the run that must be admitted.
	bindingAdmittedTarget = 0.95
	// bindingCallTimeout bounds one call: far above any answer's time, so
	// that a slow answer is measured, not turned into an error.
	bindingCallTimeout = 5 * time.Second
)

// bindingParams describes one binding run.
type bindingParams struct {
	// Addrs are the replicas' gRPC addresses, Conns the connections to
	// each; calls take the connections in turn.
	Addrs     []string
	Conns     int
	Algorithm algorithms.Algorithm
	RunID     string
	// Leases, when not nil, reads the replicas' lease counters before and
	// after the run.
	Leases *leaseReader
}

// bindingResult is what one binding run found.
type bindingResult struct {
	Algorithm string `json:"algorithm"`
	Replicas  int    `json:"replicas"`
	// NoLeases reports a control run, whose servers had no leases.
	NoLeases bool `json:"no_leases,omitempty"`
	// Limit is L per Window; a bucket's burst is L.
	Limit  uint64 `json:"limit"`
	Window string `json:"window"`
	// Rate is the calls offered per second, Seconds how long they were.
	Rate    float64 `json:"rate"`
	Seconds float64 `json:"seconds"`
	Sent    uint64  `json:"sent"`
	Allowed uint64  `json:"allowed"`
	Denied  uint64  `json:"denied"`
	Errors  uint64  `json:"errors"`
	// ErrorCodes counts the errors by gRPC code.
	ErrorCodes map[string]uint64 `json:"error_codes,omitempty"`
	FirstError string            `json:"first_error,omitempty"`
	// Late is the most a call was sent after its time, in µs: the open
	// loop's own lag.
	Late float64 `json:"late_us"`
	// Latencies of the answers, in µs.
	P50 float64 `json:"p50_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
	// Allows is what the limit allows over the run: L per window, or for
	// the bucket burst + L per window of the run.
	Allows float64 `json:"allows"`
	// Check is what the times of the admitted answers say of the limit.
	Check limitCheck `json:"check"`
	// Leases is what the replicas' leases did during the run.
	Leases *leaseCounts `json:"leases,omitempty"`
}

// admitted returns the share of what the limit allows that was admitted.
func (r *bindingResult) admitted() float64 {
	return quotient(float64(r.Allowed), r.Allows)
}

// failed reports whether the run got errors, or its open loop could not
// keep its rate (a call more than a tenth of a window late).
func (r *bindingResult) failed() bool {
	return r.Errors > 0 || r.Late > micros(bindingWindow/10)
}

// met reports whether the run met both targets: never above the limit, and
// at least bindingAdmittedTarget of what it allows admitted.
func (r *bindingResult) met() bool {
	return !r.failed() && !r.Check.Above && r.admitted() >= bindingAdmittedTarget
}

// runBinding makes one binding run of p's algorithm: bindingOffered ×
// bindingLimit calls a window for bindingWindows windows, from the start of
// a window, all for one value of the binding rule.
func runBinding(ctx context.Context, p bindingParams) (*bindingResult, error) {
	conns, err := dialAll(p.Addrs, p.Conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	clients := make([]rlsv3.RateLimitServiceClient, len(conns))
	for i, c := range conns {
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
		// Connect, with a call for a value of its own, before the run.
		warm := bindingRequest(p.Algorithm, liveValuePrefix+p.RunID+".warm")
		if _, _, err := decide(ctx, clients[i], warm); err != nil {
			return nil, fmt.Errorf("loadgen: binding run: %w", err)
		}
	}
	var leasesBefore leaseCounts
	if p.Leases != nil {
		if leasesBefore, err = p.Leases.read(); err != nil {
			return nil, err
		}
	}

	r := &bindingResult{Algorithm: p.Algorithm.String(), Replicas: len(p.Addrs), Limit: bindingLimit, Window: bindingWindow.String(),
		Rate: bindingOffered * bindingLimit / bindingWindow.Seconds(), Seconds: (bindingWindows * bindingWindow).Seconds()}
	req := bindingRequest(p.Algorithm, bindingValuePrefix+p.RunID+".0")
	calls := bindingOffered * bindingLimit * bindingWindows
	interval := bindingWindow / (bindingOffered * bindingLimit)
	tally := &bindingTally{hist: NewHistogram(), codes: map[string]uint64{}, spans: make([]span, 0, calls)}
	// Start at the start of a window (the windows are aligned to the
	// epoch), at least a tenth of one away.
	w := bindingWindow.Nanoseconds()
	start := time.Unix(0, (time.Now().Add(bindingWindow/10).UnixNano()/w+1)*w)
	var wg sync.WaitGroup
	late := offer(ctx, start, calls, interval, func(k int) {
		client := clients[k%len(clients)]
		wg.Go(func() { tally.call(ctx, client, req) })
	})
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("loadgen: binding run interrupted: %w", ctx.Err())
	}
	if p.Leases != nil {
		if r.Leases, err = p.Leases.readSince(leasesBefore); err != nil {
			return nil, err
		}
	}
	r.Sent, r.Allowed, r.Denied, r.Errors = uint64(calls), tally.allowed, tally.denied, tally.errors
	if len(tally.codes) > 0 {
		r.ErrorCodes = tally.codes
	}
	r.FirstError, r.Late = tally.firstErr, micros(late)
	r.P50, r.P99, r.Max = micros(tally.hist.Quantile(0.5)), micros(tally.hist.Quantile(0.99)), micros(tally.hist.Max())
	r.Allows, r.Check = bindingVerdict(p.Algorithm, tally.spans)
	return r, nil
}

// offer calls send(k) for k from 0 to n−1, each at start + k·interval
// whatever became of the calls before it (an open loop), and returns the
// most a call was made after its time: the loop's own lag. It stops early
// when ctx ends.
func offer(ctx context.Context, start time.Time, n int, interval time.Duration, send func(k int)) (late time.Duration) {
	for k := range n {
		due := start.Add(time.Duration(k) * interval)
		if wait := time.Until(due); wait > 0 {
			if !sleep(ctx, wait) {
				break
			}
		}
		late = max(late, time.Since(due))
		send(k)
	}
	return late
}

// bindingVerdict returns what the binding limit of alg allows over a run,
// and the check of the admitted answers' spans against it (see
// limitVerdict).
func bindingVerdict(alg algorithms.Algorithm, spans []span) (allows float64, c limitCheck) {
	return limitVerdict(alg, spans, bindingLimit, bindingWindow, bindingWindows)
}

// limitVerdict returns what a limit of alg, of limit per window (the
// token bucket: a bucket of limit refilling limit per window), allows over
// a run of windows windows from the start of one, and the check of the
// admitted answers' spans against it: the windows for the fixed window and
// the sliding window counter (which never lets the count of its current
// window pass L), every W for the log, burst + rate·t for the bucket.
func limitVerdict(alg algorithms.Algorithm, spans []span, limit uint64, window time.Duration, windows int) (allows float64, c limitCheck) {
	w := window.Nanoseconds()
	allows = float64(limit) * float64(windows)
	switch alg {
	case algorithms.SlidingWindowLog:
		c = checkSlidingWindows(spans, w, limit)
	case algorithms.TokenBucket:
		allows += float64(limit) // the burst, which the bucket starts with
		c = checkTokenBucket(spans, limit, limit, w)
	default:
		c = checkFixedWindows(spans, w, limit)
	}
	return allows, c
}

// bindingRequest returns a request of one descriptor: alg's key, value.
func bindingRequest(alg algorithms.Algorithm, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: defaultDomain,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: alg.String(), Value: value},
		}}},
	}
}

// bindingTally counts the answers of a binding run and keeps the span of
// every admitted one. It is safe for concurrent use.
type bindingTally struct {
	mu                      sync.Mutex
	hist                    *Histogram
	allowed, denied, errors uint64
	codes                   map[string]uint64
	firstErr                string
	spans                   []span
}

// call sends req and counts its answer.
func (t *bindingTally) call(ctx context.Context, client rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) {
	ctx, cancel := context.WithTimeout(ctx, bindingCallTimeout)
	defer cancel()
	send := time.Now()
	allowed, _, err := decide(ctx, client, req)
	recv := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.errors++
		t.codes[errorCode(err)]++
		if t.firstErr == "" {
			t.firstErr = err.Error()
		}
		return
	}
	t.hist.Record(recv.Sub(send))
	if allowed == 1 {
		t.allowed++
		t.spans = append(t.spans, span{Send: send.UnixNano(), Recv: recv.UnixNano()})
	} else {
		t.denied++
	}
}

// summary is a binding run's progress line.
func (r *bindingResult) summary() string {
	return fmt.Sprintf("%d sent, %d admitted (%.1f%% of %.0f allowed), %s, late %s, p99 %s, errors %d%s",
		r.Sent, r.Allowed, 100*r.admitted(), r.Allows, r.Check.describe(), fmtMicros(r.Late), fmtMicros(r.P99), r.Errors, r.Leases.describe())
}

// describe says what a check found, in a few words.
func (c limitCheck) describe() string {
	verdict := "never above"
	if c.Above {
		verdict = "**above the limit**"
	}
	switch c.Kind {
	case checkWindows:
		return fmt.Sprintf("most in a window %.0f certain, %.0f with the %d straddling assigned: %s", c.Certain, c.Loose, c.Straddling, verdict)
	case checkSliding:
		return fmt.Sprintf("most in a W %.0f certain, %.0f possible: %s", c.Certain, c.Loose, verdict)
	}
	return fmt.Sprintf("most above burst + rate·t %.2f certain, %.2f possible: %s", c.Certain, c.Loose, verdict)
}

// describe says what leases did, for a progress line; "" for none read.
func (c *leaseCounts) describe() string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(", leases %.0f (%.0f hits, %.0f served, %.0f given back)", c.Taken, c.Leased, c.Served, c.GivenBack)
}

// writeBindingLine writes one binding run's progress line to w.
func writeBindingLine(w io.Writer, round, rounds int, r *bindingResult) {
	leases := "leases on "
	if r.NoLeases {
		leases = "leases off"
	}
	fmt.Fprintf(w, "[run %d/%d] binding %-22s %s %s\n", round, rounds, r.Algorithm, leases, r.summary())
}
