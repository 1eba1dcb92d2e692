package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The files a bench writes, relative to its output directory.
const (
	reportJSONPath = "docs/bench.json"
	reportMDPath   = "BENCHMARKS.md"
	reportSVGPath  = "docs/bench.svg"
)

// The markers around the hand-written analysis in BENCHMARKS.md, which a new
// rendering keeps.
const (
	analysisBegin = "<!-- analysis:begin -->"
	analysisEnd   = "<!-- analysis:end -->"
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
// docs/bench.json, from which BENCHMARKS.md and the chart are rendered.
type benchReport struct {
	Date     string          `json:"date"`
	Took     string          `json:"took"`
	Command  string          `json:"command"`
	Config   benchConfig     `json:"config"`
	Machine  machine         `json:"machine"`
	Results  []*result       `json:"results"`
	Profiles []profileResult `json:"profiles,omitempty"`
}

// writeReportFiles writes the JSON, the chart and BENCHMARKS.md into dir,
// keeping the analysis of an existing BENCHMARKS.md there.
func writeReportFiles(dir string, r *benchReport, log io.Writer) error {
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, reportJSONPath), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	var svg bytes.Buffer
	if err := writeChart(&svg, r.sweepSeries()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, reportSVGPath), svg.Bytes(), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	mdPath := filepath.Join(dir, reportMDPath)
	var analysis string
	var kept []string
	if old, err := os.ReadFile(mdPath); err == nil {
		analysis = keptAnalysis(string(old))
		kept = []string{
			keptSection(string(old), rediscostSectionBegin, rediscostSectionEnd),
			keptSection(string(old), overloadBegin, overloadEnd),
		}
	}
	var md bytes.Buffer
	r.writeMarkdown(&md, analysis)
	for _, section := range kept {
		// The sections of `loadgen rediscost` and `loadgen overload`
		// stay, at the end.
		if section != "" {
			fmt.Fprintf(&md, "\n%s", section)
		}
	}
	if err := os.WriteFile(mdPath, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	fmt.Fprintf(log, "loadgen: wrote %s, %s and %s in %s\n", reportMDPath, reportSVGPath, reportJSONPath, dir)
	return nil
}

func reportCommand(args []string, stderr io.Writer) error {
	fs := newFlagSet("report", "report [-in FILE] [-out DIR]: render BENCHMARKS.md and docs/bench.svg again from a bench's JSON", stderr)
	in := fs.String("in", reportJSONPath, "the bench's JSON")
	out := fs.String("out", ".", "directory to write BENCHMARKS.md and docs/ into")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	var r benchReport
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("loadgen: %s: %w", *in, err)
	}
	return writeReportFiles(*out, &r, stderr)
}

// keptAnalysis returns what stands between the analysis markers of an
// earlier BENCHMARKS.md, or "".
func keptAnalysis(md string) string { return keptBetween(md, analysisBegin, analysisEnd) }

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
	p("CPU time (user + system, from /proc) each process used during the measurement, in microseconds per decision")
	p("(per script call for raw EVALSHA). The processes share %d CPUs, so %d s of CPU a second over the total is the", r.Machine.CPUs, r.Machine.CPUs)
	p("most decisions per second this machine could make with that mix.")
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

