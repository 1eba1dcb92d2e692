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
)

// sampleRedisCostRuns are three runs of every cell of a rediscost run whose
// medians are round figures: Redis 20 µs and the server 40 per decision,
// the peer's traffic 10 µs, its server 25 and 80, the memory backend's
// server 30; a quarter of the Redis cost with floorPipeline calls per round
// trip. One run of fixed_window through the server got errors.
func sampleRedisCostRuns(cells []cell) map[string][]*result {
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
	return runs
}

// sampleRedisCostReport is a rediscost run of sampleRedisCostRuns.
func sampleRedisCostReport() *redisCostReport {
	return &redisCostReport{Command: "go run ./cmd/loadgen rediscost", Date: "2026-01-01 00:00 UTC", Took: "4m",
		Machine: machine{CPU: "test CPU", CPUs: 2, Redis: "7.0.15", Commit: "abc"},
		Config:  benchConfig{Repeat: 3, Concurrency: 64, Conns: 2, DurationText: "3s", WarmupText: "500ms"}, Keys: 1000,
		Runs: sampleRedisCostRuns(redisCostCells(1000, 64))}
}

// TestRedisCostReport: the ratios are against the peer's cells of the same
// run (the verdict against its traffic alone), the median of the runs stands for a
// cell, and a cell with any error is failed whatever its figures.
func TestRedisCostReport(t *testing.T) {
	cells := redisCostCells(1000, 64)
	runs := sampleRedisCostRuns(cells)

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
	assert.Equal(t, 1, failed)
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
