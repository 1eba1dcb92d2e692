package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// sampleRedisCostRuns are three runs of every cell of a rediscost run whose
// medians are round figures: Redis 20 µs and the server 40 per decision,
// the peer's traffic 10 µs, its server 25 and 80, the memory backend's
// server 30; a quarter of the Redis cost with floorPipeline calls per round
// trip. One run of fixed_window through the server got errors.
//
// On the hot key, the peer's server costs Redis 20 µs and itself 80 per
// decision, with 2 commands; ratewarden's servers with leases 1.5 µs (the
// log 2.5) and 33, with 0.02 commands (the log 0.06), 99% of the decisions
// served from leases; without leases 30 µs, 45 and 4 commands; the memory
// backend's servers 30.
func sampleRedisCostRuns(cells []cell) map[string][]*result {
	runs := map[string][]*result{}
	for _, c := range cells {
		redis, server, commands := 20.0, 40.0, 0.0
		var leases *leaseCounts
		switch {
		case c.Script == scriptPeer:
			redis = 10
		case c.Backend == backendPeer && c.PerSecond:
			redis, server, commands = 20, 80, 2
		case c.Backend == backendPeer:
			redis, server = 25, 80
		case c.Backend == backendMemory:
			redis, server = 0, 30
		case c.PerSecond && c.NoLeases:
			redis, server, commands = 30, 45, 4
		case c.PerSecond:
			redis, server, commands = 1.5, 33, 0.02
			if c.Algorithm == algorithms.SlidingWindowLog.String() {
				redis, commands = 2.5, 0.06
			}
			// 3 000 decisions in 3 s: 60 leases, 2 970 served, 30 of
			// the 3 000 hits leased given back.
			leases = &leaseCounts{Taken: 60, Leased: 3000, Served: 2970, GivenBack: 30}
		}
		if c.Pipeline == floorPipeline {
			redis /= 4 // a shared round trip
		}
		for k := range 3 {
			// Medians: 20 (or 10), whatever the outliers.
			scale := []float64{1, 0.5, 3}[k]
			runs[c.name()] = append(runs[c.name()], &result{Rate: 1000, Decisions: 3000, Seconds: 3, Leases: leases,
				Redis: &redisCost{PerDecision: commands * scale}, CPU: map[string]float64{cpuRedis: redis * scale, cpuServer: server * scale}})
		}
	}
	failing := cells[2].name() // fixed_window through the server
	runs[failing][2].Errors, runs[failing][2].FirstError = 3, "rpc error: code = Unavailable"
	return runs
}

// sampleRedisCostReport is a rediscost run of sampleRedisCostRuns.
func sampleRedisCostReport() *redisCostReport {
	return &redisCostReport{Command: "go -C bench run ./cmd/loadgen rediscost", Date: "2026-01-01 00:00 UTC", Took: "4m",
		Machine: machine{CPU: "test CPU", CPUs: 2, Redis: "7.0.15", Commit: "abc"},
		Config:  benchConfig{Repeat: 3, Concurrency: 64, Conns: 2, DurationText: "3s", WarmupText: "500ms"}, Keys: 1000,
		Replicas: 2, Peer: "commit f2fb157",
		Runs: sampleRedisCostRuns(redisCostCells(1000, 64, 2)), Binding: sampleBindingRuns(), BindingNoLeases: sampleControlRuns()}
}

// sampleControlRuns are one binding run of every algorithm without leases,
// each admitting 9 990 and at most 1 000 in a window (the bucket 10 990,
// 0.5 below its bound).
func sampleControlRuns() map[string][]*bindingResult {
	runs := map[string][]*bindingResult{}
	for _, alg := range algorithms.Algorithms {
		allows, c := bindingVerdict(alg, nil)
		c.Certain = 1000
		r := &bindingResult{Algorithm: alg.String(), Replicas: 2, NoLeases: true, Limit: 1000, Window: "1s", Rate: 2000, Seconds: 10,
			Sent: 20000, Allowed: 9990, Denied: 10010, Late: 200, P99: 800, Allows: allows, Check: c}
		if alg == algorithms.TokenBucket {
			r.Allowed, r.Check.Certain = 10990, -0.5
		}
		runs[alg.String()] = []*bindingResult{r}
	}
	return runs
}

