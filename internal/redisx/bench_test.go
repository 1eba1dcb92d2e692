package redisx

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redistest"
)

// BenchmarkLimiterDo measures one decision of one limit through the Limiter,
// on a standalone Redis of its own, from parallel callers as the server
// makes them: its allocations per decision are the server's cost of talking
// to Redis, beside what the memory backend costs (BenchmarkMemoryDo), and
// cpu-µs/op the CPU time the benchmark's process spent per decision, which
// leaves out redis-server's.
func BenchmarkLimiterDo(b *testing.B) {
	client := redistest.Standalone(b).Client(b)
	for _, alg := range algorithms.Algorithms {
		b.Run(alg.String(), func(b *testing.B) {
			lim, err := NewLimiter(client, WithKeyPrefix("bench:"+alg.String()+":"))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			limit := algorithms.Limit{Algorithm: alg, Requests: algorithms.MaxLogRequests, Window: 24 * time.Hour}
			keys := make([]algorithms.Key, 1000)
			for i := range keys {
				keys[i] = algorithms.Key{Domain: "bench", Entries: []algorithms.Entry{{Key: "user", Value: strconv.Itoa(i)}}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(16)
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ops := make([]algorithms.Op, 1)
				i := 0
				for pb.Next() {
					i++
					ops[0] = algorithms.Op{Key: keys[i%len(keys)], Limit: limit, Hits: 1}
					res, err := lim.Do(ctx, ops)
					if err != nil {
						b.Error(err)
						return
					}
					if !res[0].Allowed {
						b.Error("denied: the limit is out of reach")
						return
					}
				}
			})
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU returns the user and system CPU time the test binary has used:
// the client's side of every decision, without redis-server's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
