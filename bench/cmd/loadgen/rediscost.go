package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// groupRedisCost names the cells of `loadgen rediscost`.
const groupRedisCost = "rediscost"

// The files `loadgen rediscost -update` writes beside the page, whose
// rediscost block it replaces: what it measured, from which both are
// rendered, and the detail page.
const (
	rediscostJSONPath   = detailDir + "/rediscost.json"
	rediscostDetailPath = detailDir + "/rediscost.md"
)

// The targets of the Redis cost comparison: Redis CPU per decision against
// the peer's fixed window, and the server's CPU per decision on Redis
// against the memory backend.
const (
	redisCostTarget    = 1.0
	redisCostLogTarget = 1.5
	serverCostTarget   = 1.3
)

// rediscostCommand measures, in one run on one standalone Redis, what a
// decision of every algorithm costs Redis and the server: through ratewarden's
// server (the way Envoy's calls reach it), as one raw script call per round
// trip, and beside envoyproxy/ratelimit's fixed window (INCRBY and EXPIRE,
// pipelined, one decision per round trip), and the same server on the memory
// backend; through the server on cold keys, for a server built from an
// earlier commit (-baseline) too. Every cell runs -repeat times, the cells
// taking turns, and the report gives the median of each.
func rediscostCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("rediscost", "rediscost [flags]: what a decision of every algorithm costs Redis and the server, beside envoyproxy/ratelimit's fixed window and, on cold keys, a server built from -baseline, in one run", stderr)
	cfg := benchConfig{Quick: true, BackendTimeout: time.Second}
	flags.StringVar(&cfg.Root, "root", "", rootUsage)
	flags.DurationVar(&cfg.Duration, "duration", 3*time.Second, "how long each cell measures")
	flags.DurationVar(&cfg.Warmup, "warmup", 500*time.Millisecond, "how long each cell sends before measuring")
	flags.IntVar(&cfg.Concurrency, "concurrency", 64, "callers of every cell")
	flags.IntVar(&cfg.Conns, "conns", 2, "gRPC connections of the server cells")
	flags.IntVar(&cfg.Repeat, "repeat", 3, "runs of each cell; the report gives the median")
	keys := flags.Int("keys", 1000, "distinct keys, drawn uniformly")
	replicas := flags.Int("replicas", 2, "servers of the hot-key cells and the binding runs, over one Redis, the callers spread over them")
	binding := flags.Bool("binding", true, "make the binding runs: each algorithm's limit of 1000 a second offered twice for 10 s, once a round, and once in the first round without leases")
	hot := flags.Bool("hot", true, "measure the hot-key cells: one key over -replicas servers, with leases and without")
	baseline := flags.String("baseline", "f6d78ac", "commit of -root's repository to build the 'before' server from, whose cold-key cells through the server on Redis take turns with this build's; empty skips it")
	peer := flags.String("peer", "", "envoyproxy/ratelimit's server binary to run beside ratewarden's; default: go install "+peerPackage+"@"+peerVersion)
	peerName := flags.String("peer-version", "", "what the report calls the -peer binary (its version or commit); default: the version it was built with, if it says")
	update := flags.String("update", "", "the page, "+pagePath+", to write the headline table into, between its rediscost markers, with the detail and the JSON under "+detailDir+"/ beside it; default: print the detail")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if cfg.Concurrency < 1 || cfg.Conns < 1 || cfg.Repeat < 1 || cfg.Duration <= 0 || cfg.Warmup < 0 || *keys < 1 || *replicas < 1 {
		return fmt.Errorf("loadgen: rediscost: -concurrency, -conns, -repeat, -keys, -replicas and -duration must be positive, -warmup not negative")
	}
	if *update != "" && filepath.Base(*update) != pagePath {
		return fmt.Errorf("loadgen: rediscost: -update %s: it names the page, a file called %s, beside which the detail goes into %s/", *update, pagePath, detailDir)
	}
	var err error
	if cfg.Root, err = orServerRoot(cfg.Root); err != nil {
		return err
	}
	cfg.DurationText, cfg.WarmupText, cfg.BackendTimeoutText = cfg.Duration.String(), cfg.Warmup.String(), cfg.BackendTimeout.String()
	begin := time.Now()
	dir, err := os.MkdirTemp("", "loadgen-rediscost-")
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer os.RemoveAll(dir)
	b := &bench{cfg: cfg, dir: dir, log: stderr}
	defer b.stop()
	if err := b.setUp(ctx); err != nil {
		return err
	}
	if *baseline != "" {
		if b.baseline, err = setUpBaseline(ctx, cfg.Root, *baseline, dir, stderr); err != nil {
			return err
		}
	}
	peerLabel := peerVersion
	if b.peerBin = *peer; b.peerBin == "" {
		fmt.Fprintf(stderr, "loadgen: rediscost: installing %s@%s\n", peerPackage, peerVersion)
		if b.peerBin, err = installPeer(ctx, dir); err != nil {
			return err
		}
	} else if peerLabel = *peerName; peerLabel == "" {
		peerLabel = peerBuildVersion(b.peerBin)
	}
	if b.peerRoot, err = writePeerConfig(dir); err != nil {
		return err
	}
	m := describeMachine(ctx, cfg.Root, b.standalone)

	cells := slices.DeleteFunc(redisCostCells(*keys, cfg.Concurrency, *replicas), func(c cell) bool {
		return c.Baseline && b.baseline == nil || c.PerSecond && !*hot
	})
	runs := map[string][]*result{}
	bindings, controls := map[string][]*bindingResult{}, map[string][]*bindingResult{}
	for rep := range cfg.Repeat {
		for i, c := range takeTurns(cells, rep) {
			r, _, err := b.runCell(ctx, c)
			if err != nil {
				return fmt.Errorf("loadgen: rediscost cell %s: %w", c.name(), err)
			}
			runs[c.name()] = append(runs[c.name()], r)
			fmt.Fprintf(stderr, "[run %d/%d, %2d/%d] %-72s %8.0f/s  redis %5.1fµs %5.2f cmds  server %5.1fµs  errors %d%s\n",
				rep+1, cfg.Repeat, i+1, len(cells), c.name(), r.Rate, r.CPU[cpuRedis], r.Redis.perDecision(), r.CPU[cpuServer], r.Errors, r.Leases.describe())
		}
		if !*binding {
			continue
		}
		for _, alg := range algorithms.Algorithms {
			for _, noLeases := range []bool{false, true} {
				if noLeases && rep > 0 {
					continue // one control run is enough
				}
				r, err := b.runBindingOf(ctx, alg, *replicas, noLeases)
				if err != nil {
					return fmt.Errorf("loadgen: rediscost binding run of %s: %w", alg, err)
				}
				if noLeases {
					controls[alg.String()] = append(controls[alg.String()], r)
				} else {
					bindings[alg.String()] = append(bindings[alg.String()], r)
				}
				writeBindingLine(stderr, rep+1, cfg.Repeat, r)
			}
		}
	}
	m.LoadAfter = loadAverage()
	rep := &redisCostReport{
		Command: reproduceCommand(flags, "rediscost"), Date: begin.UTC().Format("2006-01-02 15:04 MST"),
		Took: time.Since(begin).Round(time.Second).String(), Machine: m, Config: cfg, Keys: *keys, Replicas: *replicas,
		Peer: peerLabel, Runs: runs, Binding: bindings, BindingNoLeases: controls,
	}
	if b.baseline != nil {
		rep.Baseline = b.baseline.report()
	}
	var failed int
	if *update == "" {
		failed = rep.write(stdout, cells, runs)
	} else if failed, err = writeRedisCostFiles(filepath.Dir(*update), rep, stderr); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("loadgen: rediscost: %d cells or binding runs failed (see the report)", failed)
	}
	return nil
}

