package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleReport is a small bench result: no-op, memory and standalone at two
// concurrencies, raw EVALSHA, and one hot-key cell.
func sampleReport() *benchReport {
	rls := func(group, backend string, c int, rate, p99 float64) *result {
		return &result{Mode: modeRLS, Group: group, Backend: backend, Key: sweepAlgorithm, Keys: sweepKeys,
			Concurrency: c, Rate: rate, P50: p99 / 3, P99: p99, P999: p99 * 1.5, Decisions: uint64(rate) * 3, Allowed: uint64(rate) * 3}
	}
	standalone := rls(groupMatrix, backendStandalone, 64, 7000, 6000)
	standalone.Redis = newRedisCost(commandStats{"evalsha": 21000, "zadd": 21000}, standalone.Decisions)
	standalone.Name = "matrix/standalone"
	standalone.CPU = map[string]float64{cpuLoadgen: 40, cpuServer: 70, cpuRedis: 50}
	noopWithCPU := rls(groupBaseline, backendNoop, 64, 10000, 2000)
	noopWithCPU.CPU = map[string]float64{cpuLoadgen: 20, cpuServer: 20}
	hot := &result{Mode: modeRLS, Group: groupHot, Backend: backendStandalone, Key: sweepAlgorithm, Keys: 1, Over: hotOver,
		Concurrency: 64, Rate: 9500, Decisions: 28500, Allowed: 2850, Denied: 25650, P99: 4000}
	hot.Redis = newRedisCost(commandStats{"evalsha": 28500}, hot.Decisions)
	return &benchReport{
		Date: "2026-01-01 00:00 UTC", Took: "1m", Command: "go -C bench run ./cmd/loadgen bench",
		Config: benchConfig{Concurrency: 64, Sweep: []int{4, 64}, Keys: []int{sweepKeys}, Conns: 2,
			DurationText: "3s", WarmupText: "500ms", BackendTimeoutText: "1s"},
		Machine: machine{CPU: "test CPU", CPUs: 2},
		Results: []*result{
			noopWithCPU,
			rls(groupBaseline, backendNoop, 4, 6000, 800),
			{Mode: modeEvalsha, Group: groupEvalsha, Backend: backendStandalone, Script: scriptFixedWindow, Pipeline: 1, Keys: sweepKeys, Concurrency: 64, Rate: 14000, P99: 3000},
			rls(groupMatrix, backendMemory, 64, 9000, 2500),
			standalone,
			rls(groupSweep, backendMemory, 4, 5000, 900),
			hot,
			rls(groupBaseline, backendNoop, 64, 12000, 1800), // the closing no-op run
		},
	}
}

func TestTargets(t *testing.T) {
	rows := sampleReport().targets()
	require.Len(t, rows, 3)
	// No-op at 64 is the mean of both runs: 11 000/s.
	assert.Contains(t, rows[0].scenario, "(i) memory")
	assert.Contains(t, rows[0].measured, "81.8% of no-op")
	assert.Contains(t, rows[0].verdict, "**missed** by 3.2 points")

	assert.NotContains(t, rows[0].measured, "by CPU", "memory's CPU was not measured")

	assert.Contains(t, rows[1].scenario, "(ii) Redis standalone")
	assert.Contains(t, rows[1].measured, "by CPU per decision 25.0%", "40µs over 160µs")
	assert.Contains(t, rows[1].verdict, "**missed** by 1.4 points")
	assert.Contains(t, rows[1].verdict, "p99 **missed** by 1.00ms")

	assert.Contains(t, rows[2].scenario, "(iii) standalone")
	assert.Contains(t, rows[2].verdict, "**missed** by 3.6 points")
	assert.Contains(t, rows[2].verdict, "1.00 per decision, 10× the bound")
	assert.Contains(t, rows[2].measured, "90% denied")
}

func TestTargetsMet(t *testing.T) {
	r := sampleReport()
	for _, x := range r.Results {
		if x.Backend != backendNoop {
			x.Rate, x.P99 = 10900, 1000
		}
		if x.Group == groupHot {
			x.Redis = newRedisCost(commandStats{"evalsha": 100}, x.Decisions)
		}
	}
	for _, row := range r.targets() {
		assert.NotContains(t, row.verdict, "missed", row.scenario)
		assert.Contains(t, row.verdict, "met", row.scenario)
	}
}

