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
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// overloadJSONPath is where `loadgen overload` writes what it measured,
// relative to its output directory.
const overloadJSONPath = "docs/overload.json"

// The markers around the overload section of BENCHMARKS.md, which `loadgen
// overload` replaces and `loadgen bench` keeps; and those around its
// hand-written analysis, which both keep.
const (
	overloadBegin         = "<!-- overload:begin -->"
	overloadEnd           = "<!-- overload:end -->"
	overloadAnalysisBegin = "<!-- overload-analysis:begin -->"
	overloadAnalysisEnd   = "<!-- overload-analysis:end -->"
)

// writeOverloadFiles writes the JSON and the overload section of
// BENCHMARKS.md into dir, keeping the rest of BENCHMARKS.md.
func writeOverloadFiles(dir string, r *overloadReport, log io.Writer) error {
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, overloadJSONPath), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	mdPath := filepath.Join(dir, reportMDPath)
	old, err := os.ReadFile(mdPath)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("loadgen: %w", err)
	}
	var section bytes.Buffer
	r.writeMarkdown(&section, keptBetween(string(old), overloadAnalysisBegin, overloadAnalysisEnd))
	md := replaceBetween(string(old), overloadBegin, overloadEnd, section.String())
	if err := os.WriteFile(mdPath, []byte(md), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	fmt.Fprintf(log, "loadgen: wrote %s and the overload section of %s in %s\n", overloadJSONPath, reportMDPath, dir)
	return nil
}

// keptBetween returns what stands between begin and end in md, or "".
func keptBetween(md, begin, end string) string {
	_, rest, ok := strings.Cut(md, begin)
	if !ok {
		return ""
	}
	text, _, ok := strings.Cut(rest, end)
	if !ok {
		return ""
	}
	return strings.Trim(text, "\n")
}

// replaceBetween returns md with the block from begin to end (markers
// included) replaced by block, which carries its own markers; without such
// a block, block is appended.
func replaceBetween(md, begin, end, block string) string {
	before, rest, ok := strings.Cut(md, begin)
	if ok {
		if _, after, ok := strings.Cut(rest, end); ok {
			return before + strings.TrimRight(block, "\n") + after
		}
	}
	if md != "" && !strings.HasSuffix(md, "\n\n") {
		md = strings.TrimRight(md, "\n") + "\n\n"
	}
	return md + block
}

// algorithmNames returns the name of every algorithm, in order.
func algorithmNames() []string {
	var names []string
	for _, a := range algorithms.Algorithms {
		names = append(names, a.String())
	}
	return names
}

// keptSection returns the section of an earlier BENCHMARKS.md between begin
// and end, markers included, or "".
func keptSection(md, begin, end string) string {
	_, rest, ok := strings.Cut(md, begin)
	if !ok {
		return ""
	}
	text, _, ok := strings.Cut(rest, end)
	if !ok {
		return ""
	}
	return begin + text + end + "\n"
}

// The goals the overload benchmark checks (see the comment at the top of
// overload.go).
const (
	// longDeadline is the shortest deadline whose every call must be
	// answered with a decision, as must a call without a deadline.
	longDeadline = time.Second
	// lateSlack is how much larger than the no-op services' share of calls
	// not answered in time a server's may be, with a shorter deadline.
	lateSlack = 0.05
)