// writeRedisCostFiles writes the JSON, the detail page (keeping the
// analysis written by hand in an earlier one) and the rediscost block of the
// page into dir, and returns how many cells got errors and binding runs
// failed.
func writeRedisCostFiles(dir string, rep *redisCostReport, log io.Writer) (failed int, err error) {
	cells := redisCostCells(rep.Keys, rep.Config.Concurrency, rep.Replicas)
	err = writeGenerated(dir, generated{
		block: rediscostMarker, analysis: rediscostAnalysisMarker, data: rep, jsonPath: rediscostJSONPath, detailPath: rediscostDetailPath,
		render: func(detail, headline io.Writer, analysis string) {
			rep.writeDetail(detail, cells, analysis)
			failed = rep.writeHeadline(headline, cells)
		},
	})
	if err != nil {
		return failed, err
	}
	fmt.Fprintf(log, "loadgen: wrote %s, %s and the Redis cost table of %s in %s\n", rediscostDetailPath, rediscostJSONPath, pagePath, dir)
	return failed, nil
}

// floorPipeline is how many calls share a round trip in the cells that
// measure what a script costs Redis once the round trip is shared: about as
// many as ratewarden's server coalesces under this load.
const floorPipeline = 8

// redisCostCells lists the cells of one round: the peer's fixed window, its
// Redis traffic alone and through its own server, and per algorithm
// ratewarden's server on Redis, the before build's right after it
// (beforeCell), its script alone, and the server on the memory backend;
// then the floor of a scripted decision: an empty script beside the peer's
// traffic, one per round trip and floorPipeline per round trip, and every
// algorithm's script floorPipeline per round trip; then the hot-key cells
// over replicas servers (hotKeyCells).
func redisCostCells(keys, concurrency, replicas int) []cell {
	script := func(name string, pipeline int) cell { return scriptCell(name, pipeline, keys, concurrency) }
	cells := []cell{
		script(scriptPeer, 1),
		{Group: groupRedisCost, Backend: backendPeer, Algorithm: algorithms.FixedWindow.String(), Keys: keys, Concurrency: concurrency},
	}
	for _, alg := range algorithms.Algorithms {
		a := alg.String()
		server := cell{Group: groupRedisCost, Backend: backendStandalone, Algorithm: a, Keys: keys, Concurrency: concurrency}
		cells = append(cells,
			server,
			beforeCell(server),
			script(a, 1),
			cell{Group: groupRedisCost, Backend: backendMemory, Algorithm: a, Keys: keys, Concurrency: concurrency})
	}
	cells = append(cells, script(scriptTrivial, 1), script(scriptPeer, floorPipeline), script(scriptTrivial, floorPipeline))
	for _, alg := range algorithms.Algorithms {
		cells = append(cells, script(alg.String(), floorPipeline))
	}
	return append(cells, hotKeyCells(concurrency, replicas)...)
}

