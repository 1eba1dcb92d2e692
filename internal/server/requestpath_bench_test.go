package server

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// benchLimits are limits no benchmark reaches, one per algorithm.
const benchLimits = `domain: bench
descriptors:
  - key: fixed_window
    rate_limit: {unit: day, requests_per_unit: 1000000000, algorithm: fixed_window}
  - key: sliding_window_log
    rate_limit: {unit: day, requests_per_unit: 100000, algorithm: sliding_window_log}
  - key: sliding_window_counter
    rate_limit: {unit: day, requests_per_unit: 1000000000, algorithm: sliding_window_counter}
  - key: token_bucket
    rate_limit: {unit: day, requests_per_unit: 1000000000, algorithm: token_bucket}
`

// BenchmarkColdKeysRedis measures a decision on cold keys through the whole
// server on a standalone Redis, as loadgen rediscost's cold-key cells do:
// 64 callers over gRPC on loopback, each request for one of 1 000 keys of
// one algorithm, so every decision is a call to Redis. Each call runs on
// the goroutine gRPC starts for it, whose stack grows as deep as the
// request path goes. cpu-µs/op is the CPU the benchmark's process (the
// server and its gRPC clients, not redis-server) spent per decision.
func BenchmarkColdKeysRedis(b *testing.B) {
	r := redistest.Standalone(b)
	limits := filepath.Join(b.TempDir(), "limits.yaml")
	if err := os.WriteFile(limits, []byte(benchLimits), 0o644); err != nil {
		b.Fatal(err)
	}
	s := start(b, map[string]string{"RLS_CONFIG_PATH": limits, "RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": r.Addr(),
		"RLS_BACKEND_TIMEOUT": "1s", "RLS_LOG_LEVEL": "warn"})
	for _, alg := range algorithms.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
					Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: alg.String(), Value: "k" + strconv.Itoa(i)}},
				}}}
			}
			ctx := context.Background()
			var next atomic.Uint64
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req := reqs[next.Add(1)%uint64(len(reqs))]
					resp, err := s.client.ShouldRateLimit(ctx, req)
					if err != nil {
						b.Error(err)
						return
					}
					if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
						b.Errorf("%s: the limit is out of reach, got %s", alg, resp.GetOverallCode())
						return
					}
				}
			})
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
