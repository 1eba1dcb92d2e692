package rls

import (
	"context"
	"strconv"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// BenchmarkShouldRateLimit measures one decision on the memory backend, the
// path every request takes, with its allocations (-benchmem): one descriptor
// of each algorithm, over 1 000 keys.
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := config.Parse([]config.File{{Name: "bench.yaml", Data: []byte(testLimits)}}, rlstest.Config())
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.New()
	b.Cleanup(mem.Close)
	opts := DefaultOptions()
	opts.BackendTimeout = 0
	svc := newService(b, mem, cfg, opts)
	for _, key := range []string{"fixed", "log", "counter", "bucket"} {
		b.Run(key, func(b *testing.B) {
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "test", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
					Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "k" + strconv.Itoa(i)}},
				}}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
