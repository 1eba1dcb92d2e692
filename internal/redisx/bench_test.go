package redisx

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redistest"
)

// BenchmarkLimiterDo measures one decision of one limit through the Limiter,
// on a standalone Redis of its own, from parallel callers as the server
// makes them: its allocations per decision are the server's cost of talking
// to Redis, beside what the memory backend costs (BenchmarkMemoryDo).
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
		})
	}
}
