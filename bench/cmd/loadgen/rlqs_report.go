package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// The files `loadgen rlqs -update` writes beside the page, whose rlqs block
// it replaces: what it measured, from which both are rendered, and the
// detail page.
const (
	rlqsJSONPath   = detailDir + "/rlqs.json"
	rlqsDetailPath = detailDir + "/rlqs.md"
)

// cpuTick is the least CPU time /proc counts: a process that used less may
// read as none.
const cpuTick = time.Second / clockTicks

// rlqsReport is what a run of `loadgen rlqs` measured: the contents of
// benchmarks/rlqs.json, from which its block of the page and its detail
// page are rendered.
type rlqsReport struct {
	Command string  `json:"command"`
	Date    string  `json:"date"`
	Took    string  `json:"took"`
	Machine machine `json:"machine"`
	// Envoys ask in every cell.
	Envoys int `json:"envoys"`
	// Limit is L per Unit (as the limits file spells it); Offered the
	// load, as a multiple of L, and Rate the same in requests a second.
	Limit   uint64  `json:"limit"`
	Unit    string  `json:"unit"`
	Offered int     `json:"offered"`
	Rate    float64 `json:"rate"`
	// ReportInterval is how often the fake Envoys report; BackendTimeout
	// the servers' RLS_BACKEND_TIMEOUT.
	ReportInterval string `json:"report_interval"`
	BackendTimeout string `json:"backend_timeout"`
	// Cells are the results, each algorithm through RLS then RLQS.
	Cells []*quotaResult `json:"cells"`
}

// writeRLQSFiles writes the JSON, the detail page (keeping the analysis
// written by hand in an earlier one) and the rlqs block of the page into
// dir, and returns how many cells failed.
func writeRLQSFiles(dir string, rep *rlqsReport, log io.Writer) (failed int, err error) {
	err = writeGenerated(dir, generated{
		block: rlqsMarker, analysis: rlqsAnalysisMarker, data: rep, jsonPath: rlqsJSONPath, detailPath: rlqsDetailPath,
		render: func(detail, headline io.Writer, analysis string) {
			rep.writeDetail(detail, analysis)
			failed = rep.writeHeadline(headline)
		},
	})
	if err != nil {
		return failed, err
	}
	fmt.Fprintf(log, "loadgen: wrote %s, %s and the RLQS table of %s in %s\n", rlqsDetailPath, rlqsJSONPath, pagePath, dir)
	return failed, nil
}

// failures lists why the cell failed: errors, an open loop that fell
// behind, a server that logged warnings or errors, Envoys whose reports or
// streams were lost or that got no answer, or admissions above the limit.
// None means it did not fail.
func (r *quotaResult) failures() []string {
	var out []string
	if r.Errors > 0 {
		out = append(out, fmt.Sprintf("%d errors (%s)", r.Errors, r.FirstError))
	}
	if r.Late > micros(quotaMaxLate) {
		out = append(out, "the open loop fell behind by "+fmtMicros(r.Late))
	}
	if r.ServerLogLines > 0 {
		out = append(out, fmt.Sprintf("warnings or errors in the server's log: %d, the first `%s`", r.ServerLogLines, r.ServerLog[0]))
	}
	if q := r.Quota; q != nil {
		if q.ReportsLost > 0 {
			out = append(out, fmt.Sprintf("reports lost: %d", q.ReportsLost))
		}
		if q.Streams > r.Envoys {
			out = append(out, fmt.Sprintf("streams opened again: %d", q.Streams-r.Envoys))
		}
		if q.Responses == 0 {
			out = append(out, "no answer from the server")
		}
	}
	if r.Check.Above {
		out = append(out, "above the limit")
	}
	return out
}

// verdict is the verdict on the cell: met, or failed and why.
func (r *quotaResult) verdict() string {
	if f := r.failures(); len(f) > 0 {
		return "**failed**: " + strings.Join(f, "; ")
	}
	return "met"
}

// admitted returns the share of what the limit allows over the run that
// was admitted.
func (r *quotaResult) admitted() float64 {
	return quotient(float64(r.Allowed), r.Allows)
}

// commands returns how many Redis commands the cell called.
func (r *quotaResult) commands() uint64 { return r.Commands.total() }

// quotaFigures are what one cell admitted per Redis command and per second
// of its server's CPU. cpuBound reports a server that used less CPU than
// /proc counts, for which perCPU is the least it can be: what one tick
// would give.
type quotaFigures struct {
	perCommand, perCPU float64
	cpuBound           bool
}

