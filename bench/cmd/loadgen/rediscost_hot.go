package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The hot-key part of `loadgen rediscost`: one key asked by every caller,
// through several replicas on one Redis, where leases serve it; and the
// binding runs, where its limit binds.

// groupBinding names the servers of the binding runs.
const groupBinding = "binding"

// The targets of the hot-key cells and of fixed_window on cold keys.
const (
	// hotCommandsTarget bounds the Redis commands per decision on a hot key
	// (those a script runs included).
	hotCommandsTarget = 0.05
	// hotRedisTarget bounds Redis CPU per decision on a hot key, against
	// envoyproxy/ratelimit's server on the same key.
	hotRedisTarget = 0.1
	// hotServerTarget bounds the servers' CPU per decision on a hot key on
	// Redis, against the memory backend's on the same key.
	hotServerTarget = 1.2
	// coldFixedTarget bounds fixed_window's Redis CPU per decision on cold
	// keys, against envoyproxy/ratelimit's server.
	coldFixedTarget = 1.0
)

// hotKeyCells lists the hot-key cells: concurrency callers over replicas
// servers, all for one value of the hot rule (a limit per second far above
// the load): envoyproxy/ratelimit's server, then per algorithm ratewarden's
// on Redis with leases and without, and on the memory backend.
func hotKeyCells(concurrency, replicas int) []cell {
	cells := []cell{hotKeyCell(backendPeer, algorithms.FixedWindow, concurrency, replicas, false)}
	for _, alg := range algorithms.Algorithms {
		cells = append(cells,
			hotKeyCell(backendStandalone, alg, concurrency, replicas, false),
			hotKeyCell(backendStandalone, alg, concurrency, replicas, true),
			hotKeyCell(backendMemory, alg, concurrency, replicas, false))
	}
	return cells
}

// hotKeyCell is the hot-key cell of alg on backend.
func hotKeyCell(backend string, alg algorithms.Algorithm, concurrency, replicas int, noLeases bool) cell {
	return cell{Group: groupRedisCost, Backend: backend, Algorithm: alg.String(), Keys: 1, Concurrency: concurrency,
		Replicas: replicas, PerSecond: true, NoLeases: noLeases}
}

// runBindingOf makes a binding run of alg through replicas fresh servers
// on the emptied standalone Redis, with leases or without.
func (b *bench) runBindingOf(ctx context.Context, alg algorithms.Algorithm, replicas int, noLeases bool) (*bindingResult, error) {
	t, err := b.startTarget(ctx, cell{Group: groupBinding, Backend: backendStandalone, Algorithm: alg.String(), Keys: 1, Replicas: replicas, NoLeases: noLeases})
	if err != nil {
		return nil, err
	}
	defer t.close()
	p := bindingParams{Addrs: t.addrs(addrfile.GRPC), Conns: b.cfg.Conns, Algorithm: alg, RunID: newRunID()}
	if t.leases {
		p.Leases = newLeaseReader(t.addrs(addrfile.HTTP))
	}
	r, err := runBinding(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, t.tail())
	}
	r.NoLeases = noLeases
	return r, nil
}

// hotFigures are the figures of one algorithm on the hot key, against the
// peer's server and the memory backend, with the verdict on each target.
type hotFigures struct {
	alg                     algorithms.Algorithm
	leased, unleased, mem   cellStats
	redisRatio, serverRatio float64
	// missed lists the targets missed; failed the cells that got errors.
	missed, failed []string
}