// sampleBindingRuns are two binding runs of every algorithm, each admitting
// 9 800 of 10 000 (the bucket 10 890 of 11 000) and never above the limit,
// but that the second run of the log was above it and the second of the
// counter admitted 9 000 and got an error.
func sampleBindingRuns() map[string][]*bindingResult {
	runs := map[string][]*bindingResult{}
	for _, alg := range algorithms.Algorithms {
		for k := range 2 {
			r := &bindingResult{Algorithm: alg.String(), Replicas: 2, Limit: 1000, Window: "1s", Rate: 2000, Seconds: 10,
				Sent: 20000, Allowed: 9800, Denied: 10200, Late: 300, P50: 200, P99: 900, Allows: 10000,
				Leases: &leaseCounts{Taken: 400, Leased: 9000, Served: 8800, GivenBack: 200}}
			r.Check = limitCheck{Kind: checkWindows, Certain: 990, Loose: 1000, Straddling: 12}
			switch alg {
			case algorithms.SlidingWindowLog:
				r.Check = limitCheck{Kind: checkSliding, Certain: 998, Loose: 1004, Above: k == 1}
				if k == 1 {
					r.Check.Certain = 1001
				}
			case algorithms.TokenBucket:
				r.Allowed, r.Allows = 10890, 11000
				r.Check = limitCheck{Kind: checkBucket, Certain: -3.5, Loose: 2.25}
			case algorithms.SlidingWindowCounter:
				if k == 1 {
					r.Allowed, r.Errors, r.FirstError = 9000, 1, "rpc error: code = Unavailable"
				}
			}
			runs[alg.String()] = append(runs[alg.String()], r)
		}
	}
	return runs
}

// TestRedisCostReport: the ratios are against the peer's cells of the same
// run (the verdict against its traffic alone), the median of the runs stands for a
// cell, and a cell with any error is failed whatever its figures.
func TestRedisCostReport(t *testing.T) {
	cells := redisCostCells(1000, 64, 2)
	runs := sampleRedisCostRuns(cells)

	var md strings.Builder
	rep := redisCostReport{Command: "go -C bench run ./cmd/loadgen rediscost", Config: benchConfig{Repeat: 3, Concurrency: 64}, Keys: 1000}
	failed := rep.write(&md, cells, runs)
	assert.Equal(t, 1, failed)
	out := md.String()
	assert.Contains(t, out, "Its own server, driven through gRPC by the same callers as ratewarden's: 25.0 µs of Redis and 80.0 µs of its server per decision")
	assert.Contains(t, out, "Its Redis traffic alone (INCRBY and EXPIRE pipelined, one decision per round trip, as its Redis cache sends them, from the load generator with no server in front): 10.0 µs")
	assert.Contains(t, out, "| fixed_window | 20.0 | 2.00 | 0.80 |")
	assert.Contains(t, out, "**failed**: 3 errors (rpc error: code = Unavailable)")
	assert.Contains(t, out, "| sliding_window_log | 20.0 | 2.00 | 0.80 |")
	assert.Contains(t, out, "| sliding_window_counter | 20.0 | 2.00 | 0.80 | 0.00 | 1 000 | 20.0 | 2.00 | ≤ 1.0× | **missed** by 1.00× |")
	assert.Contains(t, out, "(envoyproxy/ratelimit's server: 80.0 µs per decision on Redis)")
	assert.Contains(t, out, "| token_bucket | 30.0 | ")
	assert.Contains(t, out, "| 1.33 | ≤ 1.3× | **missed** by 0.03× |")
	// The floor: every script against the peer's traffic at the same
	// number of calls per round trip.
	assert.Contains(t, out, "| envoyproxy/ratelimit's decision (INCRBY, EXPIRE) | 10.0 | 1.00 | 2.5 | 1.00 |")
	assert.Contains(t, out, "| empty script | 20.0 | 2.00 | 5.0 | 2.00 |")
	assert.Contains(t, out, "| token_bucket script | 20.0 | 2.00 | 5.0 | 2.00 |")
	assert.Contains(t, out, "| fixed_window (SET NX PX and INCRBY, no script) | 20.0 | 2.00 | 5.0 | 2.00 |")
}

// TestRedisCostHotKey: on the hot key, each algorithm with leases against
// the three targets, each against the cells of the same run: the commands
// per decision, Redis's CPU against the peer's server on the same key, the
// servers' against the memory backend's; what the leases did, and the same
// cells without them.
func TestRedisCostHotKey(t *testing.T) {
	cells := redisCostCells(1000, 64, 2)
	runs := sampleRedisCostRuns(cells)
	var md strings.Builder
	rep := redisCostReport{Config: benchConfig{Repeat: 3, Concurrency: 64, Conns: 2}, Keys: 1000, Replicas: 2, Runs: runs}
	assert.Equal(t, 1, rep.write(&md, cells, runs))
	out := md.String()
	assert.Contains(t, out, "## One hot key over 2 replicas")
	assert.Contains(t, out, "envoyproxy/ratelimit's server on the same key: 1 000 decisions/s, 2.00 commands, 20.0 µs of Redis and 80.0 µs of its servers per decision.")
	assert.Contains(t, out, "| fixed_window | 1 000 | 0.020 | ≤ 0.05 | 1.50 | 0.075 | ≤ 0.1× | 33.0 | 1.10 | ≤ 1.2× | met |")
	assert.Contains(t, out, "| sliding_window_log | 1 000 | 0.060 | ≤ 0.05 | 2.50 | 0.125 | ≤ 0.1× | 33.0 | 1.10 | ≤ 1.2× | **missed**: 0.060 commands, Redis 0.125× |")
	assert.Contains(t, out, "| token_bucket | 20 | 99.0% | 1.0% | 1 000 | 4.00 | 30.0 | 45.0 | 1 000 | 30.0 |")

	// A failed cell fails the verdict, whatever its figures.
	hot := hotKeyCell(backendMemory, algorithms.TokenBucket, 64, 2, false).name()
	runs[hot][0].Errors, runs[hot][0].FirstError = 2, "rpc error: code = Unavailable"
	md.Reset()
	assert.Equal(t, 2, rep.write(&md, cells, runs))
	assert.Contains(t, md.String(), "| token_bucket | 1 000 | 0.020 | ≤ 0.05 | 1.50 | 0.075 | ≤ 0.1× | 33.0 | 1.10 | ≤ 1.2× | **failed**: memory backend: 2 errors (rpc error: code = Unavailable) |")
}

