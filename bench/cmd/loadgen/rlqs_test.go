package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// sampleRLQSReport is a run of fixed_window and sliding_window_log whose
// figures are round. fixed_window through RLS: 30 000 admitted with 1 200
// Redis commands (25 a command) and 4 s of the server's CPU (7 500 a
// second); through RLQS 28 500 (95%) with 60 commands (475, 19×) and
// 0.05 s (570 000, 76×). sliding_window_log through RLS: 30 000 with 3 000
// commands (10.0) and 5 s (6 000); through RLQS 27 000 (90%) with 100
// commands (270, 27×) and less CPU than /proc counts (more than 2 700 000
// a second, more than 450×).
func sampleRLQSReport() *rlqsReport {
	cell := func(alg algorithms.Algorithm, protocol string, allowed uint64, commands commandStats, cpu float64) *quotaResult {
		r := &quotaResult{Algorithm: alg.String(), Protocol: protocol, Envoys: 3, Rate: 1000, Seconds: 60.1,
			Sent: 60000, Allowed: allowed, Denied: 60000 - allowed, Late: 900, Allows: 30000,
			Check:    limitCheck{Kind: checkWindows, Certain: float64(allowed), Loose: float64(allowed)},
			Commands: commands, ServerCPU: cpu, RedisCPU: cpu / 2}
		if alg == algorithms.SlidingWindowLog {
			r.Check.Kind = checkSliding
		}
		if protocol == protocolRLS {
			r.P50, r.P99 = 300, 2500
			r.Leases = &leaseCounts{Taken: 120, Leased: 29000, Served: 28000, GivenBack: 1000}
		} else {
			r.Quota = &envoyCounts{Streams: 3, ReportsSent: 39, ReportsLost: 0, Responses: 15}
		}
		return r
	}
	return &rlqsReport{Command: "go -C bench run ./cmd/loadgen rlqs", Date: "2026-01-01 00:00 UTC", Took: "1m40s",
		Machine: machine{CPU: "test CPU", CPUs: 2, Redis: "7.0.15", Commit: "abc"},
		Envoys:  3, Limit: 30000, Unit: "minute", Offered: 2, Rate: 1000, ReportInterval: "5s", BackendTimeout: "1s",
		Cells: []*quotaResult{
			cell(algorithms.FixedWindow, protocolRLS, 30000, commandStats{"evalsha": 999, "time": 200, "client|setname": 1}, 4),
			cell(algorithms.FixedWindow, protocolRLQS, 28500, commandStats{"evalsha": 40, "time": 20}, 0.05),
			cell(algorithms.SlidingWindowLog, protocolRLS, 30000, commandStats{"evalsha": 1000, "zadd": 2000}, 5),
			cell(algorithms.SlidingWindowLog, protocolRLQS, 27000, commandStats{"evalsha": 50, "zadd": 50}, 0),
		}}
}

// TestRLQSHeadline: each algorithm through RLS and through RLQS, RLQS's
// figures as multiples of RLS's from the same run, and a bound where the
// server used less CPU than /proc counts.
func TestRLQSHeadline(t *testing.T) {
	var page strings.Builder
	assert.Zero(t, sampleRLQSReport().writeHeadline(&page))
	h := page.String()
	assert.Contains(t, h, "of a limit of 30 000 a minute, asked 2× that (1 000 requests a second) at a fixed rate by 3 Envoys")
	assert.Contains(t, h, "reporting every 5s as Envoy does")
	assert.Contains(t, h, "RLS_BACKEND_TIMEOUT=1s")
	assert.Contains(t, h, "| fixed_window | RLS | 30 000 | 100.0% | yes | 1 200 | 25.0 | 1.00 | 4.00 | 7 500 | 1.00 | met |")
	assert.Contains(t, h, "| fixed_window | RLQS | 28 500 | 95.0% | yes | 60 | 475 | 19.0 | 0.05 | 570 000 | 76.0 | met |")
	assert.Contains(t, h, "| sliding_window_log | RLS | 30 000 | 100.0% | yes | 3 000 | 10.0 | 1.00 | 5.00 | 6 000 | 1.00 | met |")
	assert.Contains(t, h, "| sliding_window_log | RLQS | 27 000 | 90.0% | yes | 100 | 270 | 27.0 | 0.00 | > 2 700 000 | > 450 | met |")
	assert.Contains(t, h, "On fixed_window, through RLQS the Envoys admitted 19.0 times as many requests per Redis command as through RLS, 76.0 times as many per second of the server's CPU, and 95.0% of the limit against RLS's 100.0%."+
		" On sliding_window_log, through RLQS the Envoys admitted 27.0 times as many requests per Redis command as through RLS, more than 450 times as many per second of the server's CPU, and 90.0% of the limit against RLS's 100.0%.")
	assert.Contains(t, h, "[benchmarks/rlqs.md](benchmarks/rlqs.md)")
	assert.NotContains(t, h, "%!", "no formatting mistakes")
}