// figures returns r's figures.
func (r *quotaResult) figures() quotaFigures {
	f := quotaFigures{perCommand: math.NaN()}
	if c := r.commands(); c > 0 {
		f.perCommand = float64(r.Allowed) / float64(c)
	}
	cpu := r.ServerCPU
	if cpu < cpuTick.Seconds() {
		cpu, f.cpuBound = cpuTick.Seconds(), true
	}
	f.perCPU = float64(r.Allowed) / cpu
	return f
}

// quotaPair is one algorithm's cells: through RLS and through RLQS.
type quotaPair struct {
	algorithm string
	rls, rlqs *quotaResult
}

// pairs returns the report's cells by algorithm, in the order they ran;
// an algorithm missing a cell has nil for it.
func (rep rlqsReport) pairs() []quotaPair {
	var out []quotaPair
	at := map[string]int{}
	for _, r := range rep.Cells {
		i, ok := at[r.Algorithm]
		if !ok {
			i = len(out)
			at[r.Algorithm] = i
			out = append(out, quotaPair{algorithm: r.Algorithm})
		}
		switch r.Protocol {
		case protocolRLS:
			out[i].rls = r
		case protocolRLQS:
			out[i].rlqs = r
		}
	}
	return out
}

// ratios returns RLQS's figures as multiples of RLS's: per Redis command,
// and per server CPU second, which is a lower bound when bound is set. ok
// is false when either cell is missing or failed: a failed cell's figures
// stand for nothing.
func (pr quotaPair) ratios() (perCommand, perCPU float64, bound, ok bool) {
	if pr.rls == nil || pr.rlqs == nil || len(pr.rls.failures()) > 0 || len(pr.rlqs.failures()) > 0 {
		return 0, 0, false, false
	}
	a, b := pr.rls.figures(), pr.rlqs.figures()
	if a.cpuBound {
		return b.perCommand / a.perCommand, math.NaN(), false, true
	}
	return b.perCommand / a.perCommand, b.perCPU / a.perCPU, b.cpuBound, true
}

// failed returns how many cells failed.
func (rep rlqsReport) failed() int {
	n := 0
	for _, r := range rep.Cells {
		if len(r.failures()) > 0 {
			n++
		}
	}
	return n
}

// method returns the sentences that say what each cell did.
func (rep rlqsReport) method() []string {
	return []string{
		fmt.Sprintf("Each cell: one descriptor, the RLQS bucket id, of a limit of %s a %s, asked %d× that (%s requests a second) at a fixed rate by %d Envoys for the %s window that the cells share from its start, each cell through a ratewarden server of its own with its default settings (leases and the deny cache on; RLS_BACKEND_TIMEOUT=%s) on a Redis of its own.",
			fmtRate(float64(rep.Limit)), rep.Unit, rep.Offered, fmtRate(rep.Rate), rep.Envoys, rep.Unit, rep.BackendTimeout),
		fmt.Sprintf("RLS: a ShouldRateLimit call per request, over %d gRPC connections, one per Envoy.", rep.Envoys),
		fmt.Sprintf("RLQS: %d fake Envoys (internal/testkit/rlqsenvoy, a model of Envoy's rate_limit_quota filter), each on a stream of its own, reporting every %s as Envoy does, and denying what no grant covers (DENY_ALL with no assignment and after one expires).",
			rep.Envoys, rep.ReportInterval),
		"Redis commands are counted by INFO commandstats, those a script runs included, and CPU is user and system time from /proc, both from just before the first request to just after the last answer;" +
			" the commands include those a server sends whatever its traffic: the readiness check of the backend (EVAL) and the readings of Redis's clock (TIME).",
	}
}

// writeHeadline writes the rlqs block of the page: each algorithm through
// RLS and through RLQS, RLQS's figures as multiples of RLS's, and where the
// rest is. It returns how many cells failed.
func (rep rlqsReport) writeHeadline(w io.Writer) (failed int) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## The Rate Limit Quota Service beside RateLimitService, on a limit that binds")
	p("")
	sentences := []string{fmt.Sprintf("Generated by `%s` on %s (took %s), on %s × %d, Redis %s, commit %s; load average (1, 5, 15 min) %s before and %s after.",
		rep.Command, rep.Date, rep.Took, rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.Redis, rep.Machine.Commit, rep.Machine.LoadBefore, rep.Machine.LoadAfter)}
	sentences = append(sentences, rep.method()...)
	writeParagraph(w, append(sentences, "Targets: never above the limit, and no error; a cell that misses either is failed, and its figures are not given.")...)
	rep.writeTable(w)
	p("")
	if s := rep.summary(); s != "" {
		writeParagraph(w, s)
	}
	writeParagraph(w, fmt.Sprintf("Every cell's requests, the checks against the limit, the commands by name, Redis's CPU, what the leases and the Envoys did, and the analysis: [%s](%s).",
		rlqsDetailPath, rlqsDetailPath))
	return rep.failed()
}