// scriptCell is the rediscost cell that sends script name (or the peer's
// commands) straight to Redis, pipeline calls per round trip.
func scriptCell(name string, pipeline, keys, concurrency int) cell {
	return cell{Group: groupRedisCost, Backend: backendStandalone, Script: name, Pipeline: pipeline, Keys: keys, Concurrency: concurrency}
}

// redisCostReport is what a rediscost run measured: the contents of
// benchmarks/rediscost.json, from which its block of the page and its
// detail page are rendered. Runs holds every run of every cell, by the
// cell's name.
type redisCostReport struct {
	Command string      `json:"command"`
	Date    string      `json:"date"`
	Took    string      `json:"took"`
	Machine machine     `json:"machine"`
	Config  benchConfig `json:"config"`
	Keys    int         `json:"keys"`
	// Replicas is the servers of the hot-key cells and the binding runs.
	Replicas int `json:"replicas"`
	// Peer names the build of envoyproxy/ratelimit's server measured; empty
	// for peerVersion.
	Peer string               `json:"peer,omitempty"`
	Runs map[string][]*result `json:"runs"`
	// Binding holds every binding run, by algorithm, in the order made;
	// BindingNoLeases the control runs, made with RLS_LEASES=false.
	Binding         map[string][]*bindingResult `json:"binding,omitempty"`
	BindingNoLeases map[string][]*bindingResult `json:"binding_no_leases,omitempty"`
	// Baseline is the before build, whose cold-key cells through the
	// server on Redis ran beside the module's; nil when there was none.
	Baseline *baselineReport `json:"baseline,omitempty"`
}