// TestRLQSFailedCells: a cell above the limit, or with any error, is
// failed and says why, its figures and the comparison left out.
func TestRLQSFailedCells(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cell  int
		spoil func(r *quotaResult)
		why   string
	}{
		{"above the limit", 1, func(r *quotaResult) { r.Check.Above = true }, "above the limit"},
		{"a lost report", 1, func(r *quotaResult) { r.Quota.ReportsLost = 2 }, "reports lost: 2"},
		{"a stream reopened", 1, func(r *quotaResult) { r.Quota.Streams = 4 }, "streams opened again: 1"},
		{"no answer", 1, func(r *quotaResult) { r.Quota.Responses = 0 }, "no answer from the server"},
		{"the server's log", 1, func(r *quotaResult) {
			r.ServerLogLines, r.ServerLog = 7, []string{"level=WARN msg=\"rlqs: a call to the backend failed\"", "level=WARN msg=again"}
		}, "warnings or errors in the server's log: 7, the first `level=WARN msg=\"rlqs: a call to the backend failed\"`"},
		{"call errors", 0, func(r *quotaResult) { r.Errors, r.FirstError = 3, "rpc error: code = Unavailable" }, "3 errors (rpc error: code = Unavailable)"},
		{"a late loop", 0, func(r *quotaResult) { r.Late = 1_500_000 }, "the open loop fell behind by 1.50s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := sampleRLQSReport()
			tt.spoil(rep.Cells[tt.cell])
			var page, detail strings.Builder
			assert.Equal(t, 1, rep.writeHeadline(&page))
			assert.Equal(t, 1, rep.writeDetail(&detail, ""))
			h := page.String()
			assert.Contains(t, h, "| **failed**: "+tt.why+" |")
			assert.Contains(t, h, "| – | – |", "the failed cell's figures are left out")
			assert.Contains(t, h, "On fixed_window a cell failed, so the two are not compared. On sliding_window_log, through RLQS")
			assert.Contains(t, h, "| sliding_window_log | RLQS | 27 000 | 90.0% | yes | 100 | 270 | 27.0 | 0.00 | > 2 700 000 | > 450 | met |", "the other pair stands")
			assert.Contains(t, detail.String(), "- fixed_window through "+rep.Cells[tt.cell].Protocol+" **failed**: "+tt.why+".")
			if len(rep.Cells[tt.cell].ServerLog) > 1 {
				assert.Contains(t, detail.String(), "  The server's next lines:\n  - `level=WARN msg=again`\n")
			}
		})
	}
}

// TestRLQSDetail: every cell's requests and checks, the commands by name,
// and what the leases and the Envoys did.
func TestRLQSDetail(t *testing.T) {
	var detail strings.Builder
	assert.Zero(t, sampleRLQSReport().writeDetail(&detail, "Why."))
	d := detail.String()
	assert.Contains(t, d, "| fixed_window | RLS | 60 000 | 0 | 30 000 | 30 000 | 100.0% | windows | 30 000 | 30 000 | 900µs | 2.50ms | 60.1 |")
	assert.Contains(t, d, "| sliding_window_log | RLQS | 60 000 | 0 | 27 000 | 33 000 | 90.0% | sliding | 27 000 | 27 000 | 900µs | – | 60.1 |")
	assert.Contains(t, d, "| fixed_window | RLS | 1 200 | evalsha 999, time 200, client\\|setname 1 | 2.00 | 15 000 | 4.00 | 120 | 28 000 | 1 000 | – | – | – | – |", "a subcommand's bar does not end the cell")
	assert.Contains(t, d, "| fixed_window | RLQS | 60 | evalsha 40, time 20 | 0.03 | 1 140 000 | 0.05 | – | – | – | 3 | 39 | 0 | 15 |")
	assert.Contains(t, d, "| sliding_window_log | RLQS | 100 | evalsha 50, zadd 50 | 0.00 | – | 0.00 |")
	assert.Contains(t, d, rlqsAnalysisMarker.wrap("Why."))
	assert.NotContains(t, d, "%!", "no formatting mistakes")
}

