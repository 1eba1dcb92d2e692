package test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rediscostMedian returns the median, over the runs of the latest rediscost
// report (benchmarks/rediscost.json), of a run's CPU µs per decision of
// who ("redis" or "server").
func rediscostMedian(t *testing.T, runs map[string][]struct {
	CPU map[string]float64 `json:"cpu_us_per_decision"`
}, name, who string) float64 {
	t.Helper()
	rs, ok := runs[name]
	require.True(t, ok, "the report has no run %s", name)
	var vs []float64
	for _, r := range rs {
		vs = append(vs, r.CPU[who])
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// TestSizingQuotesTheLatestReport: every figure of the table of
// docs/sizing.md is the median the latest rediscost report measured, as
// rounded there, and the page's sums follow from them: a new run of the
// report that moves a figure fails this test until the page follows.
func TestSizingQuotesTheLatestReport(t *testing.T) {
	var report struct {
		Runs map[string][]struct {
			CPU map[string]float64 `json:"cpu_us_per_decision"`
		} `json:"runs"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "benchmarks", "rediscost.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &report))
	page, err := os.ReadFile(filepath.Join(repoRoot, "docs", "sizing.md"))
	require.NoError(t, err)
	text := string(page)

	row := regexp.MustCompile(`(?m)^\| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$`)
	cold := map[string]float64{}
	var seen []string
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		alg := m[1]
		seen = append(seen, alg)
		coldRun := "rediscost/standalone/" + alg + "/keys=1000/c=64"
		hotRun := "rediscost/standalone/" + alg + "/keys=1/c=64/replicas=2/per-second"
		for i, want := range []struct {
			run, who string
			digits   int
		}{{coldRun, "redis", 1}, {coldRun, "server", 1}, {hotRun, "redis", 2}, {hotRun, "server", 1}} {
			v := rediscostMedian(t, report.Runs, want.run, want.who)
			assert.Equal(t, fmt.Sprintf("%.*f", want.digits, v), m[2+i], "%s: %s µs per decision of %s", alg, want.who, want.run)
		}
		cold[alg] = rediscostMedian(t, report.Runs, coldRun, "redis")
	}
	assert.Equal(t, []string{"fixed_window", "sliding_window_counter", "sliding_window_log", "token_bucket"}, seen)

	// The sums the page works out from them.
	counterCold, counterHot := rediscostMedian(t, report.Runs, "rediscost/standalone/sliding_window_counter/keys=1000/c=64", "redis"),
		rediscostMedian(t, report.Runs, "rediscost/standalone/sliding_window_counter/keys=1/c=64/replicas=2/per-second", "redis")
	serverCold, serverHot := rediscostMedian(t, report.Runs, "rediscost/standalone/sliding_window_counter/keys=1000/c=64", "server"),
		rediscostMedian(t, report.Runs, "rediscost/standalone/sliding_window_counter/keys=1/c=64/replicas=2/per-second", "server")
	redisCores := (150_000*round1(counterCold) + 50_000*round2(counterHot)) / 1e6
	serverCores := (150_000*round1(serverCold) + 50_000*round1(serverHot)) / 1e6
	for _, claim := range []string{
		fmt.Sprintf("150 000 × %.1f µs = %.1f cores", round1(counterCold), 150_000*round1(counterCold)/1e6),
		fmt.Sprintf("50 000 × %.2f µs = %.2f cores", round2(counterHot), 50_000*round2(counterHot)/1e6),
		fmt.Sprintf("%.2f cores in all", redisCores),
		fmt.Sprintf("%.2f / 0.6 = %.1f, so **a Redis Cluster of %d masters**", redisCores, redisCores/0.6, int(math.Ceil(redisCores/0.6))),
		fmt.Sprintf("would cost %.2f cores", 150_000*round1(cold["fixed_window"])/1e6),
		fmt.Sprintf("on sliding logs, %.1f cores, %d masters", 150_000*round1(cold["sliding_window_log"])/1e6, int(math.Ceil(150_000*round1(cold["sliding_window_log"])/1e6/0.6))),
		fmt.Sprintf("= %.1f cores. At 60%%", serverCores),
	} {
		assert.True(t, strings.Contains(strings.Join(strings.Fields(text), " "), claim), "docs/sizing.md says %q", claim)
	}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round2(v float64) float64 { return math.Round(v*100) / 100 }