// writeTable writes the table of the cells: what each admitted, and at
// what cost, with RLQS's figures as multiples of RLS's.
func (rep rlqsReport) writeTable(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("| algorithm | protocol | admitted | of the limit | never above | Redis commands | admitted per Redis command | × RLS | server CPU s | admitted per server CPU second | × RLS | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, pr := range rep.pairs() {
		perCommand, perCPU, bound, ok := pr.ratios()
		for _, r := range []*quotaResult{pr.rls, pr.rlqs} {
			if r == nil {
				continue
			}
			above := "yes"
			if r.Check.Above {
				above = "**no**"
			}
			figs := [4]string{"–", "–", "–", "–"}
			if len(r.failures()) == 0 {
				f := r.figures()
				figs[0], figs[2] = fmtFigure(f.perCommand), fmtFigure(f.perCPU)
				if f.cpuBound {
					figs[2] = "> " + figs[2]
				}
			}
			switch {
			case r.Protocol == protocolRLS && figs[0] != "–":
				figs[1], figs[3] = "1.00", "1.00"
			case r.Protocol == protocolRLQS && ok:
				figs[1], figs[3] = fmtFigure(perCommand), fmtFigure(perCPU)
				if bound {
					figs[3] = "> " + figs[3]
				}
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %s | %s |", r.Algorithm, r.Protocol, fmtRate(float64(r.Allowed)), fmtShare1(r.admitted()),
				above, fmtRate(float64(r.commands())), figs[0], figs[1], r.ServerCPU, figs[2], figs[3], r.verdict())
		}
	}
}

// summary says, per algorithm, what RLQS's figures were as multiples of
// RLS's, or that a cell failed; "" for a report without cells.
func (rep rlqsReport) summary() string {
	var sentences []string
	for _, pr := range rep.pairs() {
		perCommand, perCPU, bound, ok := pr.ratios()
		if !ok {
			sentences = append(sentences, fmt.Sprintf("On %s a cell failed, so the two are not compared.", pr.algorithm))
			continue
		}
		cpu := fmtFigure(perCPU) + " times"
		if bound {
			cpu = "more than " + cpu
		}
		sentences = append(sentences, fmt.Sprintf("On %s, through RLQS the Envoys admitted %s times as many requests per Redis command as through RLS, %s as many per second of the server's CPU, and %s of the limit against RLS's %s.",
			pr.algorithm, fmtFigure(perCommand), cpu, fmtShare1(pr.rlqs.admitted()), fmtShare1(pr.rls.admitted())))
	}
	return strings.Join(sentences, " ")
}

