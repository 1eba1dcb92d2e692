package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleOverloadReport is an overload run of two builds.
func sampleOverloadReport() *overloadReport {
	exact := func(admitted ...uint64) []exactCount {
		var out []exactCount
		for i, a := range admitted {
			out = append(out, exactCount{Algorithm: algorithmNames()[i%4], Value: "e.x", Offered: 100, Admitted: a})
		}
		return out
	}
	return &overloadReport{
		Date: "2026-11-23 22:00 UTC", Took: "2m", Command: "go run ./cmd/loadgen overload",
		Config: overloadConfig{Callers: 128, Replicas: 2, Spinners: 2, Overload: 4, Goodput: 0.8,
			ExactLimit: 20, ExactKeys: 1, ExactShare: 0.1, DeadlineText: "20ms", WarmupText: "1s", ClosedText: "10s", OpenText: "10s"},
		Machine: machine{CPU: "test CPU", CPUs: 2, LoadBefore: "1 1 1", LoadAfter: "9 9 9"},
		Variants: []*overloadRound{
			{Name: "after", Commit: "abc", Servers: map[string]float64{`ratewarden_requests_shed_total{reason="deadline"}`: 1234, `ratewarden_backend_inflight_limit`: 40},
				Closed: &phaseResult{Seconds: 10, Calls: 30000, Decisions: 20000, Allowed: 19000, Denied: 1000,
					Goodput: 1900, Codes: map[string]uint64{"Unavailable": 10000}, ExactLimit: 20, Exact: exact(20, 20, 20, 20)},
				Open: &phaseResult{Seconds: 10, Rate: 8000, Calls: 80000, Decisions: 17000, Allowed: 17000, Goodput: 1700,
					Codes: map[string]uint64{"Unavailable": 60000, "DeadlineExceeded": 3000}, ExactLimit: 20, Exact: exact(20, 19, 20, 20)}},
			{Name: "before", Commit: "76db7e9", Closed: &phaseResult{Seconds: 10, Calls: 50000, Decisions: 50, Allowed: 50, Goodput: 5,
				Codes: map[string]uint64{"Unavailable": 49950}, ExactLimit: 20, Exact: exact(0, 0, 0, 0)}},
		},
		Ceiling: &phaseResult{Seconds: 10, Rate: 8000, Calls: 80000, Decisions: 50000, Allowed: 50000, Goodput: 4000,
			Codes: map[string]uint64{"DeadlineExceeded": 30000}, Cores: map[string]float64{cpuLoadgen: 0.5, cpuServer: 0.75, cpuSpinners: 0.5}},
		CeilingClosed: &phaseResult{Seconds: 10, Calls: 60000, Decisions: 59000, Allowed: 59000, Goodput: 5900,
			Codes: map[string]uint64{"DeadlineExceeded": 1000}, Cores: map[string]float64{cpuLoadgen: 0.6, cpuServer: 0.7, cpuSpinners: 0.7}},
	}
}

// sampleTwoPassReport is an overload run of two builds, two passes each.
func sampleTwoPassReport() *overloadReport {
	r := sampleOverloadReport()
	r.Config.Passes = 2
	after, before := r.Variants[0], r.Variants[1]
	after.Pass, before.Pass = 1, 1
	before.Open = &phaseResult{Seconds: 10, Rate: 8000, Calls: 80000, Decisions: 1000, Goodput: 100}
	before2, after2 := *before, *after
	before2.Pass, after2.Pass = 2, 2
	closed := *after.Closed
	closed.Decisions, closed.Codes = 10000, map[string]uint64{"DeadlineExceeded": 3000}
	after2.Closed = &closed
	r.Variants = append(r.Variants, &before2, &after2)
	return r
}

func TestOverloadPasses(t *testing.T) {
	order := passOrder([]overloadBuild{{name: "after"}, {name: "before"}}, 3)
	var got []string
	for _, b := range order {
		got = append(got, fmt.Sprintf("%s %d", b.name, b.pass))
	}
	assert.Equal(t, []string{"after 1", "before 1", "before 2", "after 2", "after 3", "before 3"}, got)

	var md strings.Builder
	sampleTwoPassReport().writeMarkdown(&md, "")
	out := md.String()
	assert.NotContains(t, out, "%!", "no formatting mistakes")
	assert.Contains(t, out, "| after, pass 2 (abc) | closed, 128 callers | 30 000 | 10 000 | 1 000 |")
	assert.Contains(t, out, "| after | 1 500 | 5% | 1 700 | 7 of 8 |", "means of 2 000 and 1 000 decided a second, of 0% and 10% late")
	assert.Contains(t, out, "| before | 5 | 0% | 100 | 0 of 4 |")
	assert.Contains(t, out, "| after ÷ before | 300.00× | +5.0 points | 17.00× | |")
}