// writeMarkdown writes the overload section, markers included.
func (r *overloadReport) writeMarkdown(w io.Writer, analysis string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	c := r.Config
	p("%s", overloadBegin)
	p("## Overload: a busy host, deadlines and shedding")
	p("")
	p("What the servers answer when the machine cannot keep up, as on a busy node or in a pod throttled to its")
	p("CPU limit: %d busy loops spin on the %d CPUs while %d server replicas, with their default settings, share a", c.Spinners, r.Machine.CPUs, c.Replicas)
	p("Redis Cluster of 3 masters and 3 replicas. In each pass, each build runs a closed loop of %d callers (%s after", c.Callers, c.ClosedText)
	p("%s of warm-up) for each deadline a caller may send: %s (`none`: no `grpc-timeout` at all); then an", c.WarmupText, joinTexts(c.DeadlinesText))
	p("open loop at %.0f× the capacity of the newer build (%s), one call per slot whatever became of the others, with", c.Overload, c.OpenText)
	p("the first deadline. The same loops run against %d no-op services (separate processes that answer OK at once", c.Replicas)
	p("and do nothing else, built with ratewarden's gRPC server options), beside the same busy loops, in the same")
	p("pass: what this machine answers in time when answering costs nothing but the gRPC call itself. A share of")
	p("%.0f%% of the calls goes to exactness limits (%d per algorithm and loop, L = %d per %d days, so nothing", 100*c.ExactShare, c.ExactKeys, c.ExactLimit, exactWindowDays)
	p("refills during a run): their OK answers are counted, warm-up included.")
	p("")
	p("The goals: with a deadline of %s or more, or none, every call answered with a decision (a failure mode's", longDeadline)
	p("answer or a late one fails the cell) and every exactness limit admitting exactly L; with a shorter deadline, the")
	p("share of calls not answered in time at most the no-op services' in the same pass plus %.0f points, no answer", 100*lateSlack)
	p("but a decision or the failure mode's, and no limit admitting more than L; in the open loop, also goodput at")
	p("%.0f%% of the capacity or more.", 100*c.Goodput)
	p("")
	p("Generated by `%s` on %s (took %s), on %s × %d, load average (1, 5, 15 min) %s before and %s after.",
		strings.TrimSpace(r.Command), r.Date, r.Took, r.Machine.CPU, r.Machine.CPUs, r.Machine.LoadBefore, r.Machine.LoadAfter)
	p("")
	capacity := r.capacity()
	p("Medians over the %d passes of the closed loops, by deadline and build:", c.Passes)
	p("")
	p("| deadline | build | decided | not in time | failure answers and errors | decided /s | p99 | max | limits at exactly L | limits above L | goal met |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for i, dl := range c.DeadlinesText {
		for _, b := range r.buildNames() {
			m := r.closedMedians(b, i)
			if m.passes == 0 {
				continue
			}
			exact, above, met := fmt.Sprintf("%g of %d", m.exact, m.limits), fmt.Sprintf("%g", m.above), fmt.Sprintf("in %d of %d passes", m.met, m.passes)
			if b == noopName {
				exact, above, met = "–", "–", "(the ceiling)"
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", dl, b,
				fmtShare1(m.decided), fmtShare1(m.late), fmtShare1(m.errors), fmtRate(m.rate),
				fmtMicros(m.p99), fmtMicros(m.max), exact, above, met)
		}
	}
	p("")
	p("Capacity is the decisions per second of the newer build's first closed loop, %s/s. A call that ends in", fmtRate(capacity))
	p("DeadlineExceeded was not answered before its deadline; Unavailable is the failure mode's answer")
	p("(`RLS_FAILURE_MODE=error`), which Envoy turns into its own `failure_mode_deny` decision. Every loop of every pass:")
	p("")
	p("| build | deadline | loop | calls | decisions | decided /s | goodput / capacity | failure answers and errors | p50 | p99 | max | limits at exactly L | above L | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, v := range r.Variants {
		for _, ph := range v.phases() {
			x := ph.res
			loop := fmt.Sprintf("closed, %d callers", c.Callers)
			if ph.open {
				loop = fmt.Sprintf("open, %s/s", fmtRate(x.Rate))
			}
			exact, above, verdict := fmt.Sprintf("%d of %d", x.exactLimits(), len(x.Exact)), fmt.Sprint(x.aboveL()), "(the ceiling)"
			if v.Name == noopName {
				exact, above = "–", "–"
			} else {
				verdict = fmtVerdict(x.verdict(r.noopPhase(v.Pass, ph), ph.open, c, capacity))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
				v.title(), x.Deadline, loop, fmtRate(float64(x.Calls)), fmtRate(float64(x.Decisions)),
				fmtRate(float64(x.Decisions)/x.Seconds), fmtShare(share(x.Goodput, capacity)),
				fmtCodes(x.Codes), fmtMicros(x.P50), fmtMicros(x.P99), fmtMicros(x.Max), exact, above, verdict)
		}
	}
	p("")
	p("What the servers counted themselves, summed over the replicas and the loops of a pass:")
	p("")
	p("| build | backend timeouts | refused by the open breaker | breaker openings | shed (deadline / queue) | in-flight limit at the end | given back / dropped / uncertain |")
	p("|---|---|---|---|---|---|---|")
	for _, v := range r.Variants {
		if v.Name == noopName {
			continue
		}
		m := v.Servers
		p("| %s | %s | %s | %s | %s / %s | %s | %s / %s / %s |", v.label(),
			sample(m, `ratewarden_backend_errors_total{kind="timeout"}`),
			sample(m, `ratewarden_backend_errors_total{kind="circuit_open"}`),
			sample(m, `ratewarden_backend_circuit_breaker_opened_total`),
			sample(m, `ratewarden_requests_shed_total{reason="deadline"}`),
			sample(m, `ratewarden_requests_shed_total{reason="queue"}`),
			sample(m, `ratewarden_backend_inflight_limit`),
			sample(m, `ratewarden_backend_give_backs_total{result="given_back"}`),
			sample(m, `ratewarden_backend_give_backs_total{result="dropped"}`),
			sample(m, `ratewarden_backend_give_backs_total{result="uncertain"}`))
	}
	p("")
	p("(– where a build has no such metric; the in-flight limit is the sum of the replicas'.)")
	p("")
	p("Where the %d CPUs went while measuring, in CPUs used:", r.Machine.CPUs)
	p("")
	p("| build | deadline | loop | load generator | servers | Redis | busy loops |")
	p("|---|---|---|---|---|---|---|")
	for _, v := range r.Variants {
		for _, ph := range v.phases() {
			if ph.res.Cores == nil {
				continue
			}
			c := ph.res.Cores
			redis := fmt.Sprintf("%.2f", c[cpuRedis])
			if v.Name == noopName {
				redis = "–"
			}
			p("| %s | %s | %s | %.2f | %.2f | %s | %.2f |", v.label(), ph.res.Deadline, ph.name(), c[cpuLoadgen], c[cpuServer], redis, c[cpuSpinners])
		}
	}
	p("")
	p("Exactness limits, OK answers of each (offered calls in brackets):")
	p("")
	p("| build | deadline | loop | %s |", strings.Join(algorithmNames(), " | "))
	p("|---|---|---|%s", strings.Repeat("---|", len(algorithmNames())))
	for _, v := range r.Variants {
		if v.Name == noopName {
			continue
		}
		for _, ph := range v.phases() {
			byAlg := map[string][]string{}
			for _, e := range ph.res.Exact {
				byAlg[e.Algorithm] = append(byAlg[e.Algorithm], fmt.Sprintf("%d (%d)", e.Admitted, e.Offered))
			}
			var cells []string
			for _, a := range algorithmNames() {
				cells = append(cells, strings.Join(byAlg[a], ", "))
			}
			p("| %s | %s | %s | %s |", v.label(), ph.res.Deadline, ph.name(), strings.Join(cells, " | "))
		}
	}
	p("")
	p("%s", overloadAnalysisBegin)
	if analysis != "" {
		p("%s", analysis)
	}
	p("%s", overloadAnalysisEnd)
	p("%s", overloadEnd)
}

