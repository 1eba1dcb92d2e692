package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// coldRuns returns three runs of a cold-key cell: Redis's and the server's
// CPU per decision of each, and commands per decision.
func coldRuns(redis, server [3]float64, commands float64) []*result {
	var rs []*result
	for k := range 3 {
		rs = append(rs, &result{Rate: 1000, Decisions: 3000, Seconds: 3, Redis: &redisCost{PerDecision: commands},
			CPU: map[string]float64{cpuRedis: redis[k], cpuServer: server[k]}})
	}
	return rs
}

// sampleBeforeAfterReport is sampleRedisCostReport with a before build,
// whose cold-key cells through the server, and the module's, measured:
//
//   - fixed_window: Redis 1.5× before, not held to it; the server the same
//     within its spread of 5%;
//   - sliding_window_log: Redis 1.2× before, with no spread;
//   - sliding_window_counter: the before cell got errors;
//   - token_bucket: Redis 1.05× before, within the spread of 10%; the
//     server 1.1× before, with no spread.
func sampleBeforeAfterReport() *redisCostReport {
	rep := sampleRedisCostReport()
	rep.Baseline = &baselineReport{Commit: "f6d78ac", Date: "2026-11-25 15:27 UTC", NotGiven: []string{"RLS_LEASES"}}
	rep.Config.BackendTimeoutText = "1s"
	set := func(alg algorithms.Algorithm, before, after []*result) {
		c := rep.serverCell(backendStandalone, alg)
		rep.Runs[beforeCell(c).name()], rep.Runs[c.name()] = before, after
	}
	flat := func(v float64) [3]float64 { return [3]float64{v, v, v} }
	set(algorithms.FixedWindow, coldRuns(flat(10), flat(40), 2), coldRuns(flat(15), [3]float64{40, 41, 39}, 2))
	set(algorithms.SlidingWindowLog, coldRuns(flat(20), flat(50), 3), coldRuns(flat(24), flat(50), 4))
	counterBefore := coldRuns(flat(20), flat(40), 2)
	counterBefore[1].Errors, counterBefore[1].FirstError = 2, "rpc error: code = Unavailable"
	set(algorithms.SlidingWindowCounter, counterBefore, coldRuns(flat(20), flat(40), 2))
	set(algorithms.TokenBucket, coldRuns([3]float64{19, 20, 21}, flat(40), 1), coldRuns([3]float64{20, 21, 22}, flat(44), 1))
	return rep
}

// TestRedisCostBeforeAfter: per algorithm, the before build's cold-key
// cells through the server beside the module's, on the page and in the
// detail; token_bucket's and sliding_window_log's Redis CPU and every
// algorithm's server CPU held to the before build's within the larger
// spread of the two cells' runs, and a cell with any error failed.
func TestRedisCostBeforeAfter(t *testing.T) {
	rep := sampleBeforeAfterReport()
	cells := redisCostCells(rep.Keys, rep.Config.Concurrency, rep.Replicas)
	var detail, page strings.Builder
	assert.Equal(t, 2, rep.write(&detail, cells, rep.Runs), "the before cell with errors, and the binding run with an error")
	assert.Equal(t, 2, rep.writeHeadline(&page, cells))

	h := page.String()
	assert.Contains(t, h, "### Cold keys, before and after")
	assert.Contains(t, h, "measured for this build (abc, after) and for the server built from commit f6d78ac of 2026-11-25 15:27 UTC (before)")
	assert.Contains(t, h, "It reads no RLS_LEASES, which it was not given.")
	assert.Contains(t, h, "| fixed_window | 10.0 | 15.0 | 1.50 | 2.00 | 2.00 | 1.00 | 40.0 | 40.0 | 1.00 | met |")
	assert.Contains(t, h, "| sliding_window_log | 20.0 | 24.0 | 1.20 | 3.00 | 4.00 | 1.33 | 50.0 | 50.0 | 1.00 | **missed**: Redis 1.200× (target ≤ 1.000×) |")
	assert.Contains(t, h, "| sliding_window_counter | 20.0 (**2 errors**) | 20.0 | 1.00 | 2.00 | 2.00 | 1.00 | 40.0 | 40.0 | 1.00 | **failed**: before: 2 errors (rpc error: code = Unavailable) |")
	assert.Contains(t, h, "| token_bucket | 20.0 | 21.0 | 1.05 | 1.00 | 1.00 | 1.00 | 40.0 | 44.0 | 1.10 | **missed**: server 1.100× (target ≤ 1.000×) |")
	assert.Less(t, strings.Index(h, "### Cold keys, before and after"), strings.Index(h, "### One hot key"), "with the cold keys, ahead of the hot key")

	d := detail.String()
	assert.Contains(t, d, "## Cold keys, before and after")
	assert.Contains(t, d, "the larger spread of the two builds' runs ((most − least) / median)")
	assert.Contains(t, d, "| fixed_window | 1 000 | 1 000 | 10.0 | 15.0 | 1.50 | – | 2.00 | 2.00 | 1.00 | 40.0 | 40.0 | 1.00 | ≤ 1.05× | met |")
	assert.Contains(t, d, "| token_bucket | 1 000 | 1 000 | 20.0 | 21.0 | 1.05 | ≤ 1.10× | 1.00 | 1.00 | 1.00 | 40.0 | 44.0 | 1.10 | ≤ 1.00× | **missed**: server 1.100× (target ≤ 1.000×) |")
	assert.Contains(t, d, "| sliding_window_counter | 1 000 (**2 errors**) | 1 000 |")

	// Without a before build, neither says a word of it.
	rep.Baseline = nil
	detail.Reset()
	page.Reset()
	rep.write(&detail, cells, rep.Runs)
	rep.writeHeadline(&page, cells)
	assert.NotContains(t, detail.String(), "Cold keys, before and after")
	assert.NotContains(t, page.String(), "Cold keys, before and after")
}