func TestOverloadSection(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, reportMDPath), []byte("# Benchmarks\n\nThe rest.\n"), 0o644))
	r := sampleOverloadReport()
	require.NoError(t, writeOverloadFiles(dir, r, io.Discard))
	b, err := os.ReadFile(filepath.Join(dir, reportMDPath))
	require.NoError(t, err)
	md := string(b)
	assert.True(t, strings.HasPrefix(md, "# Benchmarks\n\nThe rest.\n\n"+overloadBegin), "appended after what was there")
	assert.NotContains(t, md, "%!", "no formatting mistakes")
	assert.Contains(t, md, "| after (abc) | closed, 128 callers | 30 000 | 20 000 | 2 000 | 1 900 | 95% | Unavailable 10 000 |")
	assert.Contains(t, md, "| 4 of 4 | held |")
	assert.Contains(t, md, "**missed**: 3000 calls not answered in time, 1 of 4 limits not exact")
	assert.Contains(t, md, "| before | closed | 0 (100) | 0 (100) | 0 (100) | 0 (100) |")
	assert.Contains(t, md, "| after | – | – | – | 1 234 / – | 40 | – / – / – |")
	assert.Contains(t, md, "| no-op | open, 8 000/s | 80 000 | 4 000 | 50% | 200% | DeadlineExceeded 30 000 |",
		"the ceiling: 4 000 of the 8 000 calls a second answered in time, twice the capacity")
	assert.Contains(t, md, "| no-op | closed, 128 callers | 60 000 | 5 900 | 98% | 295% | DeadlineExceeded 1 000 |",
		"the closed loop's ceiling: 1 000 of 60 000 calls not answered in time even when answering costs nothing")
	assert.Contains(t, md, "| no-op (ceiling) | open | 0.50 | 0.75 | – | 0.50 |")
	assert.Contains(t, md, "| no-op (ceiling) | closed | 0.60 | 0.70 | – | 0.70 |")

	// A new run replaces the section and keeps its analysis; a bench run
	// keeps the section.
	edited := strings.Replace(md, overloadAnalysisBegin+"\n", overloadAnalysisBegin+"\nWhy it went so.\n", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, reportMDPath), []byte(edited), 0o644))
	r.Variants[0].Closed.Calls = 31000
	require.NoError(t, writeOverloadFiles(dir, r, io.Discard))
	b, err = os.ReadFile(filepath.Join(dir, reportMDPath))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(b), overloadBegin))
	assert.Contains(t, string(b), "| 31 000 |")
	assert.Equal(t, "Why it went so.", keptBetween(string(b), overloadAnalysisBegin, overloadAnalysisEnd))

	require.NoError(t, writeReportFiles(dir, sampleReport(), io.Discard))
	b, err = os.ReadFile(filepath.Join(dir, reportMDPath))
	require.NoError(t, err)
	assert.Contains(t, string(b), "Why it went so.")
	assert.Contains(t, string(b), "| 31 000 |")
}

// TestOverloadKeepsTheRedisCostSection: writing the overload section
// replaces only what stands between its own markers.
func TestOverloadKeepsTheRedisCostSection(t *testing.T) {
	dir := t.TempDir()
	md := "# Benchmarks\n\n" + rediscostSectionBegin + "\n## Redis cost\nfigures\n" + rediscostSectionEnd + "\n\n" +
		overloadBegin + "\nold overload\n" + overloadEnd + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, reportMDPath), []byte(md), 0o644))
	require.NoError(t, writeOverloadFiles(dir, sampleOverloadReport(), io.Discard))
	b, err := os.ReadFile(filepath.Join(dir, reportMDPath))
	require.NoError(t, err)
	assert.Contains(t, string(b), rediscostSectionBegin+"\n## Redis cost\nfigures\n"+rediscostSectionEnd)
	assert.NotContains(t, string(b), "old overload")
	assert.Equal(t, 1, strings.Count(string(b), overloadBegin))
}