// joinTexts joins deadlines as a list in prose: "20ms, 1s and none".
func joinTexts(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// title names the round in the detailed table: its label and its commit.
func (v *overloadRound) title() string {
	if v.Commit == "" {
		return v.label()
	}
	return fmt.Sprintf("%s (%s)", v.label(), v.Commit)
}

// roundPhase is one loop of a round: a closed loop (the index-th deadline)
// or the open loop.
type roundPhase struct {
	res   *phaseResult
	open  bool
	index int
}

// name returns the loop's name: closed or open.
func (ph roundPhase) name() string {
	if ph.open {
		return "open"
	}
	return "closed"
}

// phases returns the loops the round ran, the closed ones first.
func (v *overloadRound) phases() []roundPhase {
	var out []roundPhase
	for i, x := range v.Closed {
		if x != nil {
			out = append(out, roundPhase{res: x, index: i})
		}
	}
	if v.Open != nil {
		out = append(out, roundPhase{res: v.Open, open: true})
	}
	return out
}

// noopPhase returns the no-op services' loop of pass that matches ph (the
// same deadline, closed or open), or nil when the run has none.
func (r *overloadReport) noopPhase(pass int, ph roundPhase) *phaseResult {
	for _, v := range r.Variants {
		if v.Name != noopName || v.Pass != pass {
			continue
		}
		for _, q := range v.phases() {
			if q.open == ph.open && q.index == ph.index {
				return q.res
			}
		}
	}
	return nil
}

// buildNames returns the builds of the run in the order they first ran.
func (r *overloadReport) buildNames() []string {
	var out []string
	for _, v := range r.Variants {
		if !slices.Contains(out, v.Name) {
			out = append(out, v.Name)
		}
	}
	return out
}

// phaseMedians is what one build's closed loops of one deadline measured:
// the median over its passes of each figure, and in how many passes the
// goal was met.
type phaseMedians struct {
	decided, late, errors, rate, p99, max, exact, above float64
	limits, passes, met                                 int
}

// closedMedians returns build's medians over its closed loops of the
// index-th deadline.
func (r *overloadReport) closedMedians(build string, index int) phaseMedians {
	var m phaseMedians
	var decided, late, errs, rate, p99, maxes, exact, above []float64
	for _, v := range r.Variants {
		if v.Name != build || index >= len(v.Closed) || v.Closed[index] == nil {
			continue
		}
		x := v.Closed[index]
		m.passes++
		m.limits = len(x.Exact)
		decided = append(decided, share(float64(x.Decisions), float64(x.Calls)))
		late = append(late, x.lateShare())
		errs = append(errs, share(float64(x.errors()), float64(x.Calls)))
		rate = append(rate, float64(x.Decisions)/x.Seconds)
		p99 = append(p99, x.P99)
		maxes = append(maxes, x.Max)
		exact = append(exact, float64(x.exactLimits()))
		above = append(above, float64(x.aboveL()))
		if build != noopName && len(x.verdict(r.noopPhase(v.Pass, roundPhase{res: x, index: index}), false, r.Config, r.capacity())) == 0 {
			m.met++
		}
	}
	m.decided, m.late, m.errors, m.rate = median(decided), median(late), median(errs), median(rate)
	m.p99, m.max, m.exact, m.above = median(p99), median(maxes), median(exact), median(above)
	return m
}

// median returns the median of xs, the mean of the middle two for an even
// count; NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// capacity returns the decisions per second of the newer build's first
// closed loop.
func (r *overloadReport) capacity() float64 {
	for _, v := range r.Variants {
		if v.Name == "after" && len(v.Closed) > 0 && v.Closed[0] != nil {
			return float64(v.Closed[0].Decisions) / v.Closed[0].Seconds
		}
	}
	return 0
}

// deadline returns the phase's deadline, 0 for none.
func (r *phaseResult) deadline() time.Duration {
	d, err := time.ParseDuration(r.Deadline)
	if err != nil {
		return 0
	}
	return d
}

// lateShare returns the share of the phase's calls that ended in
// DeadlineExceeded.
func (r *phaseResult) lateShare() float64 {
	return share(float64(r.Codes["DeadlineExceeded"]), float64(r.Calls))
}

// errors returns how many calls got an answer other than a decision and
// did not end in DeadlineExceeded: the failure mode's, and any other.
func (r *phaseResult) errors() uint64 {
	n := uint64(0)
	for code, c := range r.Codes {
		if code != "DeadlineExceeded" {
			n += c
		}
	}
	return n
}

// aboveL returns how many exactness limits admitted more than L.
func (r *phaseResult) aboveL() int {
	n := 0
	for _, e := range r.Exact {
		if e.Admitted > uint64(r.ExactLimit) {
			n++
		}
	}
	return n
}

// verdict checks a server build's phase against the goal of its deadline
// (see the comment at the top of overload.go), beside noop, the no-op
// services' matching loop of the same pass (nil when there is none); it
// returns what was missed, nothing when the goal was met.
func (r *phaseResult) verdict(noop *phaseResult, open bool, c overloadConfig, capacity float64) []string {
	var missed []string
	if d := r.deadline(); d == 0 || d >= longDeadline {
		if n := r.Calls - r.Decisions; n > 0 {
			missed = append(missed, fmt.Sprintf("%d calls not answered with a decision", n))
		}
		if n := r.exactLimits(); n < len(r.Exact) {
			missed = append(missed, fmt.Sprintf("%d of %d limits not exact", len(r.Exact)-n, len(r.Exact)))
		}
	} else {
		switch late := r.lateShare(); {
		case noop == nil:
			missed = append(missed, "no no-op loop to compare the late share with")
		case late > noop.lateShare()+lateSlack:
			missed = append(missed, fmt.Sprintf("%s not answered in time, more than the no-op's %s + %.0f points",
				fmtShare1(late), fmtShare1(noop.lateShare()), 100*lateSlack))
		}
		other := uint64(0)
		for code, n := range r.Codes {
			if code != "DeadlineExceeded" && code != "Unavailable" {
				other += n
			}
		}
		if other > 0 {
			missed = append(missed, fmt.Sprintf("%d other errors", other))
		}
		if n := r.aboveL(); n > 0 {
			missed = append(missed, fmt.Sprintf("%d of %d limits above L", n, len(r.Exact)))
		}
	}
	if open && share(r.Goodput, capacity) < c.Goodput {
		missed = append(missed, fmt.Sprintf("goodput below %s", fmtShare(c.Goodput)))
	}
	return missed
}

// fmtVerdict formats what a verdict missed: "met", or "**missed**: …".
func fmtVerdict(missed []string) string {
	if len(missed) == 0 {
		return "met"
	}
	return "**missed**: " + strings.Join(missed, ", ")
}

// sample formats the named sample of m, or – when there is none.
func sample(m map[string]float64, name string) string {
	v, ok := m[name]
	if !ok {
		return "–"
	}
	return fmtRate(v)
}

// fmtCodes formats error counts by code, or "none".
func fmtCodes(codes map[string]uint64) string {
	if len(codes) == 0 {
		return "none"
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		parts = append(parts, fmt.Sprintf("%s %s", code, fmtRate(float64(codes[code]))))
	}
	return strings.Join(parts, ", ")
}