func TestMarkdownKeepsTheAnalysis(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	require.NoError(t, writeReportFiles(dir, r, io.Discard))
	first, err := os.ReadFile(filepath.Join(dir, reportDetailPath))
	require.NoError(t, err)
	md := string(first)
	assert.NotContains(t, md, "%!", "no formatting mistakes")
	assert.Contains(t, md, "| CPU | test CPU × 2 |")
	assert.Contains(t, md, "![decisions/s and p99 against concurrency](bench.svg)")
	assert.Contains(t, md, "| 4 | 6 000 | 800µs | 5 000 | 900µs | – | – | – | – |")
	assert.Contains(t, md, "| matrix/standalone | 7 000 | 40 | 70 | 50 | 160 | 12 500 |", "2 CPUs over 160µs per decision")
	page, err := os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.NotContains(t, string(page), "%!", "no formatting mistakes")
	assert.Contains(t, string(page), "| standalone | sliding_window_log | 7 000 | 64% | 2.00ms | 6.00ms | 70 | 50 |",
		"the headline: 7 000 of the no-op's mean of 11 000")
	assert.Contains(t, string(page), "| no-op service | – | 11 000 | 100% |")
	assert.Contains(t, string(page), "On the memory backend ratewarden answered 82% of the no-op's decisions per second and on one Redis 64%.")
	assert.Contains(t, string(page), "[benchmarks/bench.md](benchmarks/bench.md)")

	// Hand-written analysis survives a new rendering.
	edited := strings.Replace(md, benchAnalysisMarker.kept(md), "The sliding log spends its time in Redis.\n\nSecond paragraph.", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, reportDetailPath), []byte(edited), 0o644))
	require.NoError(t, writeReportFiles(dir, r, io.Discard))
	second, err := os.ReadFile(filepath.Join(dir, reportDetailPath))
	require.NoError(t, err)
	assert.Equal(t, "The sliding log spends its time in Redis.\n\nSecond paragraph.", benchAnalysisMarker.kept(string(second)))
	assert.Equal(t, edited, string(second))
	pageAgain, err := os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.Equal(t, string(page), string(pageAgain), "a new rendering replaces the bench's block and nothing else")

	// The JSON renders the same report again.
	var out bytes.Buffer
	require.NoError(t, reportCommand([]string{"-in", filepath.Join(dir, reportJSONPath), "-out", dir}, &out))
	third, err := os.ReadFile(filepath.Join(dir, reportDetailPath))
	require.NoError(t, err)
	assert.Equal(t, string(second), string(third))
}

// TestMethodSaysWhatTheCodeDoes: the detail page's method names the
// histogram the load generator records into, and the settings the servers
// run with.
func TestMethodSaysWhatTheCodeDoes(t *testing.T) {
	var md bytes.Buffer
	sampleReport().writeDetail(&md, "")
	out := md.String()
	assert.Contains(t, out, "into an HdrHistogram per caller (3 significant digits: a percentile is within 0.1% of the value recorded)")
	assert.NotContains(t, out, "1/64", "the log-bucketed histogram is gone")
	assert.Contains(t, out, "`RLS_BACKEND_TIMEOUT=1s`")
	assert.Contains(t, out, "The calls carry no deadline, so `RLS_BACKEND_TIMEOUT` is each request's budget")
	assert.Contains(t, out, "each is a limit of its own of 1 000 000 000 a day (100 000 for the algorithm that logs every hit)")
	assert.NotContains(t, out, "one call per round trip like the", "the server shares round trips between requests")
}

func TestChartIsWellFormedSVG(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeChart(&b, sampleReport().sweepSeries()))
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	texts := map[string]bool{}
	var elements int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			elements++
		case xml.CharData:
			texts[strings.TrimSpace(string(tok))] = true
		}
	}
	assert.Greater(t, elements, 20)
	for _, want := range []string{"no-op", "memory", "standalone", "raw EVALSHA", "decisions per second", "p99 latency", "concurrent callers (log scale)"} {
		assert.True(t, texts[want], "the chart says %q", want)
	}
}

func TestChartNeedsPoints(t *testing.T) {
	assert.Error(t, writeChart(io.Discard, nil))
}

func TestNiceStep(t *testing.T) {
	for _, tt := range []struct{ raw, want float64 }{
		{0, 1}, {0.7, 1}, {1, 1}, {1.5, 2}, {3, 5}, {7, 10}, {1200, 2000}, {4100, 5000},
	} {
		assert.Equal(t, tt.want, niceStep(tt.raw), "raw %v", tt.raw)
	}
}

func TestFormatting(t *testing.T) {
	assert.Equal(t, "0", fmtRate(0))
	assert.Equal(t, "999", fmtRate(999))
	assert.Equal(t, "1 000", fmtRate(1000))
	assert.Equal(t, "123 456 789", fmtRate(123456789))
	assert.Equal(t, "850µs", fmtMicros(850))
	assert.Equal(t, "4.20ms", fmtMicros(4200))
	assert.Equal(t, "1.50s", fmtMicros(1.5e6))
	assert.Equal(t, "0.1 ms", fmtMillis(0.1))
	assert.Equal(t, "10 ms", fmtMillis(10))
}

func TestRepeatedCellsShowTheirSlowestRun(t *testing.T) {
	r := sampleReport()
	var md bytes.Buffer
	r.writeDetail(&md, "")
	assert.NotContains(t, md.String(), "slowest run")

	r.Config.Repeat = 3
	r.Results[3].RepeatRates = []float64{9000, 7000, 8500} // matrix/memory
	md.Reset()
	r.writeDetail(&md, "")
	assert.Contains(t, md.String(), "each cell ran 3 times")
	assert.Contains(t, md.String(), "| slowest run /s |")
	assert.Contains(t, md.String(), "| 7 000 |")
	assert.NotContains(t, md.String(), "%!")
}

func TestReproduceCommandLeavesOutPaths(t *testing.T) {
	fs := newFlagSet("bench", "", io.Discard)
	fs.String("root", ".", "")
	fs.String("out", "", "")
	fs.Bool("quick", false, "")
	fs.Int("repeat", 1, "")
	fs.Duration("duration", time.Second, "")
	require.NoError(t, fs.Parse([]string{"-root", "/src", "-out", "/tmp/x", "-quick", "-repeat", "3", "-duration", "2s"}))
	assert.Equal(t, "go -C bench run ./cmd/loadgen bench -duration=2s -quick -repeat=3", reproduceCommand(fs, "bench"))
}
