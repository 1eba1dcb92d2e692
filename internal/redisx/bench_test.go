package redisx

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
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
			lim, err := NewLimiter(client, testPipelines, WithKeyPrefix("bench:"+alg.String()+":"))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			limit := algorithms.Limit{Algorithm: alg, Requests: algorithms.MaxLogRequests, Window: 24 * time.Hour}
			keys := make([]rate.Key, 1000)
			for i := range keys {
				keys[i] = rate.Key{Domain: "bench", Entries: []rate.Entry{{Key: "user", Value: strconv.Itoa(i)}}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(16)
			cpu := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ops := make([]rate.Op, 1)
				i := 0
				for pb.Next() {
					i++
					ops[0] = rate.Op{Key: keys[i%len(keys)], Limit: limit, Hits: 1}
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

// BenchmarkLogEncoding measures what a decision of a sliding_window_log of
// 1 000 entries costs Redis, kept as a skip list (zset-max-listpack-entries
// at its default, 128) and as a listpack (at 1024): redis-µs/op is the time
// Redis spent in the script, from INFO commandstats. The Limiter's clock
// moves 1ms per decision through a window of 1s, so the log, a new one for
// every run, stays full: each decision trims one entry and adds one.
func BenchmarkLogEncoding(b *testing.B) {
	client := redistest.Standalone(b).Client(b)
	ctx := context.Background()
	for _, enc := range []struct{ name, maxEntries string }{{"skiplist", "128"}, {"listpack", "1024"}} {
		b.Run(enc.name, func(b *testing.B) {
			if err := client.ConfigSet(ctx, "zset-max-listpack-entries", enc.maxEntries).Err(); err != nil {
				b.Fatal(err)
			}
			now := time.Unix(1_800_000_000, 0)
			lim, err := NewLimiter(client, testPipelines, WithKeyPrefix("bench:"+enc.name+":"), WithClock(func() time.Time {
				now = now.Add(time.Millisecond)
				return now
			}))
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close()
			limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 2000, Window: time.Second}
			op := []rate.Op{{Key: rate.Key{Domain: "bench", Entries: []rate.Entry{{Key: "user", Value: strconv.FormatInt(time.Now().UnixNano(), 10)}}}, Limit: limit, Hits: 1}}
			for range 1000 { // one window: 1 000 entries
				if _, err := lim.Do(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := lim.Do(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stats, err := client.Info(ctx, "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(stats, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
					for _, field := range strings.Split(rest, ",") {
						if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
							usec, err := strconv.ParseFloat(v, 64)
							if err != nil {
								b.Fatal(err)
							}
							b.ReportMetric(usec, "redis-µs/op")
						}
					}
				}
			}
		})
	}
}