// peer names the build of envoyproxy/ratelimit's server measured.
func (rep redisCostReport) peer() string {
	if rep.Peer == "" {
		return peerVersion
	}
	return rep.Peer
}

// cellStats is the median over a cell's runs of what the report shows, and
// whether any run got an error.
type cellStats struct {
	rate, redisCPU, serverCPU, commands float64
	// leases says whether the cell's servers counted leases; served is the
	// share of decisions served from leases, leaseRate the leases taken a
	// second, givenBack the share of leased hits given back.
	leases                       bool
	served, leaseRate, givenBack float64
	// redisSpread and serverSpread are how far the runs' CPU per decision
	// lay apart: (most − least) / median; 0 for one run.
	redisSpread, serverSpread float64
	errors                    uint64
	firstError                string
}

func statsOf(rs []*result) cellStats {
	sorted := func(f func(*result) float64) []float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v
	}
	median := func(v []float64) float64 {
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	med := func(f func(*result) float64) float64 { return median(sorted(f)) }
	spread := func(f func(*result) float64) float64 {
		v := sorted(f)
		if len(v) == 0 {
			return 0
		}
		return quotient(v[len(v)-1]-v[0], median(v))
	}
	s := cellStats{
		rate:         med(func(r *result) float64 { return r.Rate }),
		redisCPU:     med(func(r *result) float64 { return r.CPU[cpuRedis] }),
		serverCPU:    med(func(r *result) float64 { return r.CPU[cpuServer] }),
		commands:     med(func(r *result) float64 { return r.Redis.perDecision() }),
		redisSpread:  spread(func(r *result) float64 { return r.CPU[cpuRedis] }),
		serverSpread: spread(func(r *result) float64 { return r.CPU[cpuServer] }),
	}
	if len(rs) > 0 && rs[0].Leases != nil {
		s.leases = true
		s.served = med(func(r *result) float64 { return quotient(r.Leases.Served, float64(r.Decisions)) })
		s.leaseRate = med(func(r *result) float64 { return quotient(r.Leases.Taken, r.Seconds) })
		s.givenBack = med(func(r *result) float64 { return quotient(r.Leases.GivenBack, r.Leases.Leased) })
	}
	for _, r := range rs {
		s.errors += r.Errors
		if s.firstError == "" {
			s.firstError = r.FirstError
		}
	}
	return s
}

// cellsStats returns the median figures of every cell, by name, and how
// many cells got errors: a cell with any error is a failed cell, whatever
// its figures.
func cellsStats(cells []cell, runs map[string][]*result) (stats map[string]cellStats, failed int) {
	stats = map[string]cellStats{}
	for _, c := range cells {
		if len(runs[c.name()]) == 0 {
			continue // a report made before the cell was measured
		}
		s := statsOf(runs[c.name()])
		stats[c.name()] = s
		if s.errors > 0 {
			failed++
		}
	}
	return stats, failed
}

// serverCell is the cell of ratewarden's server on backend (standalone
// Redis or memory) with algorithm alg.
func (rep redisCostReport) serverCell(backend string, alg algorithms.Algorithm) cell {
	return cell{Group: groupRedisCost, Backend: backend, Algorithm: alg.String(), Keys: rep.Keys, Concurrency: rep.Config.Concurrency}
}