// TestRedisCostBinding: every binding run with its check and verdict in
// the detail, the worst of each algorithm's runs on the page, and a run
// with errors counted as failed.
func TestRedisCostBinding(t *testing.T) {
	rep := sampleRedisCostReport()
	cells := redisCostCells(rep.Keys, rep.Config.Concurrency, rep.Replicas)
	var detail, page strings.Builder
	assert.Equal(t, 2, rep.write(&detail, cells, rep.Runs), "the failed cell, and the binding run with an error")
	assert.Equal(t, 2, rep.writeHeadline(&page, cells))
	d := detail.String()
	assert.Contains(t, d, "| fixed_window | 1 | 20 000 | 9 800 | 98.0% | windows | 990 | 1 000 | 12 | yes | 400 | 8 800 | 200 | 300µs | 900µs | met |")
	assert.Contains(t, d, "| sliding_window_log | 2 | 20 000 | 9 800 | 98.0% | sliding | 1 001 | 1 004 | 0 | **no** | 400 | 8 800 | 200 | 300µs | 900µs | **missed**: above the limit |")
	assert.Contains(t, d, "| sliding_window_counter | 2 | 20 000 | 9 000 | 90.0% | windows | 990 | 1 000 | 12 | yes | 400 | 8 800 | 200 | 300µs | 900µs | **failed**: 1 errors (rpc error: code = Unavailable) |")
	assert.Contains(t, d, "| token_bucket | 1 | 20 000 | 10 890 | 99.0% | bucket | -3.5 | +2.2 | 0 | yes |")
	assert.Contains(t, d, "| sliding_window_log | no leases | 20 000 | 9 990 | 99.9% | sliding | 1 000 | 0 | 0 | yes | – | – | – | 200µs | 800µs | met |")
	assert.Contains(t, d, "| token_bucket | no leases | 20 000 | 10 990 | 99.9% | bucket | -0.5 | +0.0 | 0 | yes | – | – | – | 200µs | 800µs | met |")
	assert.Contains(t, d, "On 1 000 cold keys, fixed_window, decided with no script, cost Redis 20.0 µs per decision, 0.80× envoyproxy/ratelimit's server")
	h := page.String()
	assert.Contains(t, h, "| fixed_window | windows | 990 | 1 000 | yes | 98.0% | 89.8% | met |")
	assert.Contains(t, h, "| sliding_window_log | sliding | 1 001 | 1 004 | **no**: above in 1 of 2 runs | 98.0% | 89.8% | **missed** in 1 of 2 runs |")
	assert.Contains(t, h, "| sliding_window_counter | windows | 990 | 1 000 | yes | 90.0% | 89.8% | **missed** in 1 of 2 runs (least admitted 90.00%) |")
	assert.Contains(t, h, "| ratewarden | fixed_window | 1 000 | 0.020 | 1.50 | 0.075 | 33.0 | 1.10 | 99.0% | met |")
	assert.Contains(t, h, "On 1 000 cold keys, fixed_window, decided with no script, cost Redis 20.0 µs per decision, 0.80× envoyproxy/ratelimit's server (target ≤ 1.0×: **failed**: 3 errors")
	assert.Contains(t, h, "envoyproxy/ratelimit (commit f2fb157)")
	assert.Contains(t, h, "The same runs without leases (RLS_LEASES=false, once each, the control): fixed_window 1 000 certain, 99.9% admitted, met; sliding_window_log 1 000 certain, 99.9% admitted, met;")

	// A failed control run counts as failed too.
	rep.BindingNoLeases["fixed_window"][0].Errors = 1
	detail.Reset()
	assert.Equal(t, 3, rep.write(&detail, cells, rep.Runs))
	rep.BindingNoLeases["fixed_window"][0].Errors = 0

	// A run whose open loop fell behind is failed too.
	rep.Binding["token_bucket"][0].Late = 150_000
	detail.Reset()
	assert.Equal(t, 3, rep.write(&detail, cells, rep.Runs))
	assert.Contains(t, detail.String(), "**failed**: the open loop fell behind by 150.00ms")
}

