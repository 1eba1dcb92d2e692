package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The files a bench writes, relative to its output directory, beside its
// block of the page: the JSON they are all rendered from, the detail page
// and its chart.
const (
	reportJSONPath   = detailDir + "/bench.json"
	reportDetailPath = detailDir + "/bench.md"
	reportSVGPath    = detailDir + "/bench.svg"
)

// The targets the report checks.
const (
	targetMemoryShare = 0.85  // (i) memory ≥ 85% of no-op
	targetLogShare    = 0.65  // (ii) Redis sliding log, 1000 keys ≥ 65% of no-op
	targetLogP99US    = 5000  // (ii) … with p99 < 5 ms
	targetHotShare    = 0.90  // (iii) 90% over limit on one hot key ≥ 90% of no-op
	targetHotCommands = 0.1   // (iii) … with ≤ 0.1 Redis commands per decision
	percent           = 100.0 // for formatting shares
)

// benchReport is everything one bench run measured: the contents of
// benchmarks/bench.json, from which its block of the page, its detail page
// and the chart are rendered.
type benchReport struct {
	Date     string          `json:"date"`
	Took     string          `json:"took"`
	Command  string          `json:"command"`
	Config   benchConfig     `json:"config"`
	Machine  machine         `json:"machine"`
	Results  []*result       `json:"results"`
	Profiles []profileResult `json:"profiles,omitempty"`
}