// writeHeadline writes the rediscost block of the page: each algorithm
// through ratewarden's server beside envoyproxy/ratelimit's own server, and
// where the rest is. It returns how many cells got errors.
func (rep redisCostReport) writeHeadline(w io.Writer, cells []cell) (failed int) {
	stats, failed := cellsStats(cells, rep.Runs)
	peer := stats[cells[1].name()]
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("## Redis cost per decision, against envoyproxy/ratelimit")
	p("")
	writeParagraph(w,
		fmt.Sprintf("Generated by `%s` on %s (took %s), on %s × %d, Redis %s, commit %s; load average (1, 5, 15 min) %s before and %s after.",
			rep.Command, rep.Date, rep.Took, rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.Redis, rep.Machine.Commit, rep.Machine.LoadBefore, rep.Machine.LoadAfter),
		fmt.Sprintf("Each cell: %d callers on %d gRPC connections, %s keys drawn uniformly, no call over its limit, one standalone Redis; the median of %d runs of %s after %s of warm-up, the cells taking turns.",
			rep.Config.Concurrency, rep.Config.Conns, fmtRate(float64(rep.Keys)), rep.Config.Repeat, rep.Config.DurationText, rep.Config.WarmupText),
		fmt.Sprintf("envoyproxy/ratelimit (%s) is its own server with its statistics off, driven by the same callers; its configuration knows no algorithm, so it runs its fixed window.", rep.peer()),
		"CPU is user and system time from /proc: Redis's, and the server's.")
	p("| server | algorithm | decisions/s | Redis CPU µs per decision | × peer | Redis commands per decision | server CPU µs per decision |")
	p("|---|---|---|---|---|---|---|")
	p("| envoyproxy/ratelimit | %s | %s%s | %.1f | 1.00 | %.2f | %.1f |", algorithms.FixedWindow, fmtRate(peer.rate), errorNote(peer),
		peer.redisCPU, peer.commands, peer.serverCPU)
	redisLo, redisHi, serverLo, serverHi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, alg := range algorithms.Algorithms {
		s := stats[rep.serverCell(backendStandalone, alg).name()]
		redis, server := s.redisCPU/peer.redisCPU, s.serverCPU/peer.serverCPU
		redisLo, redisHi, serverLo, serverHi = min(redisLo, redis), max(redisHi, redis), min(serverLo, server), max(serverHi, server)
		p("| ratewarden | %s | %s%s | %.1f | %.2f | %.2f | %.1f |", alg, fmtRate(s.rate), errorNote(s), s.redisCPU, redis, s.commands, s.serverCPU)
	}
	p("")
	writeParagraph(w,
		fmt.Sprintf("Per decision, Redis spent %s times behind ratewarden's server what it spent behind the peer's, and ratewarden's server used %s times the CPU of the peer's.",
			fmtSpan("%.2f", redisLo, redisHi), fmtSpan("%.2f", serverLo, serverHi)),
		fmt.Sprintf("The peer's Redis traffic alone, sent with no server in front, the targets set against it, what a script costs Redis by itself, the server on the memory backend and the analysis: [%s](%s).",
			rediscostDetailPath, rediscostDetailPath))
	rep.writeBeforeAfterHeadline(w, stats)
	rep.writeHotHeadline(w, stats, peer)
	return failed + rep.bindingFailed()
}

// writeDetail writes the detail page of the rediscost run: why and how it
// measures, its tables, and analysis between the analysis markers.
func (rep redisCostReport) writeDetail(w io.Writer, cells []cell, analysis string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks: Redis cost per decision, beside envoyproxy/ratelimit")
	p("")
	p("Redis is the part that does not scale out with replicas, so what one decision costs it decides how many")
	p("decisions one Redis core serves. The baseline is envoyproxy/ratelimit's fixed window as its Redis cache sends")
	p("it: `INCRBY` of the window's key and `EXPIRE`, pipelined, one round trip per decision (no local cache, no")
	p("implicit pipelining: its defaults), sent by the load generator at the same concurrency to the same Redis;")
	p("beside it, the peer's own server, built from its module and driven as ratewarden's server is. Then the")
	p("floor: an empty script and each algorithm's script, sent with no server in front at one and at %d", floorPipeline)
	p("calls per round trip, beside the peer's commands sent the same way; then one hot key asked through several")
	p("replicas, where leases serve it, and the runs where its limit binds. The headline tables are on [the page](../%s).", pagePath)
	p("")
	rep.write(w, cells, rep.Runs)
	p("")
	rediscostAnalysisMarker.writeAnalysis(w, analysis)
}