// hotFiguresOf returns the hot-key figures of every algorithm, and the
// peer's server's on the same key; ok is false when the report has no
// hot-key runs (it was made before there were any).
func (rep redisCostReport) hotFiguresOf(stats map[string]cellStats) (peer cellStats, figs []hotFigures, ok bool) {
	c, r := rep.Config.Concurrency, rep.Replicas
	name := func(backend string, alg algorithms.Algorithm, noLeases bool) string {
		return hotKeyCell(backend, alg, c, r, noLeases).name()
	}
	if len(rep.Runs[name(backendPeer, algorithms.FixedWindow, false)]) == 0 {
		return cellStats{}, nil, false
	}
	peer = stats[name(backendPeer, algorithms.FixedWindow, false)]
	for _, alg := range algorithms.Algorithms {
		f := hotFigures{alg: alg, leased: stats[name(backendStandalone, alg, false)],
			unleased: stats[name(backendStandalone, alg, true)], mem: stats[name(backendMemory, alg, false)]}
		f.redisRatio, f.serverRatio = f.leased.redisCPU/peer.redisCPU, f.leased.serverCPU/f.mem.serverCPU
		for _, s := range []struct {
			what string
			s    cellStats
		}{{"envoyproxy/ratelimit's server", peer}, {"with leases", f.leased}, {"memory backend", f.mem}} {
			if s.s.errors > 0 {
				f.failed = append(f.failed, fmt.Sprintf("%s: %d errors (%s)", s.what, s.s.errors, s.s.firstError))
			}
		}
		if f.leased.commands > hotCommandsTarget {
			f.missed = append(f.missed, fmt.Sprintf("%.3f commands", f.leased.commands))
		}
		if !(f.redisRatio <= hotRedisTarget) {
			f.missed = append(f.missed, fmt.Sprintf("Redis %.3f×", f.redisRatio))
		}
		if !(f.serverRatio <= hotServerTarget) {
			f.missed = append(f.missed, fmt.Sprintf("server %.2f×", f.serverRatio))
		}
		figs = append(figs, f)
	}
	return peer, figs, true
}

// verdict is the verdict on the three hot-key targets.
func (f hotFigures) verdict() string {
	if len(f.failed) > 0 {
		return "**failed**: " + strings.Join(f.failed, "; ")
	}
	return fmtVerdict(f.missed)
}

// writeHotHeadline writes the hot-key and binding tables of the page, and
// the cold fixed window's target.
func (rep redisCostReport) writeHotHeadline(w io.Writer, stats map[string]cellStats, peerCold cellStats) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	peer, figs, ok := rep.hotFiguresOf(stats)
	if ok {
		p("### One hot key over %d replicas, served from leases", rep.Replicas)
		p("")
		writeParagraph(w,
			fmt.Sprintf("%d callers spread over %d servers on one Redis, all for one key whose limit (per second) is far above the load; the median of %d runs, as above.",
				rep.Config.Concurrency, rep.Replicas, rep.Config.Repeat),
			fmt.Sprintf("Targets: at most %.2f Redis commands per decision (those a script runs counted), Redis CPU per decision at most %.1f× envoyproxy/ratelimit's server on the same key, and the servers' CPU per decision at most %.1f× the memory backend's (%d replicas too).",
				hotCommandsTarget, hotRedisTarget, hotServerTarget, rep.Replicas))
		p("| server | algorithm | decisions/s | Redis commands per decision | Redis CPU µs per decision | × peer | server CPU µs per decision | × memory | served from leases | verdict |")
		p("|---|---|---|---|---|---|---|---|---|---|")
		p("| envoyproxy/ratelimit | %s | %s%s | %.2f | %.1f | 1.00 | %.1f | | | |", algorithms.FixedWindow, fmtRate(peer.rate), errorNote(peer),
			peer.commands, peer.redisCPU, peer.serverCPU)
		for _, f := range figs {
			p("| ratewarden | %s | %s%s | %.3f | %.2f | %.3f | %.1f | %.2f | %s | %s |", f.alg, fmtRate(f.leased.rate), errorNote(f.leased),
				f.leased.commands, f.leased.redisCPU, f.redisRatio, f.leased.serverCPU, f.serverRatio, fmtShare1(f.leased.served), f.verdict())
		}
		p("")
	}
	if s := rep.coldFixed(stats, peerCold); s != "" {
		writeParagraph(w, s)
	}
	if len(rep.Binding) == 0 {
		return
	}
	p("### A hot key whose limit binds")
	p("")
	writeParagraph(w,
		fmt.Sprintf("One key of %s a second (the token bucket: a bucket of %s refilling %s a second) through %d replicas, offered %d× its limit at a fixed rate for %d s; %d runs of each algorithm.",
			fmtRate(bindingLimit), fmtRate(bindingLimit), fmtRate(bindingLimit), rep.Replicas, bindingOffered, bindingWindows*int(bindingWindow.Seconds()), rep.bindingRuns()),
		"An answer counts in a window only when its whole span from send to receipt lies in it; the most in one window is given certain, and with the answers that straddle a boundary assigned (log: that may lie in one W; bucket: admitted by t beyond burst + rate·t, by receipt and by send).",
		fmt.Sprintf("Targets: never above the limit, and at least %s of what it allows over the run admitted.", fmtShare(bindingAdmittedTarget)))
	p("| algorithm | check | most in one window: certain | assigned or possible | never above | admitted, of what the limit allows (least) | served from leases | verdict |")
	p("|---|---|---|---|---|---|---|---|")
	for _, alg := range algorithms.Algorithms {
		runs := rep.Binding[alg.String()]
		if len(runs) == 0 {
			continue
		}
		b := summarizeBinding(runs)
		p("| %s | %s | %s | %s | %s | %s | %s | %s |", alg, b.kind, b.certain, b.loose, b.above, fmtShare1(b.admitted), fmtShare1(b.served), b.verdict)
	}
	p("")
	if s := rep.controlSentence(); s != "" {
		writeParagraph(w, s)
	}
}