// writeReportFiles writes the JSON, the chart, the detail page (keeping the
// analysis written by hand in an earlier one) and the bench's block of the
// page into dir.
func writeReportFiles(dir string, r *benchReport, log io.Writer) error {
	var svg bytes.Buffer
	if err := writeChart(&svg, r.sweepSeries()); err != nil {
		return err
	}
	err := writeGenerated(dir, generated{
		block: benchMarker, analysis: benchAnalysisMarker, data: r, jsonPath: reportJSONPath, detailPath: reportDetailPath,
		render: func(detail, headline io.Writer, analysis string) {
			r.writeDetail(detail, analysis)
			r.writeHeadline(headline)
		},
		extra: []outputFile{{reportSVGPath, svg.Bytes()}},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "loadgen: wrote %s, %s, %s and the bench's tables of %s in %s\n", reportDetailPath, reportSVGPath, reportJSONPath, pagePath, dir)
	return nil
}

// noop returns the mean decisions per second and p99 of the no-op runs at
// concurrency c, and whether there was any.
func (r *benchReport) noop(c int) (rate, p99 float64, ok bool) {
	n := 0
	for _, x := range r.Results {
		if x.Backend == backendNoop && x.Concurrency == c {
			rate += x.Rate
			p99 += x.P99
			n++
		}
	}
	if n == 0 {
		return 0, 0, false
	}
	return rate / float64(n), p99 / float64(n), true
}

// noopCPU returns the mean CPU per decision of the no-op runs at
// concurrency c that measured it, or 0.
func (r *benchReport) noopCPU(c int) float64 {
	sum, n := 0.0, 0
	for _, x := range r.Results {
		if t := cpuTotal(x); x.Backend == backendNoop && x.Concurrency == c && t > 0 {
			sum += t
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// cpuTotal returns the CPU per decision of every process of a run, or 0
// when it was not measured.
func cpuTotal(x *result) float64 {
	t := 0.0
	for _, v := range x.CPU {
		t += v
	}
	return t
}

// find returns the first result that match accepts, or nil.
func (r *benchReport) find(match func(*result) bool) *result {
	for _, x := range r.Results {
		if match(x) {
			return x
		}
	}
	return nil
}

// all returns every result that match accepts, in run order.
func (r *benchReport) all(match func(*result) bool) []*result {
	var out []*result
	for _, x := range r.Results {
		if match(x) {
			out = append(out, x)
		}
	}
	return out
}

// rlsCell returns the measurement of algorithm alg on backend with keys
// values at concurrency c, without over-limit traffic.
func (r *benchReport) rlsCell(backend, alg string, keys, c int) *result {
	return r.find(func(x *result) bool {
		return (x.Group == groupMatrix || x.Group == groupSweep) && x.Backend == backend &&
			x.Key == alg && x.Keys == keys && x.Concurrency == c && x.Over == 0
	})
}

// evalshaCell returns the raw EVALSHA measurement of script on backend.
func (r *benchReport) evalshaCell(backend, script string, pipeline, c int) *result {
	return r.find(func(x *result) bool {
		return x.Group == groupEvalsha && x.Backend == backend && x.Script == script && x.Pipeline == pipeline && x.Concurrency == c
	})
}

// share returns rate / of, or NaN when of is 0.
func share(rate, of float64) float64 {
	if of == 0 {
		return math.NaN()
	}
	return rate / of
}

// fmtShare formats a share as a percentage.
func fmtShare(s float64) string {
	if math.IsNaN(s) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", percent*s)
}

// fmtShare1 formats a share as a percentage with one decimal.
func fmtShare1(s float64) string {
	if math.IsNaN(s) {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", percent*s)
}

// fmtRate formats decisions per second with thin groups of thousands.
func fmtRate(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(" ")
		}
		b.WriteRune(ch)
	}
	return b.String()
}

// fmtPer formats a per-decision figure.
func fmtPer(r *result, per func(*redisCost) float64) string {
	if r.Redis == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", per(r.Redis))
}

// fmtCPU formats the CPU microseconds per decision of one process group.
func fmtCPU(x *result, name string) string {
	v, ok := x.CPU[name]
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// writeCPU writes where the machine's CPU went, per decision, in the cells
// of the target scenarios and their baselines.
func (r *benchReport) writeCPU(w io.Writer) {
	c := r.Config.Concurrency
	var rows []*result
	add := func(x *result) {
		if x != nil && x.CPU != nil && !slices.Contains(rows, x) {
			rows = append(rows, x)
		}
	}
	add(r.find(func(x *result) bool { return x.Backend == backendNoop && x.Concurrency == c }))
	for _, pipeline := range []int{1, coalescedPipeline} {
		add(r.evalshaCell(backendStandalone, scriptFixedWindow, pipeline, c))
	}
	for _, backend := range []string{backendMemory, backendStandalone, backendCluster} {
		add(r.rlsCell(backend, sweepAlgorithm, sweepKeys, c))
	}
	for _, x := range r.all(func(x *result) bool { return x.Group == groupHot && x.Key == sweepAlgorithm }) {
		add(x)
	}
	if len(rows) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Where the CPU goes (%d callers)", c)
	p("")
	p("CPU time (user + system, from /proc) that the load generator, the server and every Redis process used during")
	p("the measurement, in microseconds per decision (per script call for raw EVALSHA; the no-op's row is its first")
	p("run). The processes share %d CPUs, so %d s of CPU a second over the total is the most decisions per second", r.Machine.CPUs, r.Machine.CPUs)
	p("this machine could make with that mix.")
	p("")
	p("| cell | decisions/s | loadgen | server | Redis | total | %d CPUs ÷ total |", r.Machine.CPUs)
	p("|---|---|---|---|---|---|---|")
	for _, x := range rows {
		total := cpuTotal(x)
		ceiling := "–"
		if total > 0 {
			ceiling = fmtRate(float64(r.Machine.CPUs) * 1e6 / total)
		}
		p("| %s | %s | %s | %s | %s | %.0f | %s |", x.Name, fmtRate(x.Rate), fmtCPU(x, cpuLoadgen), fmtCPU(x, cpuServer), fmtCPU(x, cpuRedis), total, ceiling)
	}
	p("")
}

// slowestHead, slowestRule and slowestCell add a column with the slowest
// run of each cell to a table, when cells ran more than once.
func (r *benchReport) slowestHead() string {
	if r.Config.Repeat < 2 {
		return ""
	}
	return " slowest run /s |"
}

func (r *benchReport) slowestRule() string {
	if r.Config.Repeat < 2 {
		return ""
	}
	return "---|"
}

func (r *benchReport) slowestCell(x *result) string {
	if r.Config.Repeat < 2 {
		return ""
	}
	if len(x.RepeatRates) == 0 {
		return " – |"
	}
	return " " + fmtRate(slices.Min(x.RepeatRates)) + " |"
}

// targetRow is one line of the targets table.
type targetRow struct {
	scenario, measured, goal, verdict string
}

// targets checks the three target scenarios against what was measured.
func (r *benchReport) targets() []targetRow {
	c := r.Config.Concurrency
	noopRate, noopP99, ok := r.noop(c)
	if !ok {
		return nil
	}
	var rows []targetRow
	// byCPU is the share by CPU per decision: what the cell would reach
	// relative to the no-op if the machine's CPU were the only limit.
	noopCPU := r.noopCPU(c)
	byCPU := func(x *result) string {
		if t := cpuTotal(x); t > 0 && noopCPU > 0 {
			return fmt.Sprintf("; by CPU per decision %s", fmtShare1(noopCPU/t))
		}
		return ""
	}
	shareVerdict := func(got, want float64) string {
		if got >= want {
			return "met"
		}
		return fmt.Sprintf("**missed** by %.1f points: needs %.2f× its throughput", percent*(want-got), want/got)
	}
	for _, alg := range algorithms.Algorithms {
		x := r.rlsCell(backendMemory, alg.String(), sweepKeys, c)
		if x == nil {
			continue
		}
		s := share(x.Rate, noopRate)
		rows = append(rows, targetRow{
			scenario: fmt.Sprintf("(i) memory, %s, %d keys, %d callers", alg, sweepKeys, c),
			measured: fmt.Sprintf("%s/s = %s of no-op (%s/s)%s", fmtRate(x.Rate), fmtShare1(s), fmtRate(noopRate), byCPU(x)),
			goal:     fmt.Sprintf("≥ %s of no-op", fmtShare(targetMemoryShare)),
			verdict:  shareVerdict(s, targetMemoryShare),
		})
	}
	for _, backend := range []string{backendStandalone, backendCluster} {
		x := r.rlsCell(backend, sweepAlgorithm, sweepKeys, c)
		if x == nil {
			continue
		}
		s := share(x.Rate, noopRate)
		verdict := shareVerdict(s, targetLogShare)
		if x.P99 >= targetLogP99US {
			verdict += fmt.Sprintf("; p99 **missed** by %s (%.1f× the bound)", fmtMicros(x.P99-targetLogP99US), x.P99/targetLogP99US)
		} else {
			verdict += "; p99 met"
		}
		rows = append(rows, targetRow{
			scenario: fmt.Sprintf("(ii) Redis %s, %s, %d keys, %d callers", backend, sweepAlgorithm, sweepKeys, c),
			measured: fmt.Sprintf("%s/s = %s of no-op%s; p99 %s (no-op %s)", fmtRate(x.Rate), fmtShare1(s), byCPU(x), fmtMicros(x.P99), fmtMicros(noopP99)),
			goal:     fmt.Sprintf("≥ %s of no-op, p99 < %s", fmtShare(targetLogShare), fmtMicros(targetLogP99US)),
			verdict:  verdict,
		})
	}
	for _, x := range r.all(func(x *result) bool { return x.Group == groupHot && x.Concurrency == c }) {
		s := share(x.Rate, noopRate)
		verdict := shareVerdict(s, targetHotShare)
		if x.Redis != nil {
			if x.Redis.PerDecision > targetHotCommands {
				verdict += fmt.Sprintf("; Redis commands **missed**: %.2f per decision, %.0f× the bound", x.Redis.PerDecision, x.Redis.PerDecision/targetHotCommands)
			} else {
				verdict += "; Redis commands met"
			}
		}
		measured := fmt.Sprintf("%s/s = %s of no-op%s; %s denied", fmtRate(x.Rate), fmtShare1(s), byCPU(x), fmtShare(share(float64(x.Denied), float64(x.Decisions))))
		if x.Redis != nil {
			measured += fmt.Sprintf("; %.2f Redis commands (%.2f EVALSHA) per decision", x.Redis.PerDecision, x.Redis.EvalshaPerDecision)
		}
		rows = append(rows, targetRow{
			scenario: fmt.Sprintf("(iii) %s, %s, one hot key, %s over limit, %d callers", x.Backend, x.Key, fmtShare(x.Over), c),
			measured: measured,
			goal:     fmt.Sprintf("≥ %s of no-op, ≤ %.1f Redis commands per decision", fmtShare(targetHotShare), targetHotCommands),
			verdict:  verdict,
		})
	}
	return rows
}

// headlineBackends are the rows of the bench's headline table, in order.
var headlineBackends = []string{backendMemory, backendStandalone, backendCluster}

// writeHeadline writes the bench's block of the page: every algorithm on
// every backend at sweepKeys keys and the bench's concurrency, beside the
// no-op service, and where the rest is.
func (r *benchReport) writeHeadline(w io.Writer) {
	c := r.Config.Concurrency
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Throughput and latency, against the no-op service")
	p("")
	best := ""
	if r.Config.Repeat > 1 {
		best = fmt.Sprintf(", the fastest of %d runs", r.Config.Repeat)
	}
	writeParagraph(w,
		fmt.Sprintf("Generated by `%s` on %s (took %s), on %s × %d, Redis %s, commit %s; load average (1, 5, 15 min) %s before, %s after.",
			strings.TrimSpace(r.Command), r.Date, r.Took, r.Machine.CPU, r.Machine.CPUs, r.Machine.Redis, r.Machine.Commit,
			r.Machine.LoadBefore, r.Machine.LoadAfter),
		fmt.Sprintf("Each cell: %d callers on %d gRPC connections, one descriptor per call, %s keys drawn uniformly, no call over its limit, %s measured after %s of warm-up%s.",
			c, r.Config.Conns, fmtRate(sweepKeys), r.Config.DurationText, r.Config.WarmupText, best),
		"The no-op service answers OK to every call without looking at it and is built with ratewarden's gRPC server options: the most any rate limit service can answer on this machine.",
		"Its row is "+r.noopRunsText()+".")
	p("| backend | algorithm | decisions/s | %% of no-op | p50 | p99 | server CPU µs per decision | Redis CPU µs per decision |")
	p("|---|---|---|---|---|---|---|---|")
	noops := r.all(func(x *result) bool { return x.Backend == backendNoop && x.Concurrency == c })
	if len(noops) > 0 {
		cpu := "–"
		if v := meanOf(noops, func(x *result) (float64, bool) { v, ok := x.CPU[cpuServer]; return v, ok }); !math.IsNaN(v) {
			cpu = fmt.Sprintf("%.0f", v)
		}
		mean := func(f func(*result) float64) float64 {
			return meanOf(noops, func(x *result) (float64, bool) { return f(x), true })
		}
		p("| no-op service | – | %s | 100%% | %s | %s | %s | – |", fmtRate(mean(func(x *result) float64 { return x.Rate })),
			fmtMicros(mean(func(x *result) float64 { return x.P50 })), fmtMicros(mean(func(x *result) float64 { return x.P99 })), cpu)
	}
	noopRate, _, _ := r.noop(c)
	var spans []string
	for _, backend := range headlineBackends {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, alg := range algorithms.Algorithms {
			x := r.rlsCell(backend, alg.String(), sweepKeys, c)
			if x == nil {
				continue
			}
			s := share(x.Rate, noopRate)
			lo, hi = min(lo, s), max(hi, s)
			p("| %s | %s | %s | %s | %s | %s | %s | %s |", backend, alg, fmtRate(x.Rate), fmtShare(s),
				fmtMicros(x.P50), fmtMicros(x.P99), fmtCPU(x, cpuServer), fmtCPU(x, cpuRedis))
		}
		if math.IsInf(lo, 0) || math.IsNaN(lo) {
			continue
		}
		span := fmtSpan("%.0f%%", percent*lo, percent*hi)
		if len(spans) == 0 {
			span = fmt.Sprintf("%s ratewarden answered %s of the no-op's decisions per second", headlineBackendName[backend], span)
		} else {
			span = headlineBackendName[backend] + " " + span
		}
		spans = append(spans, span)
	}
	p("")
	var sentences []string
	if len(spans) > 0 {
		sentences = append(sentences, strings.ToUpper(spans[0][:1])+joinTexts(spans)[1:]+".")
	}
	sentences = append(sentences, fmt.Sprintf("Every key count, the concurrency sweep, one hot key, raw EVALSHA, the targets, where the CPU goes, the profiles and how it is measured: [%s](%s).",
		reportDetailPath, reportDetailPath))
	writeParagraph(w, sentences...)
}

// noopRunsText says what the no-op's figure at the bench's concurrency is:
// its one run, or the mean of the runs that open and close the bench.
func (r *benchReport) noopRunsText() string {
	c := r.Config.Concurrency
	if n := len(r.all(func(x *result) bool { return x.Backend == backendNoop && x.Concurrency == c })); n > 1 {
		return fmt.Sprintf("the mean of its %d runs at %d callers, the first and the last cell of the bench", n, c)
	}
	return fmt.Sprintf("its one run at %d callers", c)
}

// headlineBackendName names a backend in the headline's sentence.
var headlineBackendName = map[string]string{
	backendMemory:     "on the memory backend",
	backendStandalone: "on one Redis",
	backendCluster:    fmt.Sprintf("on a Redis Cluster of %d masters", clusterMasters),
}

// meanOf returns the mean of f over the results for which it has a value,
// or NaN when none has.
func meanOf(xs []*result, f func(*result) (float64, bool)) float64 {
	sum, n := 0.0, 0
	for _, x := range xs {
		if v, ok := f(x); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// writeDetail renders the bench's detail page, with analysis between the
// analysis markers.
func (r *benchReport) writeDetail(w io.Writer, analysis string) {
	c := r.Config.Concurrency
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks: every cell of `loadgen bench`")
	p("")
	p("What ratewarden decides per second, how fast it answers and what each decision costs Redis, measured")
	p("by `bench/cmd/loadgen` on one machine in one run, every figure next to two baselines from the same run")
	p("(the headline table is on [the page](../%s)):", pagePath)
	p("")
	p("- **no-op**: a RateLimitService that admits every call without looking at it (`loadgen noop`), built with")
	p("  the gRPC server options of ratewarden's server and driven the same way: the ceiling of the gRPC path on")
	p("  this machine;")
	p("- **EVALSHA**: raw script calls on the same Redis from a Go client built as the server builds its own")
	p("  (`loadgen evalsha`): `return 1`, and ratewarden's fixed_window script, one call per round trip and %d", coalescedPipeline)
	p("  per round trip. The server itself sends the script calls of concurrent requests several to a round trip.")
	p("")
	p("The load generator, the server and Redis share the machine, so every absolute figure is low and noisy;")
	p("read the ratios. Generated by `%s` on %s (took %s).", strings.TrimSpace(r.Command), r.Date, r.Took)
	p("")
	p("| machine | |")
	p("|---|---|")
	p("| CPU | %s × %d |", r.Machine.CPU, r.Machine.CPUs)
	p("| memory | %s |", r.Machine.Memory)
	p("| kernel | %s |", r.Machine.Kernel)
	p("| Go | %s |", r.Machine.Go)
	p("| Redis | %s |", r.Machine.Redis)
	p("| commit | %s |", r.Machine.Commit)
	p("| load average (1, 5, 15 min) | %s before, %s after |", r.Machine.LoadBefore, r.Machine.LoadAfter)
	p("| per cell | %s measured after %s of warm-up; %d callers on %d gRPC connections unless stated |", r.Config.DurationText, r.Config.WarmupText, c, r.Config.Conns)
	if r.Config.Repeat > 1 {
		p("| repeats | each cell ran %d times (a profiled cell once); the tables show the fastest run |", r.Config.Repeat)
	}
	p("")

	if rows := r.targets(); len(rows) > 0 {
		p("## Targets")
		p("")
		p("*%% of no-op* is over the mean of the no-op's runs at %d callers. *By CPU per decision* is the no-op's CPU", c)
		p("per decision (load generator and service) over the cell's (load generator, server and Redis): the share")
		p("the cell would reach if the machine's CPU were all that limited it.")
		p("")
		p("| scenario | measured | target | verdict |")
		p("|---|---|---|---|")
		for _, row := range rows {
			p("| %s | %s | %s | %s |", row.scenario, row.measured, row.goal, row.verdict)
		}
		p("")
	}

	benchAnalysisMarker.writeAnalysis(w, analysis)
	p("")

	r.writeCPU(w)
	r.writeBaselines(w)
	r.writeMatrix(w)
	r.writeSweep(w)
	r.writeHot(w)
	r.writeProfiles(w)
	r.writeMethod(w)
}

func (r *benchReport) writeBaselines(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Baselines")
	p("")
	if n := len(r.all(func(x *result) bool { return x.Backend == backendNoop && x.Concurrency == r.Config.Concurrency })); n > 1 {
		p("No-op RateLimitService, every run (at %d callers it runs first and last; the spread of those runs is the machine's drift):", r.Config.Concurrency)
	} else {
		p("No-op RateLimitService:")
	}
	p("")
	p("| callers | decisions/s | p50 | p99 | p99.9 | errors |%s", r.slowestHead())
	p("|---|---|---|---|---|---|%s", r.slowestRule())
	for _, x := range r.all(func(x *result) bool { return x.Backend == backendNoop }) {
		p("| %d | %s | %s | %s | %s | %d |%s", x.Concurrency, fmtRate(x.Rate), fmtMicros(x.P50), fmtMicros(x.P99), fmtMicros(x.P999), x.Errors, r.slowestCell(x))
	}
	p("")
	evals := r.all(func(x *result) bool { return x.Group == groupEvalsha })
	if len(evals) == 0 {
		return
	}
	p("Raw EVALSHA on the same Redis, %d keys:", sweepKeys)
	p("")
	p("| Redis | script | callers | EVALSHA per round trip | calls/s | p50 | p99 (round trip) | Redis commands per call | errors |")
	p("|---|---|---|---|---|---|---|---|---|")
	for _, x := range evals {
		p("| %s | %s | %d | %d | %s | %s | %s | %s | %d |", x.Backend, x.Script, x.Concurrency, x.Pipeline, fmtRate(x.Rate),
			fmtMicros(x.P50), fmtMicros(x.P99), fmtPer(x, func(c *redisCost) float64 { return c.PerDecision }), x.Errors)
	}
	p("")
}

func (r *benchReport) writeMatrix(w io.Writer) {
	c := r.Config.Concurrency
	cells := r.all(func(x *result) bool { return x.Group == groupMatrix })
	if len(cells) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	noopRate, _, _ := r.noop(c)
	p("## Every algorithm, backend and key count (%d callers)", c)
	p("")
	p("Keys drawn uniformly, no over-limit traffic. *%% no-op* is decisions/s over the mean of the no-op's runs at %d", c)
	p("callers (%s/s); *%% EVALSHA* is over the calls/s of raw fixed_window EVALSHA on the same Redis, one per round", fmtRate(noopRate))
	p("trip (a decision is one script call, which the server sends together with those of concurrent requests).")
	p("")
	p("| backend | algorithm | keys | decisions/s | %% no-op | %% EVALSHA | p50 | p99 | p99.9 | errors | Redis cmds/decision | EVALSHA/decision | server CPU µs/decision | Redis CPU µs/decision |%s", r.slowestHead())
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s", r.slowestRule())
	for _, x := range cells {
		ev := "–"
		if e := r.evalshaCell(x.Backend, scriptFixedWindow, 1, x.Concurrency); e != nil {
			ev = fmtShare(share(x.Rate, e.Rate))
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |%s", x.Backend, x.Key, fmtRate(float64(x.Keys)), fmtRate(x.Rate),
			fmtShare(share(x.Rate, noopRate)), ev, fmtMicros(x.P50), fmtMicros(x.P99), fmtMicros(x.P999), x.Errors,
			fmtPer(x, func(c *redisCost) float64 { return c.PerDecision }),
			fmtPer(x, func(c *redisCost) float64 { return c.EvalshaPerDecision }),
			fmtCPU(x, cpuServer), fmtCPU(x, cpuRedis), r.slowestCell(x))
	}
	p("")
}

func (r *benchReport) writeSweep(w io.Writer) {
	lines := r.sweepSeries()
	if len(lines) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Concurrency sweep (%s, %d keys)", sweepAlgorithm, sweepKeys)
	p("")
	p("The no-op, each backend, and raw fixed_window EVALSHA on the standalone Redis, one call per round trip; at %d", r.Config.Concurrency)
	p("callers the no-op's figures are the mean of its runs.")
	p("")
	p("![decisions/s and p99 against concurrency](%s)", path.Base(reportSVGPath))
	p("")
	var head, rule strings.Builder
	head.WriteString("| callers |")
	rule.WriteString("|---|")
	for _, s := range lines {
		fmt.Fprintf(&head, " %s /s | p99 |", s.Name)
		rule.WriteString("---|---|")
	}
	p("%s", head.String())
	p("%s", rule.String())
	for _, c := range r.Config.Sweep {
		measured := slices.ContainsFunc(lines, func(s series) bool {
			return slices.ContainsFunc(s.Points, func(pt point) bool { return pt.Concurrency == c })
		})
		if !measured {
			continue
		}
		var row strings.Builder
		fmt.Fprintf(&row, "| %d |", c)
		for _, s := range lines {
			i := slices.IndexFunc(s.Points, func(pt point) bool { return pt.Concurrency == c })
			if i < 0 {
				row.WriteString(" – | – |")
				continue
			}
			fmt.Fprintf(&row, " %s | %s |", fmtRate(s.Points[i].Rate), fmtMicros(s.Points[i].P99))
		}
		p("%s", row.String())
	}
	p("")
}

func (r *benchReport) writeHot(w io.Writer) {
	cells := r.all(func(x *result) bool { return x.Group == groupHot })
	if len(cells) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	noopRate, _, _ := r.noop(r.Config.Concurrency)
	p("## One hot key, %s over limit (%d callers)", fmtShare(hotOver), r.Config.Concurrency)
	p("")
	p("One descriptor key with two values: %s of the calls go to the exhausted one and are denied, the rest to the", fmtShare(hotOver))
	p("live one. *Denied* is the share of decisions answered OVER_LIMIT; under the table, each cell's Redis")
	p("commands per decision, by command.")
	p("")
	p("| backend | algorithm | decisions/s | %% no-op | denied | p50 | p99 | p99.9 | errors | Redis cmds/decision | EVALSHA/decision |%s", r.slowestHead())
	p("|---|---|---|---|---|---|---|---|---|---|---|%s", r.slowestRule())
	for _, x := range cells {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |%s", x.Backend, x.Key, fmtRate(x.Rate), fmtShare(share(x.Rate, noopRate)),
			fmtShare(share(float64(x.Denied), float64(x.Decisions))), fmtMicros(x.P50), fmtMicros(x.P99), fmtMicros(x.P999), x.Errors,
			fmtPer(x, func(c *redisCost) float64 { return c.PerDecision }),
			fmtPer(x, func(c *redisCost) float64 { return c.EvalshaPerDecision }), r.slowestCell(x))
	}
	p("")
	for _, x := range cells {
		if x.Redis == nil || len(x.Redis.Commands) == 0 {
			continue
		}
		var parts []string
		for _, cmd := range slices.Sorted(maps.Keys(x.Redis.Commands)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", cmd, float64(x.Redis.Commands[cmd])/float64(x.Decisions)))
		}
		p("- %s, %s: per decision %s", x.Backend, x.Key, strings.Join(parts, ", "))
	}
	p("")
}

func (r *benchReport) writeProfiles(w io.Writer) {
	if len(r.Profiles) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Where the server's time goes")
	p("")
	p("Three target scenarios again, each once: the server runs as `loadgen serve`, which builds and serves it as")
	p("cmd/server does, under Go's CPU profiler from the moment it is built until it stops, and writes the")
	p("allocation profile (every allocation since the process started) on the way out. The profiles cover the")
	p("warm-up and the measurement, and for the hot key the calls that spend the exhausted value first. Below,")
	p("`go tool pprof -top`: the %d heaviest nodes by flat and by cumulative CPU time, then by bytes allocated. The", profileLines)
	p("rate and p99 in each heading are of the profiled run, profiler included.")
	p("")
	for _, prof := range r.Profiles {
		if x := r.find(func(x *result) bool { return x.Name == prof.Name }); x != nil {
			p("### %s: %s/s, p99 %s", prof.Name, fmtRate(x.Rate), fmtMicros(x.P99))
		} else {
			p("### %s", prof.Name)
		}
		p("")
		p("<details><summary>CPU</summary>")
		p("")
		p("```")
		p("%s", prof.CPU)
		p("```")
		p("</details>")
		p("")
		p("<details><summary>allocations</summary>")
		p("")
		p("```")
		p("%s", prof.Allocs)
		p("```")
		p("</details>")
		p("")
	}
}

func (r *benchReport) writeMethod(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## How it is measured")
	p("")
	p("- Each cell starts a fresh server process: the `cmd/server` binary the bench builds from `-root` (`loadgen")
	p("  noop` for the no-op, `loadgen serve` for a profiled cell), with `RLS_BACKEND`, `RLS_REDIS_MODE` and")
	p("  `RLS_REDIS_ADDRS` for its backend, `RLS_BACKEND_TIMEOUT=%s` and `RLS_LOG_LEVEL=warn`, after `FLUSHALL` on", r.Config.BackendTimeoutText)
	p("  every Redis master. The calls carry no deadline, so `RLS_BACKEND_TIMEOUT` is each request's budget: a slow")
	p("  answer is measured, not turned into the failure mode's. The limits are `loadgen limits`: one descriptor")
	p("  key per algorithm.")
	p("- Redis: one redis-server for the standalone backend and a Redis Cluster of %d masters (%d replicas each) created", clusterMasters, r.Config.Replicas)
	p("  with `redis-cli --cluster create`; no persistence, `maxmemory-policy noeviction`.")
	p("- A decision is one ShouldRateLimit call with one descriptor, answered OK or OVER_LIMIT; decisions/s is the")
	p("  decisions whose answer came during the measurement over its length. Each caller has one call in flight and")
	p("  sends the next when it is answered; the callers are dealt out over the gRPC connections in turn.")
	p("- Latency is measured by the caller around each call that is answered without an error, in microseconds,")
	p("  into an HdrHistogram per caller (%d significant digits: a percentile is within %g%% of the value recorded),", histDigits, 100*math.Pow10(-histDigits))
	p("  merged at the end.")
	p("- Keys: every value of a run is new (a random run id is part of it) and drawn uniformly from the key count;")
	p("  each is a limit of its own of %s a day (%s for the algorithm that logs every hit), which no cell reaches.",
		fmtRate(float64(liveLimit(algorithms.FixedWindow))), fmtRate(float64(algorithms.MaxLogRequests)))
	p("- Over-limit traffic is sent to values already exhausted: the limits give values starting with `%s` one hit", exhaustedValuePrefix)
	p("  a day, the load generator spends that hit for each such value before it measures, and then sends each call")
	p("  to an exhausted value with probability `-over`. In the hot-key scenario there is one value of each kind:")
	p("  %s of the calls go to the exhausted one and are denied, the rest to the live one and are admitted.", fmtShare(hotOver))
	p("- Redis commands per decision: the increase of `INFO commandstats` calls, summed over the masters, from the")
	p("  start of the measurement until its last calls returned, without INFO itself and replicas' REPLCONF, over")
	p("  the decisions. It counts EVALSHA and every command a script runs inside Redis.")
	p("- CPU per decision: the user and system time in `/proc/PID/stat` of the load generator, the server and every")
	p("  Redis process, from the start to the end of the measurement, over the decisions.")
	p("")
	p("## One cell by hand")
	p("")
	p("The whole bench, and the other benchmarks, are under [Reproduce](../%s#reproduce). One cell:", pagePath)
	p("")
	p("```sh")
	p("redis-server --port 6379 --save '' --appendonly no &")
	p("go -C bench run ./cmd/loadgen limits -o /tmp/limits.yaml")
	p("RLS_CONFIG_PATH=/tmp/limits.yaml RLS_BACKEND=redis RLS_REDIS_ADDRS=localhost:6379 RLS_BACKEND_TIMEOUT=1s go run ./cmd/server &")
	p("go -C bench run ./cmd/loadgen -addr localhost:8081 -descriptor sliding_window_log -keys 1000 -concurrency 64 -duration 5s -redis localhost:6379")
	p("go -C bench run ./cmd/loadgen -addr localhost:8081 -descriptor sliding_window_log -keys 1 -over 0.9 -redis localhost:6379")
	p("go -C bench run ./cmd/loadgen noop -addr 127.0.0.1:8091 &")
	p("go -C bench run ./cmd/loadgen -addr 127.0.0.1:8091 -concurrency 64 -duration 5s")
	p("go -C bench run ./cmd/loadgen evalsha -redis localhost:6379 -script fixed_window -concurrency 64")
	p("```")
}

// point is one concurrency of a sweep series.
type point struct {
	Concurrency int
	Rate        float64
	P99         float64 // µs
}

// series is one line of the chart.
type series struct {
	Name   string
	Points []point
}

// sweepSeries returns the chart's lines: for the no-op server, each backend
// and raw EVALSHA, the sweep cell at each concurrency measured.
func (r *benchReport) sweepSeries() []series {
	var out []series
	add := func(name string, at func(c int) (float64, float64, bool)) {
		s := series{Name: name}
		for _, c := range r.Config.Sweep {
			if rate, p99, ok := at(c); ok {
				s.Points = append(s.Points, point{Concurrency: c, Rate: rate, P99: p99})
			}
		}
		if len(s.Points) > 0 {
			out = append(out, s)
		}
	}
	add("no-op", r.noop)
	for _, backend := range []string{backendMemory, backendStandalone, backendCluster} {
		add(backend, func(c int) (float64, float64, bool) {
			if x := r.rlsCell(backend, sweepAlgorithm, sweepKeys, c); x != nil {
				return x.Rate, x.P99, true
			}
			return 0, 0, false
		})
	}
	add("raw EVALSHA", func(c int) (float64, float64, bool) {
		if x := r.evalshaCell(backendStandalone, scriptFixedWindow, 1, c); x != nil {
			return x.Rate, x.P99, true
		}
		return 0, 0, false
	})
	return out
}