// write renders the report's tables and returns how many cells got errors:
// a cell with any error is a failed cell, whatever its figures.
func (rep redisCostReport) write(w io.Writer, cells []cell, runs map[string][]*result) (failed int) {
	stats, failed := cellsStats(cells, runs)
	peer, peerServer := stats[cells[0].name()], stats[cells[1].name()]
	fmt.Fprintf(w, "Generated by `%s` on %s (took %s), on %s × %d, Redis %s, commit %s; load average (1, 5, 15 min) %s before and %s after. "+
		"Each cell ran %d times for %s after %s of warm-up, the cells taking turns; the tables give the median of the runs. "+
		"%d callers on %d keys drawn uniformly, one decision per call, and no call over its limit; the callers of a server share %d gRPC connections.\n\n",
		rep.Command, rep.Date, rep.Took, rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.Redis, rep.Machine.Commit,
		rep.Machine.LoadBefore, rep.Machine.LoadAfter, rep.Config.Repeat, rep.Config.DurationText, rep.Config.WarmupText,
		rep.Config.Concurrency, rep.Keys, rep.Config.Conns)
	fmt.Fprintf(w, "Redis CPU per decision (user + system time of the redis-server process, from /proc), against envoyproxy/ratelimit's "+
		"fixed window (%s), measured two ways. Its own server, driven through gRPC by the same callers as ratewarden's: "+
		"%.1f µs of Redis and %.1f µs of its server per decision, %.2f commands, %s/s%s. Its Redis traffic alone (INCRBY and EXPIRE "+
		"pipelined, one decision per round trip, as its Redis cache sends them, from the load generator with no server in front): "+
		"%.1f µs, %.2f commands, %s/s%s. The targets are judged against the traffic alone, the baseline they were set against; "+
		"the server shows what Redis pays when the peer itself sends that traffic, from a gRPC server sharing the CPUs with Redis as ratewarden's does.\n\n",
		rep.peer(), peerServer.redisCPU, peerServer.serverCPU, peerServer.commands, fmtRate(peerServer.rate), errorNote(peerServer),
		peer.redisCPU, peer.commands, fmtRate(peer.rate), errorNote(peer))
	fmt.Fprintln(w, "| algorithm | through the server: Redis µs per decision | × peer's traffic alone | × peer's server | Redis commands per decision | decisions/s | one script per round trip: Redis µs per call | × peer's traffic alone | target | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, alg := range algorithms.Algorithms {
		srv := stats[cell{Group: groupRedisCost, Backend: backendStandalone, Algorithm: alg.String(), Keys: rep.Keys, Concurrency: rep.Config.Concurrency}.name()]
		raw := stats[scriptCell(alg.String(), 1, rep.Keys, rep.Config.Concurrency).name()]
		target := redisCostTarget
		if alg == algorithms.SlidingWindowLog {
			target = redisCostLogTarget
		}
		ratio := srv.redisCPU / peer.redisCPU
		worst := srv
		if peer.errors > 0 {
			worst = peer
		}
		fmt.Fprintf(w, "| %s | %.1f | %.2f | %.2f | %.2f | %s%s | %.1f | %.2f | ≤ %.1f× | %s |\n", alg, srv.redisCPU, ratio, srv.redisCPU/peerServer.redisCPU,
			srv.commands, fmtRate(srv.rate), errorNote(srv), raw.redisCPU, raw.redisCPU/peer.redisCPU, target, judge(worst, ratio, target))
	}
	fmt.Fprintln(w)
	if s := rep.coldFixed(stats, peerServer); s != "" {
		writeParagraph(w, s)
	}
	fmt.Fprintf(w, "Server CPU per decision (the ratewarden process, from /proc), on Redis against the memory backend "+
		"(envoyproxy/ratelimit's server: %.1f µs per decision on Redis):\n", peerServer.serverCPU)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| algorithm | memory: server µs per decision | decisions/s | Redis: server µs per decision | decisions/s | × memory | target | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, alg := range algorithms.Algorithms {
		mem := stats[cell{Group: groupRedisCost, Backend: backendMemory, Algorithm: alg.String(), Keys: rep.Keys, Concurrency: rep.Config.Concurrency}.name()]
		srv := stats[cell{Group: groupRedisCost, Backend: backendStandalone, Algorithm: alg.String(), Keys: rep.Keys, Concurrency: rep.Config.Concurrency}.name()]
		ratio := srv.serverCPU / mem.serverCPU
		worst := srv
		if mem.errors > 0 {
			worst = mem
		}
		fmt.Fprintf(w, "| %s | %.1f | %s%s | %.1f | %s%s | %.2f | ≤ %.1f× | %s |\n", alg, mem.serverCPU, fmtRate(mem.rate), errorNote(mem),
			srv.serverCPU, fmtRate(srv.rate), errorNote(srv), ratio, serverCostTarget, judge(worst, ratio, serverCostTarget))
	}
	rep.writeFloor(w, stats)
	rep.writeBeforeAfter(w, stats)
	rep.writeHot(w, stats)
	rep.writeBinding(w)
	return failed + rep.bindingFailed()
}