// controlSentence says what the control runs, without leases, found; ""
// when there were none.
func (rep redisCostReport) controlSentence() string {
	var parts []string
	for _, alg := range algorithms.Algorithms {
		runs := rep.BindingNoLeases[alg.String()]
		if len(runs) == 0 {
			continue
		}
		b := summarizeBinding(runs)
		parts = append(parts, fmt.Sprintf("%s %s certain, %s admitted, %s", alg, b.certain, fmtShare1(b.admitted), b.verdict))
	}
	if len(parts) == 0 {
		return ""
	}
	return "The same runs without leases (RLS_LEASES=false, once each, the control): " + strings.Join(parts, "; ") + "."
}

// coldFixed returns the sentence on fixed_window's target on cold keys,
// against envoyproxy/ratelimit's server (peer), or "" when the report has no
// such cell.
func (rep redisCostReport) coldFixed(stats map[string]cellStats, peer cellStats) string {
	fw, ok := stats[rep.serverCell(backendStandalone, algorithms.FixedWindow).name()]
	if !ok {
		return ""
	}
	ratio := fw.redisCPU / peer.redisCPU
	return fmt.Sprintf("On %s cold keys, fixed_window, decided with no script, cost Redis %.1f µs per decision, %.2f× envoyproxy/ratelimit's server (target ≤ %.1f×: %s).",
		fmtRate(float64(rep.Keys)), fw.redisCPU, ratio, coldFixedTarget, judge(worst(fw, peer), ratio, coldFixedTarget))
}

// worst returns the first of ss that got errors, or else the first.
func worst(ss ...cellStats) cellStats {
	for _, s := range ss {
		if s.errors > 0 {
			return s
		}
	}
	return ss[0]
}

// bindingRuns returns how many binding runs with leases each algorithm
// had (the most).
func (rep redisCostReport) bindingRuns() int {
	n := 0
	for _, runs := range rep.Binding {
		n = max(n, len(runs))
	}
	return n
}

// bindingFailed returns how many binding runs failed, control runs
// included: errors, or an open loop that could not keep its rate.
func (rep redisCostReport) bindingFailed() int {
	n := 0
	for _, set := range []map[string][]*bindingResult{rep.Binding, rep.BindingNoLeases} {
		for _, runs := range set {
			for _, r := range runs {
				if r.failed() {
					n++
				}
			}
		}
	}
	return n
}

// bindingSummary is the worst of an algorithm's binding runs.
type bindingSummary struct {
	kind, certain, loose, above, verdict string
	admitted, served                     float64
}

// summarizeBinding returns the worst figures of runs: the most in a window
// (or above the bucket's bound), the least admitted, and how many runs met
// the targets.
func summarizeBinding(runs []*bindingResult) bindingSummary {
	s := bindingSummary{admitted: math.Inf(1), served: math.Inf(1)}
	certain, loose := math.Inf(-1), math.Inf(-1)
	above, met := 0, 0
	for _, r := range runs {
		s.kind = r.Check.Kind
		certain, loose = max(certain, r.Check.Certain), max(loose, r.Check.Loose)
		s.admitted = min(s.admitted, r.admitted())
		s.served = min(s.served, r.servedShare())
		if r.Check.Above {
			above++
		}
		if r.met() {
			met++
		}
	}
	s.certain, s.loose = fmtCheckFigure(s.kind, certain), fmtCheckFigure(s.kind, loose)
	s.above = "yes"
	if above > 0 {
		s.above = fmt.Sprintf("**no**: above in %d of %d runs", above, len(runs))
	}
	s.verdict = "met"
	if met < len(runs) {
		s.verdict = fmt.Sprintf("**missed** in %d of %d runs", len(runs)-met, len(runs))
		if s.admitted < bindingAdmittedTarget {
			s.verdict += fmt.Sprintf(" (least admitted %.2f%%)", percent*s.admitted)
		}
	}
	return s
}

