package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/metrics"
)

// sampleOverloadReport is an overload run of two builds and the no-op
// services, one pass, with deadlines of 20ms and none.
func sampleOverloadReport() *overloadReport {
	exact := func(admitted ...uint64) []exactCount {
		var out []exactCount
		for i, a := range admitted {
			out = append(out, exactCount{Algorithm: algorithmNames()[i%4], Value: "e.x", Offered: 100, Admitted: a})
		}
		return out
	}
	return &overloadReport{
		Date: "2026-11-23 22:00 UTC", Took: "2m", Command: "go -C bench run ./cmd/loadgen overload",
		Config: overloadConfig{Callers: 128, Replicas: 2, Spinners: 2, Overload: 4, Goodput: 0.8, Passes: 1,
			ExactLimit: 20, ExactKeys: 1, ExactShare: 0.1, DeadlinesText: []string{"20ms", "none"}, WarmupText: "1s", ClosedText: "10s", OpenText: "10s"},
		Machine: machine{CPU: "test CPU", CPUs: 2, LoadBefore: "1 1 1", LoadAfter: "9 9 9"},
		Variants: []*overloadRound{
			{Name: "after", Commit: "abc", Pass: 1, Servers: map[string]float64{metrics.RequestsShed + `{reason="deadline"}`: 1234, metrics.InflightLimit: 40},
				Closed: []*phaseResult{
					{Deadline: "20ms", Seconds: 10, Calls: 30000, Decisions: 20000, Allowed: 19000, Denied: 1000,
						Goodput: 1900, Codes: map[string]uint64{"Unavailable": 7000, "DeadlineExceeded": 3000}, ExactLimit: 20, Exact: exact(20, 19, 20, 20)},
					{Deadline: "none", Seconds: 10, Calls: 25000, Decisions: 25000, Allowed: 24000, Denied: 1000, P99: 250_000, Max: 400_000,
						Goodput: 2500, ExactLimit: 20, Exact: exact(20, 20, 20, 20), Cores: map[string]float64{cpuLoadgen: 0.4, cpuServer: 0.6, cpuRedis: 0.3, cpuSpinners: 0.7}},
				},
				Open: &phaseResult{Deadline: "20ms", Seconds: 10, Rate: 8000, Calls: 80000, Decisions: 17000, Allowed: 17000, Goodput: 1700,
					Codes: map[string]uint64{"Unavailable": 60000, "DeadlineExceeded": 3000}, ExactLimit: 20, Exact: exact(20, 19, 20, 21)}},
			{Name: "before", Commit: "76db7e9", Pass: 1, Closed: []*phaseResult{
				{Deadline: "20ms", Seconds: 10, Calls: 50000, Decisions: 50, Allowed: 50, Goodput: 5,
					Codes: map[string]uint64{"Unavailable": 49950}, ExactLimit: 20, Exact: exact(0, 0, 0, 0)},
				{Deadline: "none", Seconds: 10, Calls: 40000, Decisions: 30000, Allowed: 30000, Goodput: 3000,
					Codes: map[string]uint64{"Unavailable": 10000}, ExactLimit: 20, Exact: exact(20, 18, 20, 20)},
			}},
			{Name: noopName, Pass: 1, Closed: []*phaseResult{
				{Deadline: "20ms", Seconds: 10, Calls: 60000, Decisions: 59000, Allowed: 59000, Goodput: 5900,
					Codes: map[string]uint64{"DeadlineExceeded": 1000}, Cores: map[string]float64{cpuLoadgen: 0.6, cpuServer: 0.7, cpuSpinners: 0.7}},
				{Deadline: "none", Seconds: 10, Calls: 70000, Decisions: 70000, Allowed: 70000, Goodput: 7000},
			}, Open: &phaseResult{Deadline: "20ms", Seconds: 10, Rate: 8000, Calls: 80000, Decisions: 50000, Allowed: 50000, Goodput: 4000,
				Codes: map[string]uint64{"DeadlineExceeded": 30000}, Cores: map[string]float64{cpuLoadgen: 0.5, cpuServer: 0.75, cpuSpinners: 0.5}}},
		},
	}
}

