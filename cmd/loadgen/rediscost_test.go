package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisCostReport: the ratios are against the peer's cells of the same
// run (the verdict against its traffic alone), the median of the runs stands for a
// cell, and a cell with any error is failed whatever its figures.
func TestRedisCostReport(t *testing.T) {
	cells := redisCostCells(1000, 64)
	runs := map[string][]*result{}
	for _, c := range cells {
		redis, server := 20.0, 40.0
		switch {
		case c.Script == scriptPeer:
			redis = 10
		case c.Backend == backendPeer:
			redis, server = 25, 80
		case c.Backend == backendMemory:
			redis, server = 0, 30
		}
		if c.Pipeline == floorPipeline {
			redis /= 4 // a shared round trip
		}
		for k := range 3 {
			// Medians: 20 (or 10), whatever the outliers.
			scale := []float64{1, 0.5, 3}[k]
			runs[c.name()] = append(runs[c.name()], &result{Rate: 1000, CPU: map[string]float64{cpuRedis: redis * scale, cpuServer: server * scale}})
		}
	}
	failing := cells[2].name() // fixed_window through the server
	runs[failing][2].Errors, runs[failing][2].FirstError = 3, "rpc error: code = Unavailable"

	var md strings.Builder
	rep := redisCostReport{Command: "go run ./cmd/loadgen rediscost", Config: benchConfig{Repeat: 3, Concurrency: 64}, Keys: 1000}
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
}

// TestBenchKeepsTheRedisCostSection: rewriting BENCHMARKS.md from a bench
// keeps the section `loadgen rediscost` fills.
func TestBenchKeepsTheRedisCostSection(t *testing.T) {
	dir := t.TempDir()
	section := rediscostSectionBegin + "\n## Redis cost\n" + rediscostBegin + "\nfigures\n" + rediscostEnd + "\nanalysis\n" + rediscostSectionEnd
	require.NoError(t, os.WriteFile(filepath.Join(dir, reportMDPath), []byte("# Benchmarks\n\nold\n\n"+section+"\n"), 0o644))
	require.NoError(t, writeReportFiles(dir, sampleReport(), &strings.Builder{}))
	b, err := os.ReadFile(filepath.Join(dir, reportMDPath))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), section))
}
