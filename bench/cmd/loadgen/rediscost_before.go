package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// The before-and-after part of `loadgen rediscost`: the cold-key cells
// through the server on Redis, run for a server built from an earlier
// commit too (-baseline, the before build), taking turns with the module's
// in every round, and held to them.

// baselineServer is the before build: the server built from an earlier
// commit, which the Baseline cells run.
type baselineServer struct {
	commit, date, bin string
	noAddrFile        bool
	// settings holds the RLS_ variables the build reads; notGiven collects
	// the settings of the cells that it was not given, since it reads none
	// of them.
	settings map[string]bool
	notGiven map[string]bool
}

// setUpBaseline builds the server of commit, from the repository at root,
// in dir, and reads which settings it takes.
func setUpBaseline(ctx context.Context, root, commit, dir string, log io.Writer) (*baselineServer, error) {
	s := &baselineServer{commit: commit, bin: filepath.Join(dir, "server-before"), settings: map[string]bool{}, notGiven: map[string]bool{}}
	fmt.Fprintf(log, "loadgen: rediscost: building commit %s\n", commit)
	var err error
	if s.noAddrFile, err = buildCommit(ctx, root, commit, filepath.Join(dir, "baseline"), s.bin); err != nil {
		return nil, err
	}
	if s.date, err = commitDate(ctx, root, commit); err != nil {
		return nil, err
	}
	names, err := serverSettings(ctx, s.bin)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		s.settings[name] = true
	}
	return s, nil
}

// env returns the variables of env that the build reads, and notes the
// others as not given.
func (s *baselineServer) env(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "RLS_") && !s.settings[k] {
			s.notGiven[k] = true
			continue
		}
		out[k] = v
	}
	return out
}

// report returns what the report says of the build.
func (s *baselineServer) report() *baselineReport {
	return &baselineReport{Commit: s.commit, Date: s.date, NotGiven: slices.Sorted(maps.Keys(s.notGiven))}
}

// baselineReport is the before build of a rediscost run, in its report.
type baselineReport struct {
	// Commit is the commit as -baseline named it, Date its date (UTC).
	Commit string `json:"commit"`
	Date   string `json:"date"`
	// NotGiven lists the settings of the cells the build does not read,
	// which it was not given.
	NotGiven []string `json:"settings_not_given,omitempty"`
}

// beforeCell is the cold-key cell through the server on Redis of the
// before build, twin of the module's cell c.
func beforeCell(c cell) cell {
	c.Baseline = true
	return c
}

// takeTurns returns the cells of round (from 0) in the order they run: as
// listed in the even rounds, and in the odd ones each before cell ahead of
// the module's cell it follows in the list (after, before; before, after;
// …), so that the machine's drift falls on both builds alike.
func takeTurns(cells []cell, round int) []cell {
	out := slices.Clone(cells)
	if round%2 == 0 {
		return out
	}
	for i := 0; i+1 < len(out); i++ {
		if !out[i].Baseline && out[i+1].Baseline {
			out[i], out[i+1] = out[i+1], out[i]
			i++
		}
	}
	return out
}

// redisHeldToBefore reports whether alg's Redis CPU per cold decision is
// held to the before build's: token_bucket's and sliding_window_log's,
// whose scripts leases changed.
func redisHeldToBefore(alg algorithms.Algorithm) bool {
	return alg == algorithms.TokenBucket || alg == algorithms.SlidingWindowLog
}

// beforeAfter is one algorithm's cold-key cells through the server on
// Redis, of the before build and the module's (after), with the verdict.
type beforeAfter struct {
	alg           algorithms.Algorithm
	before, after cellStats
	// redis, commands and server are the after/before ratios of Redis's
	// CPU, Redis commands and the server's CPU per decision.
	redis, commands, server float64
	// redisTarget and serverTarget bound the ratios: 1 plus the noise
	// margin, the larger spread of the two cells' runs; redisTarget is 0
	// for an algorithm whose Redis cost is not held to the before build's.
	redisTarget, serverTarget float64
	// missed lists the targets missed; failed the cells that got errors.
	missed, failed []string
}