// writeDetail writes the detail page of the run: why and how it measures,
// its tables, and analysis between the analysis markers. It returns how
// many cells failed.
func (rep rlqsReport) writeDetail(w io.Writer, analysis string) (failed int) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks: the Rate Limit Quota Service beside RateLimitService")
	p("")
	writeParagraph(w,
		"Through RateLimitService, Envoy asks about every request, and each answer costs the server a call and, unless a lease serves it, Redis a script.",
		"Through the Rate Limit Quota Service (RLQS), Envoy enforces locally from token buckets the server grants, and reports its usage every 5 seconds, when the server tops the grants up with one backend call per report ([docs/rlqs.md](../docs/rlqs.md)).",
		"This page measures both on the same machine, in the same window, on one hot limit that binds: what each admitted, whether it stayed within the limit, and what the requests it admitted cost Redis and the server.",
		fmt.Sprintf("The headline table is on [the page](../%s).", pagePath))
	writeParagraph(w, fmt.Sprintf("Generated by `%s` on %s (took %s), on %s × %d (%s, %s), %s, Redis %s, commit %s; load average (1, 5, 15 min) %s before and %s after.",
		rep.Command, rep.Date, rep.Took, rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.Memory, rep.Machine.Kernel, rep.Machine.Go, rep.Machine.Redis,
		rep.Machine.Commit, rep.Machine.LoadBefore, rep.Machine.LoadAfter))
	writeParagraph(w, rep.method()...)
	writeParagraph(w,
		"Each request is made at its time whatever became of the others (an open loop), the requests taking the Envoys in turn, and none after the window's end (one the loop could make only then is skipped); a cell whose loop fell more than "+fmtMicros(micros(quotaMaxLate))+" behind is failed, as is one with any error: a call that failed, a report an Envoy lost, a stream it had to open again, or a line the server logged (it runs at RLS_LOG_LEVEL=warn).",
		"An RLS request is decided somewhere between its call's send and its answer's receipt, an RLQS request in the Envoy as it is made; the checks keep that span of every admitted request and prove an excess only when no decision times within the spans avoid it (the fixed window: the windows aligned to the epoch; the sliding window log: every W).",
		"What is still held when the last answer is in (an RLS server's leases, the Envoys' grants) is not counted: the leases go back, and the streams' grants are settled when they end, after the second reading.")
	rep.writeTable(w)
	p("")
	if s := rep.summary(); s != "" {
		writeParagraph(w, s)
	}
	p("## Every cell")
	p("")
	p("| algorithm | protocol | sent | skipped | admitted | denied | of the limit | check | most in one window: certain | assigned or possible | open loop's lag | p99 of the answers | seconds measured |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Cells {
		p99 := "–"
		if r.Protocol == protocolRLS {
			p99 = fmtMicros(r.P99)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |", r.Algorithm, r.Protocol, fmtRate(float64(r.Sent)), fmtRate(float64(r.Skipped)), fmtRate(float64(r.Allowed)),
			fmtRate(float64(r.Denied)), fmtShare1(r.admitted()), r.Check.Kind, fmtCheckFigure(r.Check.Kind, r.Check.Certain),
			fmtCheckFigure(r.Check.Kind, r.Check.Loose), fmtMicros(r.Late), p99, r.Seconds)
	}
	p("")
	p("What each cell cost, and what the layers did: the leases of an RLS server (from its ratewarden_lease_* counters), and the fake Envoys of an RLQS cell, summed.")
	p("")
	p("| algorithm | protocol | Redis commands | by command | Redis CPU s | admitted per Redis CPU second | server CPU s | leases taken | hits served from leases | leased hits given back | streams | reports | reports lost | responses |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Cells {
		leases, quota := [3]string{"–", "–", "–"}, [4]string{"–", "–", "–", "–"}
		if l := r.Leases; l != nil {
			leases = [3]string{fmtRate(l.Taken), fmtRate(l.Served), fmtRate(l.GivenBack)}
		}
		if q := r.Quota; q != nil {
			quota = [4]string{fmtRate(float64(q.Streams)), fmtRate(float64(q.ReportsSent)), fmtRate(float64(q.ReportsLost)), fmtRate(float64(q.Responses))}
		}
		redisPer := "–"
		if r.RedisCPU > 0 {
			redisPer = fmtFigure(float64(r.Allowed) / r.RedisCPU)
		}
		p("| %s | %s | %s | %s | %.2f | %s | %.2f | %s | %s | %s | %s | %s | %s | %s |", r.Algorithm, r.Protocol, fmtRate(float64(r.commands())),
			fmtCommands(r.Commands), r.RedisCPU, redisPer, r.ServerCPU, leases[0], leases[1], leases[2], quota[0], quota[1], quota[2], quota[3])
	}
	p("")
	for _, r := range rep.Cells {
		if f := r.failures(); len(f) > 0 {
			p("- %s through %s **failed**: %s.", r.Algorithm, r.Protocol, strings.Join(f, "; "))
			if len(r.ServerLog) > 1 {
				p("  The server's next lines:")
				for _, line := range r.ServerLog[1:] {
					p("  - `%s`", line)
				}
			}
		}
	}
	if rep.failed() > 0 {
		p("")
	}
	rlqsAnalysisMarker.writeAnalysis(w, analysis)
	return rep.failed()
}

// fmtCommands lists Redis commands by name, the most called first, for a
// cell of a table: the bar of a subcommand's name (client|setname) is
// escaped.
func fmtCommands(c commandStats) string {
	if len(c) == 0 {
		return "none"
	}
	names := slices.SortedFunc(maps.Keys(c), func(a, b string) int { return cmp.Or(cmp.Compare(c[b], c[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %s", strings.ReplaceAll(n, "|", `\|`), fmtRate(float64(c[n])))
	}
	return strings.Join(parts, ", ")
}

// fmtFigure formats a figure with about three significant digits: 1.23,
// 12.3, 123, 1 234; "–" for none.
func fmtFigure(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v >= 100:
		return fmtRate(v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// summary is a cell's progress line.
func (r *quotaResult) summary() string {
	f := r.figures()
	return fmt.Sprintf("%d sent, %d admitted (%.1f%% of %.0f allowed), %s; %d Redis commands (%.1f admitted per command), server %.2f CPU s (%.0f admitted per s), late %s; %s",
		r.Sent, r.Allowed, percent*r.admitted(), r.Allows, r.Check.describe(), r.commands(), f.perCommand, r.ServerCPU, f.perCPU, fmtMicros(r.Late), r.verdict())
}