// TestBindingRunVerdict: a run is judged on both targets, the share
// admitted to the hundredth.
func TestBindingRunVerdict(t *testing.T) {
	r := &bindingResult{Allowed: 10446, Allows: 11000, Check: limitCheck{Kind: checkBucket, Certain: -553.8}}
	assert.Equal(t, "**missed**: admitted 94.96%", r.verdict())
	r.Allowed = 10450
	assert.Equal(t, "met", r.verdict())
	r.Check.Above = true
	assert.Equal(t, "**missed**: above the limit", r.verdict())
}

// TestBindingVerdict: what each algorithm's binding limit allows over a
// run, and which check its answers get.
func TestBindingVerdict(t *testing.T) {
	spans := repeat(3, at(10, 11))
	for _, tt := range []struct {
		alg    algorithms.Algorithm
		allows float64
		kind   string
	}{
		{algorithms.FixedWindow, 10 * bindingLimit, checkWindows},
		{algorithms.SlidingWindowCounter, 10 * bindingLimit, checkWindows},
		{algorithms.SlidingWindowLog, 10 * bindingLimit, checkSliding},
		{algorithms.TokenBucket, 11 * bindingLimit, checkBucket},
	} {
		allows, c := bindingVerdict(tt.alg, spans)
		assert.Equal(t, tt.allows, allows, "%s", tt.alg)
		assert.Equal(t, tt.kind, c.Kind, "%s", tt.alg)
	}
}

// TestBenchKeepsTheRedisCostSection: rewriting the page from a bench keeps
// the block `loadgen rediscost` fills.
func TestBenchKeepsTheRedisCostSection(t *testing.T) {
	dir := t.TempDir()
	section := rediscostMarker.wrap("## Redis cost\nfigures\nanalysis")
	require.NoError(t, os.WriteFile(filepath.Join(dir, pagePath), []byte("# Benchmarks\n\nold\n\n"+section), 0o644))
	require.NoError(t, writeReportFiles(dir, sampleReport(), &strings.Builder{}))
	b, err := os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), section))
}

// TestRedisCostFiles: -update writes the headline table into the page,
// beside envoyproxy/ratelimit's server, and the tables, the method and the
// analysis kept from the last detail page into benchmarks/.
func TestRedisCostFiles(t *testing.T) {
	dir := t.TempDir()
	rep := sampleRedisCostReport()
	failed, err := writeRedisCostFiles(dir, rep, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2, failed, "a cell and a binding run failed")
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		require.NoError(t, err)
		return string(b)
	}
	page, detail := read(pagePath), read(rediscostDetailPath)
	assert.NotContains(t, page, "%!", "no formatting mistakes")
	assert.NotContains(t, detail, "%!", "no formatting mistakes")
	assert.Contains(t, page, "| envoyproxy/ratelimit | fixed_window | 1 000 | 25.0 | 1.00 | 0.00 | 80.0 |")
	assert.Contains(t, page, "| ratewarden | fixed_window | 1 000 (**3 errors**) | 20.0 | 0.80 | 0.00 | 40.0 |")
	assert.Contains(t, page, "| ratewarden | token_bucket | 1 000 | 20.0 | 0.80 | 0.00 | 40.0 |")
	assert.Contains(t, page, "Per decision, Redis spent 0.80 times behind ratewarden's server what it spent behind the peer's, and ratewarden's server used 0.50 times the CPU of the peer's.")
	assert.Contains(t, page, "the median of 3 runs of 3s after 500ms of warm-up")
	assert.Contains(t, detail, "| fixed_window | 20.0 | 2.00 | 0.80 |")
	assert.Contains(t, detail, "| empty script | 20.0 | 2.00 | 5.0 | 2.00 |")
	assert.Contains(t, detail, "the callers of a server share 2 gRPC connections")

	assert.Contains(t, detail, "The analysis of this run is written here by hand")
	edited := strings.Replace(detail, rediscostAnalysisMarker.kept(detail), "Why.", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, rediscostDetailPath), []byte(edited), 0o644))
	_, err = writeRedisCostFiles(dir, rep, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, edited, read(rediscostDetailPath), "the analysis stays")
	assert.Equal(t, page, read(pagePath))
}

func TestRedisCostUpdateNamesThePage(t *testing.T) {
	err := run(context.Background(), []string{"rediscost", "-update", filepath.Join(t.TempDir(), "README.md")}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "it names the page, a file called BENCHMARKS.md")
}