// writeMarkdown renders BENCHMARKS.md, with analysis between the analysis
// markers.
func (r *benchReport) writeMarkdown(w io.Writer, analysis string) {
	c := r.Config.Concurrency
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks")
	p("")
	p("What ratewarden decides per second, how fast it answers and what each decision costs Redis, measured")
	p("by `cmd/loadgen` on one machine in one run, every figure next to two baselines from the same run:")
	p("")
	p("- **no-op**: a RateLimitService that admits everything (`loadgen noop`), built with the same gRPC server")
	p("  options as ratewarden, driven the same way: the ceiling of the gRPC path on this machine;")
	p("- **EVALSHA**: raw script calls on the same redis-server from a Go client built as the server builds its own")
	p("  (`loadgen evalsha`): `return 1`, and ratewarden's fixed_window script, one call per round trip like the")
	p("  server, and %d per round trip to show what batching could reach.", coalescedPipeline)
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
		p("| repeats | each cell ran %d times; the tables show the fastest run |", r.Config.Repeat)
	}
	p("")

	if rows := r.targets(); len(rows) > 0 {
		p("## Targets")
		p("")
		p("| scenario | measured | target | verdict |")
		p("|---|---|---|---|")
		for _, row := range rows {
			p("| %s | %s | %s | %s |", row.scenario, row.measured, row.goal, row.verdict)
		}
		p("")
	}

	p("## Analysis")
	p("")
	p(analysisBegin)
	if analysis == "" {
		p("The analysis of this run is written here by hand; `loadgen bench` and `loadgen report` keep what stands")
		p("between these markers.")
	} else {
		p("%s", analysis)
	}
	p(analysisEnd)
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
	p("No-op RateLimitService (a run at %d callers opens and closes the bench; their spread is the machine's drift):", r.Config.Concurrency)
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
	p("Uniform keys, no over-limit traffic. *%% no-op* is decisions/s over the no-op's (%s/s); *%% EVALSHA* is over raw", fmtRate(noopRate))
	p("fixed_window EVALSHA calls/s on the same Redis, one per round trip (a decision is one script call).")
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
	p("![decisions/s and p99 against concurrency](%s)", reportSVGPath)
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
	p("Each target scenario again, against the same server code run by `loadgen serve` (settings.Load,")
	p("server.New, Serve, as cmd/server does) under the CPU profiler; `go tool pprof -top`, by flat then by")
	p("cumulative time, then allocated bytes. The profile covers the warm-up and the measurement.")
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
	p("- Each cell starts a fresh server process (the real `cmd/server` binary built by the bench) with")
	p("  `RLS_BACKEND`, `RLS_REDIS_MODE` and `RLS_REDIS_ADDRS` for its backend, `RLS_BACKEND_TIMEOUT=%s` (so a slow", r.Config.BackendTimeoutText)
	p("  answer is measured, not turned into an error) and `RLS_LOG_LEVEL=warn`, after `FLUSHALL` on every Redis master.")
	p("  The limits are `loadgen limits`: one descriptor key per algorithm.")
	p("- Redis: one redis-server for the standalone backend and a Redis Cluster of %d masters (%d replicas each) created", clusterMasters, r.Config.Replicas)
	p("  with `redis-cli --cluster create`; no persistence, `maxmemory-policy noeviction`.")
	p("- A decision is one ShouldRateLimit call with one descriptor, counted when answered OK or OVER_LIMIT;")
	p("  decisions/s is the decisions answered during the measurement over its length. Each caller has one call in")
	p("  flight; callers share the gRPC connections round robin.")
	p("- Latency is measured around each call by the caller, into a per-caller log-bucketed histogram (buckets at most")
	p("  1/64 of their value wide, so a percentile is within 0.8%%) merged at the end.")
	p("- Keys: every value of a run is new (a random run id is part of it), drawn uniformly from the key count, and")
	p("  each is a limit of its own that no run reaches.")
	p("- Over-limit traffic is sent to keys already exhausted: the limits give values starting with `x.` one hit a")
	p("  day, the load generator spends that hit for each such value before it measures, and then sends each call to")
	p("  an exhausted value with probability `-over`. In the hot-key scenario there is one key: %s of the calls go to", fmtShare(hotOver))
	p("  its exhausted value and are denied, the rest to a live value and are admitted.")
	p("- Redis commands per decision: the increase of `INFO commandstats` calls, summed over the masters, from the")
	p("  start to the end of the measurement, without INFO itself and replicas' REPLCONF, over the decisions. It")
	p("  counts EVALSHA and every command a script runs inside Redis.")
	p("")
	p("## Reproduce")
	p("")
	p("```sh")
	p("go run ./cmd/loadgen bench                # the full matrix, a few minutes; rewrites this file")
	p("go run ./cmd/loadgen bench -quick         # a smoke run of about 20 s, written to a temporary directory")
	p("go run ./cmd/loadgen report               # render this file and the chart again from docs/bench.json")
	p("go run ./cmd/loadgen rediscost -update BENCHMARKS.md   # Redis's cost per decision beside envoyproxy/ratelimit's, 3 minutes")
	p("")
	p("# One cell by hand:")
	p("redis-server --port 6379 --save '' --appendonly no &")
	p("go run ./cmd/loadgen limits -o /tmp/limits.yaml")
	p("RLS_CONFIG_PATH=/tmp/limits.yaml RLS_BACKEND=redis RLS_REDIS_ADDRS=localhost:6379 RLS_BACKEND_TIMEOUT=1s go run ./cmd/server &")
	p("go run ./cmd/loadgen -addr localhost:8081 -descriptor sliding_window_log -keys 1000 -concurrency 64 -duration 5s -redis localhost:6379")
	p("go run ./cmd/loadgen -addr localhost:8081 -descriptor sliding_window_log -keys 1 -over 0.9 -redis localhost:6379")
	p("go run ./cmd/loadgen noop -addr 127.0.0.1:8091 &")
	p("go run ./cmd/loadgen -addr 127.0.0.1:8091 -concurrency 64 -duration 5s")
	p("go run ./cmd/loadgen evalsha -redis localhost:6379 -script fixed_window -concurrency 64")
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