// sampleThreePassReport is the sample run with three passes of the newer
// build's closed loops.
func sampleThreePassReport() *overloadReport {
	r := sampleOverloadReport()
	r.Config.Passes = 3
	for pass := 2; pass <= 3; pass++ {
		after := *r.Variants[0]
		after.Pass = pass
		closed := *after.Closed[1]
		closed.Decisions, closed.Codes = closed.Calls-uint64(pass-2), nil
		if pass == 3 {
			closed.Codes = map[string]uint64{"Unavailable": 1}
		}
		after.Closed = []*phaseResult{after.Closed[0], &closed}
		noop := *r.Variants[2]
		noop.Pass = pass
		r.Variants = append(r.Variants, &after, &noop)
	}
	return r
}

func TestOverloadPasses(t *testing.T) {
	order := passOrder([]overloadBuild{{name: "after"}, {name: "before"}, {name: noopName}}, 3)
	var got []string
	for _, b := range order {
		got = append(got, fmt.Sprintf("%s %d", b.name, b.pass))
	}
	assert.Equal(t, []string{"after 1", "before 1", "no-op 1", "no-op 2", "before 2", "after 2", "after 3", "before 3", "no-op 3"}, got)

	var md, headline strings.Builder
	r := sampleThreePassReport()
	r.writeDetail(&md, "")
	r.writeHeadline(&headline)
	out := md.String()
	assert.NotContains(t, out, "%!", "no formatting mistakes")
	assert.NotContains(t, headline.String(), "%!", "no formatting mistakes")
	assert.Contains(t, out, "| after, pass 3 (abc) | none | closed, 128 callers | 25 000 | 24 999 |")
	out = headline.String()
	assert.Contains(t, out, "| none | after | 100.0% | 0.0% | 0.0% | 2 500 | 250.00ms | 400.00ms | 4 of 4 | 0 | in 2 of 3 passes |",
		"medians of three passes; the pass with a failure answer misses the goal")
	assert.Contains(t, out, "| none | no-op | 100.0% | 0.0% | 0.0% | 7 000 |")
}