// beforeAfterOf returns the before-and-after figures of every algorithm;
// ok is false when the run had no before build.
func (rep redisCostReport) beforeAfterOf(stats map[string]cellStats) (figs []beforeAfter, ok bool) {
	if rep.Baseline == nil {
		return nil, false
	}
	for _, alg := range algorithms.Algorithms {
		after := rep.serverCell(backendStandalone, alg)
		f := beforeAfter{alg: alg, before: stats[beforeCell(after).name()], after: stats[after.name()]}
		f.redis, f.commands, f.server = f.after.redisCPU/f.before.redisCPU, f.after.commands/f.before.commands, f.after.serverCPU/f.before.serverCPU
		f.serverTarget = 1 + max(f.before.serverSpread, f.after.serverSpread)
		if redisHeldToBefore(alg) {
			f.redisTarget = 1 + max(f.before.redisSpread, f.after.redisSpread)
		}
		for _, s := range []struct {
			what string
			s    cellStats
		}{{"before", f.before}, {"after", f.after}} {
			if s.s.errors > 0 {
				f.failed = append(f.failed, fmt.Sprintf("%s: %d errors (%s)", s.what, s.s.errors, s.s.firstError))
			}
		}
		if f.redisTarget > 0 && !(f.redis <= f.redisTarget) {
			f.missed = append(f.missed, fmt.Sprintf("Redis %.3f× (target ≤ %.3f×)", f.redis, f.redisTarget))
		}
		if !(f.server <= f.serverTarget) {
			f.missed = append(f.missed, fmt.Sprintf("server %.3f× (target ≤ %.3f×)", f.server, f.serverTarget))
		}
		figs = append(figs, f)
	}
	return figs, true
}

// verdict is the verdict on the algorithm's targets against the before
// build.
func (f beforeAfter) verdict() string {
	if len(f.failed) > 0 {
		return "**failed**: " + strings.Join(f.failed, "; ")
	}
	return fmtVerdict(f.missed)
}

// fmtTarget formats a target of the before-and-after table, or – for none.
func fmtTarget(target float64) string {
	if target == 0 {
		return "–"
	}
	return fmt.Sprintf("≤ %.2f×", target)
}

// beforeAfterSentences say what the before-and-after cells are and what
// they are held to.
func (rep redisCostReport) beforeAfterSentences() []string {
	b := rep.Baseline
	s := []string{
		fmt.Sprintf("The cold-key cells through ratewarden's server on Redis, measured for this build (%s, after) and for the server built from commit %s of %s (before): the median of %d runs each, the two builds' cells of an algorithm one right after the other, after then before in one round and before then after in the next, so that the machine's drift falls on both.",
			rep.Machine.Commit, b.Commit, b.Date, rep.Config.Repeat),
		fmt.Sprintf("Both get the same settings (the limits, the standalone Redis, RLS_BACKEND_TIMEOUT=%s, RLS_LOG_LEVEL=warn) and otherwise run with their own defaults; the before build is given only the variables its -h lists.",
			rep.Config.BackendTimeoutText),
	}
	if len(b.NotGiven) > 0 {
		s = append(s, fmt.Sprintf("It reads no %s, which it was not given.", strings.Join(b.NotGiven, ", ")))
	}
	return append(s,
		"Targets: token_bucket's and sliding_window_log's Redis CPU per decision, and every algorithm's server CPU per decision, at most the before build's within the noise margin, the larger spread of the two builds' runs ((most − least) / median): after/before at most 1 plus that margin. Redis commands per decision are shown, not judged. A cell with any error fails.")
}

// writeBeforeAfterHeadline writes the page's table of the cold keys before
// and after.
func (rep redisCostReport) writeBeforeAfterHeadline(w io.Writer, stats map[string]cellStats) {
	figs, ok := rep.beforeAfterOf(stats)
	if !ok {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("### Cold keys, before and after")
	p("")
	writeParagraph(w, rep.beforeAfterSentences()...)
	p("| algorithm | Redis CPU µs per decision: before | after | × before | Redis commands per decision: before | after | × before | server CPU µs per decision: before | after | × before | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range figs {
		p("| %s | %.1f%s | %.1f%s | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %s |", f.alg, f.before.redisCPU, errorNote(f.before), f.after.redisCPU, errorNote(f.after),
			f.redis, f.before.commands, f.after.commands, f.commands, f.before.serverCPU, f.after.serverCPU, f.server, f.verdict())
	}
	p("")
}

// writeBeforeAfter writes the detail page's table of the cold keys before
// and after, with the targets.
func (rep redisCostReport) writeBeforeAfter(w io.Writer, stats map[string]cellStats) {
	figs, ok := rep.beforeAfterOf(stats)
	if !ok {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("## Cold keys, before and after")
	p("")
	writeParagraph(w, rep.beforeAfterSentences()...)
	p("| algorithm | decisions/s: before | after | Redis CPU µs per decision: before | after | × before | target | Redis commands per decision: before | after | × before | server CPU µs per decision: before | after | × before | target | verdict |")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range figs {
		p("| %s | %s%s | %s%s | %.1f | %.1f | %.2f | %s | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %s | %s |", f.alg, fmtRate(f.before.rate), errorNote(f.before), fmtRate(f.after.rate), errorNote(f.after),
			f.before.redisCPU, f.after.redisCPU, f.redis, fmtTarget(f.redisTarget), f.before.commands, f.after.commands, f.commands,
			f.before.serverCPU, f.after.serverCPU, f.server, fmtTarget(f.serverTarget), f.verdict())
	}
}