// TestRLQSFiles: -update writes the table into the page, and the detail,
// whose analysis a new rendering keeps, and the JSON into benchmarks/.
func TestRLQSFiles(t *testing.T) {
	dir := t.TempDir()
	rep := sampleRLQSReport()
	failed, err := writeRLQSFiles(dir, rep, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, failed)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		require.NoError(t, err)
		return string(b)
	}
	page, detail := read(pagePath), read(rlqsDetailPath)
	assert.Contains(t, rlqsMarker.kept(page), "| fixed_window | RLQS | 28 500 | 95.0% |")
	assert.Contains(t, read(rlqsJSONPath), `"protocol": "RLQS"`)
	assert.Contains(t, detail, "The analysis of this run is written here by hand")
	edited := strings.Replace(detail, rlqsAnalysisMarker.kept(detail), "Why.", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, rlqsDetailPath), []byte(edited), 0o644))
	_, err = writeRLQSFiles(dir, rep, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, edited, read(rlqsDetailPath), "the analysis stays")
	assert.Equal(t, page, read(pagePath))
}

func TestRLQSFlags(t *testing.T) {
	err := run(context.Background(), []string{"rlqs", "-update", filepath.Join(t.TempDir(), "README.md")}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "it names the page, a file called BENCHMARKS.md")
	err = run(context.Background(), []string{"rlqs", "-algorithms", "fixed_window,token_bucket"}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "token_bucket: a bucket starts full")
	err = run(context.Background(), []string{"rlqs", "-algorithms", "leaky"}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, `unknown algorithm "leaky"`)
}

// TestSmokeRLQSCells: an RLS cell and an RLQS cell of a fixed window, side
// by side for 6 s against servers of their own on Redises of their own,
// send every request and account for it, stay within the limit, and read
// what they cost and what the leases and the Envoys did. -short skips it.
func TestSmokeRLQSCells(t *testing.T) {
	if testing.Short() {
		t.Skip("the cells take 6 s")
	}
	value := quotaValuePrefix + newRunID()
	var cells []quotaParams
	for _, protocol := range []string{protocolRLS, protocolRLQS} {
		redisSrv := redistest.Standalone(t)
		grpcAddr, httpAddr := startServerAt(t, map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_MODE": "standalone", "RLS_REDIS_ADDRS": redisSrv.Addr()})
		p := quotaParams{Protocol: protocol, Algorithm: algorithms.FixedWindow, Addr: grpcAddr, Envoys: 3, Value: value,
			Length: 6 * time.Second, Stats: newStatsReader([]string{redisSrv.Addr()})}
		t.Cleanup(func() { p.Stats.Close() })
		if protocol == protocolRLS {
			p.Leases = newLeaseReader([]string{httpAddr})
		}
		cells = append(cells, p)
	}
	start := time.Now().Add(time.Second)
	results := map[string]*quotaResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range cells {
		p.Start = start
		protocol := p.Protocol
		wg.Go(func() {
			r, err := runQuotaCell(t.Context(), p)
			assert.NoError(t, err, protocol)
			mu.Lock()
			defer mu.Unlock()
			results[protocol] = r
		})
	}
	wg.Wait()
	for protocol, r := range results {
		require.NotNil(t, r, protocol)
		t.Logf("%s: %s", protocol, r.summary())
		assert.Equal(t, uint64(quotaOffered*quotaLimit/10), r.Sent+r.Skipped, "%s: 6 s of a minute's twice the limit", protocol)
		// A slow machine (or the race detector) may have the server shed
		// calls, which are errors; every request is accounted for either
		// way.
		assert.Equal(t, r.Sent, r.Allowed+r.Denied+r.Errors, protocol)
		assert.Positive(t, r.Allowed, protocol)
		assert.False(t, r.Check.Above, "%s: %s", protocol, r.Check.describe())
		assert.Equal(t, float64(quotaLimit), r.Allows, protocol)
		assert.Positive(t, r.commands(), protocol)
		assert.InDelta(t, 6, r.Seconds, 1, protocol)
	}
	require.NotNil(t, results[protocolRLS].Leases)
	assert.Positive(t, results[protocolRLS].Leases.Taken, "1 000 calls a second of one limit are leased")
	q := results[protocolRLQS].Quota
	require.NotNil(t, q)
	assert.Equal(t, 3, q.Streams, "one stream an Envoy")
	assert.Zero(t, q.ReportsLost)
	assert.Positive(t, q.Responses, "the Envoys got their grants")
	assert.Positive(t, results[protocolRLQS].Denied, "no grant before the first answer")
}