// TestRedisCostBeforeAfterFiles: -update writes the before build into the
// JSON, and `loadgen report` renders the same page and detail from it.
func TestRedisCostBeforeAfterFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := writeRedisCostFiles(dir, sampleBeforeAfterReport(), io.Discard)
	require.NoError(t, err)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		require.NoError(t, err)
		return string(b)
	}
	page, detail := read(pagePath), read(rediscostDetailPath)
	assert.NotContains(t, page+detail, "%!", "no formatting mistakes")
	assert.Contains(t, page, "| token_bucket | 20.0 | 21.0 | 1.05 |")
	assert.Contains(t, detail, "## Cold keys, before and after")

	var back redisCostReport
	require.NoError(t, json.Unmarshal([]byte(read(rediscostJSONPath)), &back))
	assert.Equal(t, &baselineReport{Commit: "f6d78ac", Date: "2026-11-25 15:27 UTC", NotGiven: []string{"RLS_LEASES"}}, back.Baseline)
	require.NoError(t, run(context.Background(), []string{"report", "-out", dir}, io.Discard, io.Discard))
	assert.Equal(t, page, read(pagePath))
	assert.Equal(t, detail, read(rediscostDetailPath))
}

// TestTakeTurns: each before cell runs right after its twin of the module
// in one round and right before it in the next; the other cells keep their
// places.
func TestTakeTurns(t *testing.T) {
	cells := redisCostCells(1000, 64, 2)
	names := func(cs []cell) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.name())
		}
		return out
	}
	first, second := takeTurns(cells, 0), takeTurns(cells, 1)
	assert.Equal(t, names(cells), names(first))
	assert.Equal(t, names(cells), names(takeTurns(cells, 2)))
	require.Len(t, second, len(cells))
	swapped := 0
	for i, c := range cells {
		switch {
		case !c.Baseline && i+1 < len(cells) && cells[i+1].Baseline:
			assert.Equal(t, cells[i+1].name(), second[i].name())
			assert.Equal(t, c.name(), second[i+1].name())
			swapped++
		case c.Baseline:
		default:
			assert.Equal(t, c.name(), second[i].name())
		}
	}
	assert.Equal(t, len(algorithms.Algorithms), swapped)
	assert.Equal(t, "rediscost/standalone/token_bucket/keys=1000/c=64/before",
		beforeCell(cell{Group: groupRedisCost, Backend: backendStandalone, Algorithm: "token_bucket", Keys: 1000, Concurrency: 64}).name())
}

// TestBaselineServerEnv: the before build is given only the settings it
// reads, and the report names the others.
func TestBaselineServerEnv(t *testing.T) {
	s := &baselineServer{settings: map[string]bool{"RLS_CONFIG_PATH": true, "RLS_BACKEND": true}, notGiven: map[string]bool{}}
	got := s.env(map[string]string{"RLS_CONFIG_PATH": "l.yaml", "RLS_BACKEND": "redis", "RLS_LEASES": "false", "RLS_LEASE_TIME": "1s", "GOMAXPROCS": "2"})
	assert.Equal(t, map[string]string{"RLS_CONFIG_PATH": "l.yaml", "RLS_BACKEND": "redis", "GOMAXPROCS": "2"}, got)
	assert.Equal(t, []string{"RLS_LEASES", "RLS_LEASE_TIME"}, s.report().NotGiven)
}

// TestServerSettings: the settings of a build are the names in the first
// column of its -h, not those its descriptions mention.
func TestServerSettings(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"+
		"echo 'ratewarden: a rate limit service'\n"+
		"echo 'VARIABLE     DEFAULT   MEANING'\n"+
		"echo 'RLS_GRPC_ADDR  :8081   gRPC listen address'\n"+
		"echo 'RLS_BACKEND    memory  with RLS_REDIS_ADDRS, where limits are counted'\n"+
		"echo 'RLS_ADDR_FILE          file to write the addresses to'\n"), 0o755))
	got, err := serverSettings(context.Background(), bin)
	require.NoError(t, err)
	assert.Equal(t, []string{"RLS_ADDR_FILE", "RLS_BACKEND", "RLS_GRPC_ADDR"}, got)

	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho usage\n"), 0o755))
	_, err = serverSettings(context.Background(), bin)
	assert.ErrorContains(t, err, "lists no RLS_ variable")
}

// TestStatsSpread: a cell's spread is its runs' range against their
// median.
func TestStatsSpread(t *testing.T) {
	s := statsOf(coldRuns([3]float64{19, 20, 21}, [3]float64{40, 40, 40}, 1))
	assert.InDelta(t, 0.1, s.redisSpread, 1e-9)
	assert.Zero(t, s.serverSpread)
	assert.Zero(t, statsOf(coldRuns([3]float64{20, 20, 20}, [3]float64{40, 40, 40}, 1)[:1]).redisSpread)
}