// servedShare returns the share of the admitted answers that leases
// served.
func (r *bindingResult) servedShare() float64 {
	if r.Leases == nil {
		return 0
	}
	return quotient(r.Leases.Served, float64(r.Allowed))
}

// fmtCheckFigure formats a figure of a check: a count of answers, or for
// the bucket how far the admissions were above burst + rate·t (negative:
// below).
func fmtCheckFigure(kind string, v float64) string {
	if kind == checkBucket {
		return fmt.Sprintf("%+.1f", v)
	}
	return fmtRate(v)
}

// writeHot writes the detail page's hot-key tables.
func (rep redisCostReport) writeHot(w io.Writer, stats map[string]cellStats) {
	peer, figs, ok := rep.hotFiguresOf(stats)
	if !ok {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("## One hot key over %d replicas", rep.Replicas)
	p("")
	writeParagraph(w,
		fmt.Sprintf("Each cell: %d callers spread over %d servers on the same Redis (%d gRPC connections to each), all asking for one key whose limit is per second and far above the load (%s a second; the log's %s, the most it may hold), so that no run reaches it however long; the median of %d runs.",
			rep.Config.Concurrency, rep.Replicas, rep.Config.Conns, fmtRate(float64(hotLimit(algorithms.FixedWindow))), fmtRate(float64(hotLimit(algorithms.SlidingWindowLog))), rep.Config.Repeat),
		"ratewarden's servers run with their default settings, leases on (RLS_LEASES), and with RLS_LEASES=false; the memory backend's servers (each with a state of its own) and envoyproxy/ratelimit's own server run as many replicas.",
		"Redis commands per decision count every command, those a script runs too (INFO commandstats); CPU is from /proc, the servers' summed.",
		fmt.Sprintf("envoyproxy/ratelimit's server on the same key: %s decisions/s%s, %.2f commands, %.1f µs of Redis and %.1f µs of its servers per decision.",
			fmtRate(peer.rate), errorNote(peer), peer.commands, peer.redisCPU, peer.serverCPU))
	p("| algorithm | decisions/s | Redis commands per decision | target | Redis CPU µs per decision | × peer's server | target | servers' CPU µs per decision | × memory | target | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range figs {
		p("| %s | %s%s | %.3f | ≤ %.2f | %.2f | %.3f | ≤ %.1f× | %.1f | %.2f | ≤ %.1f× | %s |", f.alg, fmtRate(f.leased.rate), errorNote(f.leased),
			f.leased.commands, hotCommandsTarget, f.leased.redisCPU, f.redisRatio, hotRedisTarget, f.leased.serverCPU, f.serverRatio, hotServerTarget, f.verdict())
	}
	p("")
	p("What the leases did (from the servers' ratewarden_lease_* counters, read just before and after the measurement, so that the calls in flight at either end may count and the share served pass 100%% by a little), and the same cells without leases and on the memory backend:")
	p("")
	p("| algorithm | leases a second | decisions served from leases | leased hits given back | no leases: decisions/s | commands per decision | Redis µs per decision | servers' µs per decision | memory: decisions/s | servers' µs per decision |")
	p("|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range figs {
		p("| %s | %s | %s | %s | %s%s | %.2f | %.1f | %.1f | %s%s | %.1f |", f.alg, fmtRate(f.leased.leaseRate), fmtShare1(f.leased.served), fmtShare1(f.leased.givenBack),
			fmtRate(f.unleased.rate), errorNote(f.unleased), f.unleased.commands, f.unleased.redisCPU, f.unleased.serverCPU,
			fmtRate(f.mem.rate), errorNote(f.mem), f.mem.serverCPU)
	}
}

// writeBinding writes the detail page's table of every binding run.
func (rep redisCostReport) writeBinding(w io.Writer) {
	if len(rep.Binding) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("## A hot key whose limit binds")
	p("")
	writeParagraph(w,
		fmt.Sprintf("Each run: one key of a limit of %s a second (the token bucket: a bucket of %s refilling %s a second), asked through %d fresh replicas on the emptied Redis, leases on (and once each off, the control), %d gRPC connections to each;"+
			" %s calls a second (%d× the limit) sent at a fixed rate for %d windows of %s from the start of a window, each at its time whatever became of the others (an open loop), the calls taking the connections in turn.",
			fmtRate(bindingLimit), fmtRate(bindingLimit), fmtRate(bindingLimit), rep.Replicas, rep.Config.Conns,
			fmtRate(bindingOffered*bindingLimit/bindingWindow.Seconds()), bindingOffered, bindingWindows, bindingWindow),
		"A client cannot see when the server decided, only that it was between the call's send and its receipt: the checks keep that span of every admitted answer and prove an excess only when no decision times within the spans avoid it.")
	writeParagraph(w,
		"fixed_window and sliding_window_counter (whose current window's count never passes L, which is what is checked of it): the windows aligned to the epoch, as Redis's clock places them.",
		"An answer counts in a window only when its whole span lies in it (certain), and the answers that straddle a boundary are assigned to a window they overlap so that the most in one window is least (an earliest-deadline-first pass over the windows, which finds an assignment within L whenever there is one).")
	writeParagraph(w,
		"sliding_window_log: every W: the most answers whose whole span lies in one W, less 1 µs (Redis's clock rounds a decision down to the µs, which can bring two decisions closer), and the most whose span overlaps one W.")
	writeParagraph(w,
		"token_bucket: for every t, the answers received by t against burst + rate·(t − t0), t0 the first send (the bucket starts full, no decision came before it), and the answers sent by t against the same; the figures are the most above that bound (negative: below it).")
	writeParagraph(w,
		fmt.Sprintf("Admitted: the admitted answers against what the limit allows over the run, %d L (the bucket: its burst and %d s of refill, %d L). Targets: never above, and at least %s admitted. A run with errors, or whose open loop fell a tenth of a window behind, is failed.",
			bindingWindows, bindingWindows, bindingWindows+1, fmtShare(bindingAdmittedTarget)))
	p("| algorithm | run | sent | admitted | of what the limit allows | check | certain | assigned or possible | straddling | never above | leases taken | hits served from leases | given back | open loop's lag | p99 | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	row := func(alg algorithms.Algorithm, run string, r *bindingResult) {
		leases := [3]string{"–", "–", "–"}
		if r.Leases != nil {
			leases = [3]string{fmtRate(r.Leases.Taken), fmtRate(r.Leases.Served), fmtRate(r.Leases.GivenBack)}
		}
		above := "yes"
		if r.Check.Above {
			above = "**no**"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", alg, run, fmtRate(float64(r.Sent)), fmtRate(float64(r.Allowed)),
			fmtShare1(r.admitted()), r.Check.Kind, fmtCheckFigure(r.Check.Kind, r.Check.Certain), fmtCheckFigure(r.Check.Kind, r.Check.Loose),
			fmtRate(float64(r.Check.Straddling)), above, leases[0], leases[1], leases[2], fmtMicros(r.Late), fmtMicros(r.P99), r.verdict())
	}
	for _, alg := range algorithms.Algorithms {
		for i, r := range rep.Binding[alg.String()] {
			row(alg, strconv.Itoa(i+1), r)
		}
		for _, r := range rep.BindingNoLeases[alg.String()] {
			row(alg, "no leases", r)
		}
	}
}

// verdict is the verdict on one binding run.
func (r *bindingResult) verdict() string {
	if r.failed() {
		if r.Errors > 0 {
			return fmt.Sprintf("**failed**: %d errors (%s)", r.Errors, r.FirstError)
		}
		return "**failed**: the open loop fell behind by " + fmtMicros(r.Late)
	}
	var missed []string
	if r.Check.Above {
		missed = append(missed, "above the limit")
	}
	if r.admitted() < bindingAdmittedTarget {
		missed = append(missed, fmt.Sprintf("admitted %.2f%%", percent*r.admitted()))
	}
	return fmtVerdict(missed)
}
