package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// modeRLS names runs of ShouldRateLimit calls.
const modeRLS = "rls"

// loadParams describes one run of ShouldRateLimit calls.
type loadParams struct {
	// Addrs are the servers' gRPC addresses: replicas of one service, over
	// which the callers spread.
	Addrs       []string
	Concurrency int
	// Conns is the number of gRPC connections to each server, which the
	// callers share round robin; Envoy keeps one per worker thread.
	Conns int
	Keys  int
	// Prefix starts the live values (liveValuePrefix when empty).
	Prefix   string
	Dist     string
	HotShare float64
	// Over is the share of requests sent to exhausted values.
	Over   float64
	Domain string
	Key    string
	// RunID prefixes every value, so that runs never share state.
	RunID string
	Seed  uint64
	phases
}

// validate reports the first parameter out of range.
func (p *loadParams) validate() error {
	switch {
	case len(p.Addrs) == 0:
		return errors.New("loadgen: -addr must name a server")
	case p.Concurrency < 1:
		return fmt.Errorf("loadgen: -concurrency %d must be at least 1", p.Concurrency)
	case p.Conns < 1:
		return fmt.Errorf("loadgen: -conns %d must be at least 1", p.Conns)
	case p.Keys < 1:
		return fmt.Errorf("loadgen: -keys %d must be at least 1", p.Keys)
	case !(p.Over >= 0 && p.Over <= 1):
		return fmt.Errorf("loadgen: -over %v is not in [0, 1]", p.Over)
	case p.Domain == "" || p.Key == "":
		return errors.New("loadgen: -domain and -key must not be empty")
	case strings.ContainsAny(p.RunID, ".*"):
		return fmt.Errorf("loadgen: -run-id %q must not contain '.' or '*'", p.RunID)
	}
	_, err := newKeyPicker(p.Dist, p.Keys, p.HotShare, rand.New(rand.NewPCG(0, 0)))
	return err
}

// runLoad sends ShouldRateLimit calls as p says and returns what it measured.
// When p.Over > 0 it first spends the limit of every exhausted value it may
// send (one call each, not measured).
func runLoad(ctx context.Context, p loadParams) (*result, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	conns, err := dialAll(p.Addrs, p.Conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	prefix := p.Prefix
	if prefix == "" {
		prefix = liveValuePrefix
	}
	ks := newKeySpace(prefix, p.RunID, p.Keys, p.Over > 0)
	if p.Over > 0 {
		if err := exhaust(ctx, p, conns, ks.exhausted); err != nil {
			return nil, err
		}
	}

	calls := make([]callFunc, p.Concurrency)
	for i := range calls {
		client := rlsv3.NewRateLimitServiceClient(conns[i%len(conns)])
		rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
		picker, err := newKeyPicker(p.Dist, p.Keys, p.HotShare, rng)
		if err != nil {
			return nil, err
		}
		calls[i] = rlsCaller(client, p.Domain, p.Key, ks, p.Over, picker, rng)
	}
	r, err := measure(ctx, p.phases, calls)
	if err != nil {
		return nil, err
	}
	r.Mode, r.Target, r.Domain, r.Key = modeRLS, strings.Join(p.Addrs, ","), p.Domain, p.Key
	r.Keys, r.Dist, r.Over, r.Conns = p.Keys, p.Dist, p.Over, p.Conns
	return r, nil
}

// dialAll opens conns gRPC connections to each address, interleaved, so
// that callers taking them round robin spread over the replicas.
func dialAll(addrs []string, conns int) ([]*grpc.ClientConn, error) {
	var out []*grpc.ClientConn
	for range conns {
		for _, a := range addrs {
			c, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				closeAll(out)
				return nil, fmt.Errorf("loadgen: %s: %w", a, err)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// closeAll closes conns.
func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// rlsCaller returns a worker's call: one ShouldRateLimit with one
// descriptor, for an exhausted value with probability over and a live value
// otherwise, the key's index drawn by picker. Its request is reused from
// call to call, which is safe because a worker makes one call at a time.
func rlsCaller(client rlsv3.RateLimitServiceClient, domain, key string, ks keySpace, over float64, picker keyPicker, rng *rand.Rand) callFunc {
	entry := &ratelimitv3.RateLimitDescriptor_Entry{Key: key}
	req := &rlsv3.RateLimitRequest{
		Domain:      domain,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry}}},
	}
	return func(ctx context.Context) (int, int, error) {
		values := ks.live
		if over > 0 && rng.Float64() < over {
			values = ks.exhausted
		}
		entry.Value = values[picker.pick()]
		return decide(ctx, client, req)
	}
}

// decide sends req and returns (1, 0) when it is admitted, (0, 1) when it
// is over the limit.
func decide(ctx context.Context, client rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) (int, int, error) {
	resp, err := client.ShouldRateLimit(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		return 1, 0, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return 0, 1, nil
	}
	return 0, 0, fmt.Errorf("loadgen: answer with overall code %s", resp.GetOverallCode())
}

// exhaust spends the limit of each of values with one call, p.Concurrency
// calls at a time. Each must be answered (admitted the first time, denied if
// an earlier run with the same id spent it already).
func exhaust(ctx context.Context, p loadParams, conns []*grpc.ClientConn, values []string) error {
	begin := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, p.Concurrency)
	for i := range p.Concurrency {
		client := rlsv3.NewRateLimitServiceClient(conns[i%len(conns)])
		wg.Go(func() {
			entry := &ratelimitv3.RateLimitDescriptor_Entry{Key: p.Key}
			req := &rlsv3.RateLimitRequest{
				Domain:      p.Domain,
				Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{entry}}},
			}
			for {
				k := int(next.Add(1)) - 1
				if k >= len(values) || ctx.Err() != nil {
					return
				}
				entry.Value = values[k]
				if _, _, err := decide(ctx, client, req); err != nil {
					errs[i] = fmt.Errorf("loadgen: exhausting %s=%s: %w", p.Key, values[k], err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("loadgen: interrupted while exhausting: %w", ctx.Err())
	}
	if p.Progress != nil && len(values) > 1 {
		fmt.Fprintf(p.Progress, "exhausted %d values in %s\n", len(values), time.Since(begin).Round(time.Millisecond))
	}
	return nil
}

// writeRunHeader tells the person watching what the run does.
func writeRunHeader(w io.Writer, p loadParams) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "loadgen: %s/%s on %s, %d keys (%s), over %.0f%%, %d callers on %d connections to each server, warm-up %s, %s\n",
		p.Domain, p.Key, strings.Join(p.Addrs, ","), p.Keys, p.Dist, 100*p.Over, p.Concurrency, p.Conns, p.Warmup, p.Duration)
}