// writeFloor renders what a script costs Redis by itself, beside the peer's
// traffic: an empty script, and every algorithm's, one call per round trip
// and floorPipeline calls per round trip, from the load generator with no
// server in front.
func (rep redisCostReport) writeFloor(w io.Writer, stats map[string]cellStats) {
	at := func(script string, pipeline int) cellStats {
		return stats[scriptCell(script, pipeline, rep.Keys, rep.Config.Concurrency).name()]
	}
	peer1, peerN := at(scriptPeer, 1), at(scriptPeer, floorPipeline)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "What a script costs Redis by itself, beside the peer's decision (INCRBY and EXPIRE), from the load generator with no server in front: "+
		"one call per round trip, and %d calls per round trip, which shares the round trip about as ratewarden's server does under this load. "+
		"The empty script is `return 1`: no scripted decision costs Redis less.\n\n", floorPipeline)
	fmt.Fprintf(w, "| calls | one per round trip: Redis µs per call | × peer | %d per round trip: Redis µs per call | × peer |\n", floorPipeline)
	fmt.Fprintln(w, "|---|---|---|---|---|")
	row := func(name string, one, many cellStats) {
		fmt.Fprintf(w, "| %s | %.1f%s | %.2f | %.1f%s | %.2f |\n", name, one.redisCPU, errorNote(one), one.redisCPU/peer1.redisCPU,
			many.redisCPU, errorNote(many), many.redisCPU/peerN.redisCPU)
	}
	row("envoyproxy/ratelimit's decision (INCRBY, EXPIRE)", peer1, peerN)
	row("empty script", at(scriptTrivial, 1), at(scriptTrivial, floorPipeline))
	for _, alg := range algorithms.Algorithms {
		name := alg.String() + " script"
		if alg.Spec().Counter {
			name = alg.String() + " (SET NX PX and INCRBY, no script)"
		}
		row(name, at(alg.String(), 1), at(alg.String(), floorPipeline))
	}
}

// judge returns the verdict on a ratio of cell s against its target: met,
// missed by how much, or failed when the cell got errors.
func judge(s cellStats, ratio, target float64) string {
	switch {
	case s.errors > 0:
		return fmt.Sprintf("**failed**: %d errors (%s)", s.errors, s.firstError)
	case ratio <= target:
		return "met"
	}
	return fmt.Sprintf("**missed** by %.2f×", ratio-target)
}

// errorNote marks a figure whose cell got errors.
func errorNote(s cellStats) string {
	if s.errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (**%d errors**)", s.errors)
}