func TestOverloadSection(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, pagePath), []byte("# Benchmarks\n\nThe rest.\n"), 0o644))
	r := sampleOverloadReport()
	require.NoError(t, writeOverloadFiles(dir, r, io.Discard))
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		require.NoError(t, err)
		return string(b)
	}
	page, md := read(pagePath), read(overloadDetailPath)
	assert.True(t, strings.HasPrefix(page, "# Benchmarks\n\nThe rest.\n\n"+overloadMarker.begin()), "appended after what was there")
	assert.NotContains(t, page, "%!", "no formatting mistakes")
	assert.NotContains(t, md, "%!", "no formatting mistakes")
	assert.Contains(t, md, "| after, pass 1 (abc) | 20ms | closed, 128 callers | 30 000 | 20 000 | 2 000 | 95% | DeadlineExceeded 3 000, Unavailable 7 000 |")
	assert.Contains(t, md, "| 3 of 4 | 0 | **missed**: 10.0% not answered in time, more than the no-op's 1.7% + 5 points |",
		"3 000 of 30 000 late against the no-op's 1 000 of 60 000; 19 of L = 20 is under, not above")
	assert.Contains(t, md, "| after, pass 1 (abc) | none | closed, 128 callers | 25 000 | 25 000 | 2 500 | 125% | none | 0µs | 250.00ms | 400.00ms | 4 of 4 | 0 | met |")
	assert.Contains(t, md, "| 20ms | open, 8 000/s | 80 000 | 17 000 | 1 700 | 85% |", "the open loop's goodput: 1 700 of a capacity of 2 000")
	assert.Contains(t, md, "| 2 of 4 | 1 | **missed**: 1 of 4 limits above L |", "21 of L = 20")
	assert.Contains(t, md, "| before, pass 1 (76db7e9) | none | closed, 128 callers | 40 000 | 30 000 |")
	assert.Contains(t, md, "**missed**: 10000 calls not answered with a decision, 1 of 4 limits not exact |")
	assert.Contains(t, page, "| none | before | 75.0% | 0.0% | 25.0% | 3 000 |")
	assert.Contains(t, page, "| 20ms | no-op | 98.3% | 1.7% | 0.0% | 5 900 |")
	assert.Contains(t, md, "| before, pass 1 | none | closed | 20 (100) | 18 (100) | 20 (100) | 20 (100) |")
	assert.Contains(t, md, "| after, pass 1 | – | – | – | 1 234 / – | 40 |")
	assert.NotContains(t, md, "| no-op, pass 1 | – |", "no server counters of the no-op services")
	assert.Contains(t, md, "| no-op, pass 1 | 20ms | open | 0.50 | 0.75 | – | 0.50 |")
	assert.Contains(t, md, "| after, pass 1 | none | closed | 0.40 | 0.60 | 0.30 | 0.70 |")
	assert.Contains(t, md, "20ms and none (`none`: no `grpc-timeout` at all)")
	assert.Contains(t, page, "20ms and none (`none`: no `grpc-timeout` at all)")
	assert.Contains(t, page, "*after* the server built from commit abc; *before* the server built from commit 76db7e9;")
	assert.Contains(t, page, "[benchmarks/overload.md](benchmarks/overload.md)")

	// A new run replaces the block and the detail page and keeps the
	// detail's analysis; a bench run keeps both.
	edited := strings.Replace(md, overloadAnalysisMarker.kept(md), "Why it went so.", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, overloadDetailPath), []byte(edited), 0o644))
	r.Variants[0].Closed[0].Calls = 31000
	require.NoError(t, writeOverloadFiles(dir, r, io.Discard))
	page, md = read(pagePath), read(overloadDetailPath)
	assert.Equal(t, 1, strings.Count(page, overloadMarker.begin()))
	assert.Contains(t, md, "| 31 000 |")
	assert.Equal(t, "Why it went so.", overloadAnalysisMarker.kept(md))

	require.NoError(t, writeReportFiles(dir, sampleReport(), io.Discard))
	assert.Contains(t, read(overloadDetailPath), "Why it went so.")
	assert.Contains(t, read(overloadDetailPath), "| 31 000 |")
	assert.Equal(t, page, strings.Replace(read(pagePath), "\n"+benchMarker.wrap(benchMarker.kept(read(pagePath))), "", 1),
		"the bench adds its block and leaves the overload's")
}

// TestOverloadKeepsTheRedisCostSection: writing the overload block
// replaces only what stands between its own markers.
func TestOverloadKeepsTheRedisCostSection(t *testing.T) {
	dir := t.TempDir()
	md := "# Benchmarks\n\n" + rediscostMarker.wrap("## Redis cost\nfigures") + "\n" + overloadMarker.wrap("old overload")
	require.NoError(t, os.WriteFile(filepath.Join(dir, pagePath), []byte(md), 0o644))
	require.NoError(t, writeOverloadFiles(dir, sampleOverloadReport(), io.Discard))
	b, err := os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.Contains(t, string(b), rediscostMarker.wrap("## Redis cost\nfigures"))
	assert.NotContains(t, string(b), "old overload")
	assert.Equal(t, 1, strings.Count(string(b), overloadMarker.begin()))
}

func TestOverloadDeadlines(t *testing.T) {
	got, err := parseDeadlines("20ms, 1s,none")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{20 * time.Millisecond, time.Second, 0}, got)
	assert.Equal(t, []string{"20ms", "1s", "none"}, []string{deadlineText(got[0]), deadlineText(got[1]), deadlineText(got[2])})
	for _, bad := range []string{"0s", "soon", "", "20ms,-1s"} {
		_, err := parseDeadlines(bad)
		assert.ErrorContains(t, err, "-deadlines", "%q", bad)
	}
}
