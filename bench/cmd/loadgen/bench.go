package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// The backends a bench cell runs against.
const (
	backendNoop       = "noop"
	backendMemory     = "memory"
	backendStandalone = "standalone"
	backendCluster    = "cluster"
	// backendPeer is envoyproxy/ratelimit's own server on the standalone
	// Redis (see startPeer).
	backendPeer = "envoyproxy-ratelimit"
)

// The groups of bench cells.
const (
	groupBaseline = "baseline" // the no-op server
	groupEvalsha  = "evalsha"  // raw EVALSHA on Redis
	groupMatrix   = "matrix"   // algorithm × backend × keys at the fixed concurrency
	groupSweep    = "sweep"    // one cell at every concurrency of the sweep
	groupHot      = "hot"      // one hot value, hotOver of the calls over the limit
	groupProfile  = "profile"  // a target scenario again, under the CPU profiler
)

// The bench's fixed choices.
const (
	// sweepAlgorithm and sweepKeys are the cell of the concurrency sweep,
	// which is also target scenario (ii).
	sweepAlgorithm = "sliding_window_log"
	sweepKeys      = 1000
	// hotOver is the over-limit share of target scenario (iii).
	hotOver = 0.9
	// coalescedPipeline is the pipeline depth of the EVALSHA baseline that
	// shows what batching calls could reach.
	coalescedPipeline = 16
)

// benchConfig is what `loadgen bench` was asked to do.
type benchConfig struct {
	Root        string        `json:"-"`
	Out         string        `json:"-"`
	Quick       bool          `json:"quick"`
	Duration    time.Duration `json:"-"`
	Warmup      time.Duration `json:"-"`
	Concurrency int           `json:"concurrency"`
	Sweep       []int         `json:"sweep"`
	Keys        []int         `json:"keys"`
	Conns       int           `json:"conns"`
	Replicas    int           `json:"cluster_replicas"`
	Profile     bool          `json:"profile"`
	// Repeat is how often each cell runs; the report keeps the run with the
	// most decisions per second.
	Repeat         int           `json:"repeat"`
	BackendTimeout time.Duration `json:"-"`

	// The durations, as text, for the report.
	DurationText       string `json:"duration"`
	WarmupText         string `json:"warmup"`
	BackendTimeoutText string `json:"backend_timeout"`
}

func benchCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("bench", "bench [flags]: run the benchmark matrix on this machine and write its table of "+pagePath+", and "+reportDetailPath+", "+reportSVGPath+" and "+reportJSONPath, stderr)
	var cfg benchConfig
	fs.StringVar(&cfg.Root, "root", "", rootUsage)
	fs.StringVar(&cfg.Out, "out", "", "directory to write "+pagePath+" and "+detailDir+"/ into (default: -root; with -quick a new temporary directory)")
	fs.BoolVar(&cfg.Quick, "quick", false, "a smoke run of about 20 seconds: a few cells, 1s each, no cluster, no profiles")
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Second, "how long each cell measures")
	fs.DurationVar(&cfg.Warmup, "warmup", 500*time.Millisecond, "how long each cell sends before measuring")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "callers of the matrix and the target scenarios")
	sweep := fs.String("sweep", "1,4,16,64,256", "concurrencies of the sweep")
	keys := fs.String("keys", "1,1000,100000", "key counts of the matrix")
	fs.IntVar(&cfg.Conns, "conns", 2, "gRPC connections per run")
	fs.IntVar(&cfg.Replicas, "cluster-replicas", 0, "replicas per master in the Redis Cluster")
	fs.IntVar(&cfg.Repeat, "repeat", 1, "runs of each cell; the report keeps the fastest, so that a neighbour's burst of CPU does not stand for the cell")
	fs.BoolVar(&cfg.Profile, "profile", true, "profile the server in the target scenarios (not with -quick)")
	fs.DurationVar(&cfg.BackendTimeout, "backend-timeout", time.Second, "RLS_BACKEND_TIMEOUT of the servers: long, so that a slow answer is measured, not turned into an error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if cfg.Root, err = orServerRoot(cfg.Root); err != nil {
		return err
	}
	if cfg.Sweep, err = parseInts(*sweep); err != nil {
		return fmt.Errorf("loadgen: -sweep: %w", err)
	}
	if cfg.Keys, err = parseInts(*keys); err != nil {
		return fmt.Errorf("loadgen: -keys: %w", err)
	}
	if cfg.Quick {
		if !set["duration"] {
			cfg.Duration = time.Second
		}
		if !set["warmup"] {
			cfg.Warmup = 250 * time.Millisecond
		}
		if !set["profile"] {
			cfg.Profile = false
		}
		if !set["out"] {
			if cfg.Out, err = os.MkdirTemp("", "loadgen-bench-"); err != nil {
				return fmt.Errorf("loadgen: %w", err)
			}
		}
	}
	if cfg.Out == "" {
		cfg.Out = cfg.Root
	}
	if cfg.Concurrency < 1 || cfg.Conns < 1 || cfg.Repeat < 1 || cfg.Replicas < 0 || cfg.Duration <= 0 || cfg.Warmup < 0 {
		return fmt.Errorf("loadgen: bench: -concurrency, -conns, -repeat and -duration must be positive, -cluster-replicas and -warmup not negative")
	}
	cfg.DurationText, cfg.WarmupText, cfg.BackendTimeoutText = cfg.Duration.String(), cfg.Warmup.String(), cfg.BackendTimeout.String()

	report, err := runBench(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	report.Command = reproduceCommand(fs, "bench")
	return writeReportFiles(cfg.Out, report, stderr)
}

// reproduceCommand returns the command that measures what this run of the
// loadgen command name did, run from the repository's root: the flags that
// were set, without -root and -out, which name where files are.
func reproduceCommand(fs *flag.FlagSet, name string) string {
	cmd := []string{"go", "-C", "bench", "run", "./cmd/loadgen", name}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "root" || f.Name == "out" {
			return
		}
		if v := f.Value.String(); v == "true" {
			cmd = append(cmd, "-"+f.Name)
		} else {
			cmd = append(cmd, "-"+f.Name+"="+v)
		}
	})
	return strings.Join(cmd, " ")
}

// parseInts parses a comma list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// bench holds what a bench run has started.
type bench struct {
	cfg        benchConfig
	dir        string // temporary: binaries, limits, Redis directories, profiles
	serverBin  string
	self       string // this program, for the no-op and profiled servers
	limitsPath string
	// peerBin and peerRoot are envoyproxy/ratelimit's server and its
	// runtime directory, for backendPeer cells.
	peerBin, peerRoot string
	// baseline is the before build, for Baseline cells.
	baseline   *baselineServer
	standalone *proc.Redis
	cluster    *proc.Cluster
	log        io.Writer
}

// runBench runs every cell of the matrix and returns the report.
func runBench(ctx context.Context, cfg benchConfig, log io.Writer) (*benchReport, error) {
	begin := time.Now()
	dir, err := os.MkdirTemp("", "loadgen-bench-run-")
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer os.RemoveAll(dir)
	b := &bench{cfg: cfg, dir: dir, log: log}
	defer b.stop()
	if err := b.setUp(ctx); err != nil {
		return nil, err
	}
	report := &benchReport{
		Date:    begin.UTC().Format("2006-01-02 15:04 MST"),
		Config:  cfg,
		Machine: describeMachine(ctx, cfg.Root, b.standalone),
	}
	cells := b.plan()
	fmt.Fprintf(log, "loadgen: bench: %d cells of %s (+%s warm-up)\n", len(cells), cfg.Duration, cfg.Warmup)
	for i, c := range cells {
		r, prof, err := b.runBest(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("loadgen: bench cell %s: %w", c.name(), err)
		}
		report.Results = append(report.Results, r)
		if prof != nil {
			report.Profiles = append(report.Profiles, *prof)
		}
		fmt.Fprintf(log, "[%2d/%d] %-60s %9.0f/s  p99 %-8s errors %d%s%s\n", i+1, len(cells), c.name(), r.Rate,
			fmtMicros(r.P99), r.Errors, redisSummary(r), repeatSummary(r))
	}
	report.Took = time.Since(begin).Round(time.Second).String()
	report.Machine.LoadAfter = loadAverage()
	return report, nil
}

// runBest runs c cfg.Repeat times (a profiled cell once) and returns the
// run with the most decisions per second, with every run's rate.
func (b *bench) runBest(ctx context.Context, c cell) (*result, *profileResult, error) {
	runs := b.cfg.Repeat
	if c.Group == groupProfile {
		runs = 1
	}
	var best *result
	var bestProf *profileResult
	var rates []float64
	for range runs {
		r, prof, err := b.runCell(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		rates = append(rates, r.Rate)
		if best == nil || r.Rate > best.Rate {
			best, bestProf = r, prof
		}
	}
	if runs > 1 {
		best.RepeatRates = rates
	}
	return best, bestProf, nil
}

// repeatSummary is the spread of a repeated cell's progress line.
func repeatSummary(r *result) string {
	if len(r.RepeatRates) < 2 {
		return ""
	}
	return fmt.Sprintf("  (worst of %d: %.0f/s)", len(r.RepeatRates), slices.Min(r.RepeatRates))
}

// redisSummary is the Redis part of a cell's progress line.
func redisSummary(r *result) string {
	if r.Redis == nil {
		return ""
	}
	return fmt.Sprintf("  redis %.2f cmds/decision", r.Redis.PerDecision)
}

// setUp builds the server, writes the limits and starts Redis.
func (b *bench) setUp(ctx context.Context) error {
	var err error
	if b.self, err = os.Executable(); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	b.serverBin = filepath.Join(b.dir, "ratewarden-server")
	fmt.Fprintf(b.log, "loadgen: bench: building %s\n", filepath.Join(b.cfg.Root, "cmd/server"))
	if err := goBuild(ctx, b.cfg.Root, b.serverBin); err != nil {
		return err
	}
	b.limitsPath = filepath.Join(b.dir, "limits.yaml")
	f, err := os.Create(b.limitsPath)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := writeLimits(f, defaultDomain); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	fmt.Fprintln(b.log, "loadgen: bench: starting redis-server")
	if b.standalone, err = proc.StartRedis(proc.RedisConfig{}); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if !b.cfg.Quick {
		fmt.Fprintf(b.log, "loadgen: bench: starting a Redis Cluster of %d masters with %d replicas each\n", clusterMasters, b.cfg.Replicas)
		if b.cluster, err = startBenchCluster(ctx, b.cfg.Replicas); err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
	}
	return nil
}

// stop stops every Redis the bench started.
func (b *bench) stop() {
	if b.standalone != nil {
		b.standalone.Close()
	}
	if b.cluster != nil {
		b.cluster.Close()
	}
}

// cell is one measurement of the bench.
type cell struct {
	Group       string
	Backend     string
	Algorithm   string
	Keys        int
	Concurrency int
	Over        float64
	Script      string // evalsha cells
	Pipeline    int    // evalsha cells
	// Replicas is how many servers the callers spread over, all on the
	// cell's backend (on memory, each its own); 0 means one.
	Replicas int
	// PerSecond sends values of the hot rule (hotValuePrefix), a limit per
	// second far above the load, instead of the live values' per day.
	PerSecond bool
	// NoLeases runs ratewarden's servers without leases (RLS_LEASES=false).
	NoLeases bool
	// Baseline runs the server built from an earlier commit (the before
	// build of `loadgen rediscost -baseline`) instead of the module's.
	Baseline bool
}

// valuePrefix returns the prefix of the cell's live values.
func (c cell) valuePrefix() string {
	if c.PerSecond {
		return hotValuePrefix
	}
	return liveValuePrefix
}

// name identifies the cell in progress lines and the results.
func (c cell) name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s", c.Group, c.Backend)
	if c.Script != "" {
		fmt.Fprintf(&b, "/%s/pipeline=%d", c.Script, c.Pipeline)
	} else if c.Backend != backendNoop {
		fmt.Fprintf(&b, "/%s", c.Algorithm)
	}
	fmt.Fprintf(&b, "/keys=%d/c=%d", c.Keys, c.Concurrency)
	if c.Over > 0 {
		fmt.Fprintf(&b, "/over=%.0f%%", 100*c.Over)
	}
	if c.Replicas > 1 {
		fmt.Fprintf(&b, "/replicas=%d", c.Replicas)
	}
	if c.PerSecond {
		b.WriteString("/per-second")
	}
	if c.NoLeases {
		b.WriteString("/leases=off")
	}
	if c.Baseline {
		b.WriteString("/before")
	}
	return b.String()
}

// plan lists the cells of the run in the order they run. The no-op
// baseline at the fixed concurrency runs first and last, so the report can
// show how much the machine drifted in between.
func (b *bench) plan() []cell {
	c64 := b.cfg.Concurrency
	redisBackends := []string{backendStandalone}
	backends := []string{backendMemory, backendStandalone}
	if b.cluster != nil {
		redisBackends = append(redisBackends, backendCluster)
		backends = append(backends, backendCluster)
	}
	noop := func(c int) cell {
		return cell{Group: groupBaseline, Backend: backendNoop, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c}
	}
	evalsha := func(backend, script string, pipeline, c int) cell {
		return cell{Group: groupEvalsha, Backend: backend, Keys: sweepKeys, Concurrency: c, Script: script, Pipeline: pipeline}
	}
	var cells []cell
	if b.cfg.Quick {
		return []cell{
			noop(c64),
			evalsha(backendStandalone, scriptTrivial, 1, c64),
			evalsha(backendStandalone, scriptFixedWindow, 1, c64),
			{Group: groupMatrix, Backend: backendMemory, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c64},
			{Group: groupMatrix, Backend: backendStandalone, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c64},
			{Group: groupHot, Backend: backendStandalone, Algorithm: sweepAlgorithm, Keys: 1, Concurrency: c64, Over: hotOver},
		}
	}
	cells = append(cells, noop(c64))
	for _, backend := range redisBackends {
		cells = append(cells,
			evalsha(backend, scriptTrivial, 1, c64),
			evalsha(backend, scriptFixedWindow, 1, c64),
			evalsha(backend, scriptFixedWindow, coalescedPipeline, c64))
	}
	for _, backend := range backends {
		for _, alg := range algorithms.Algorithms {
			for _, k := range b.cfg.Keys {
				cells = append(cells, cell{Group: groupMatrix, Backend: backend, Algorithm: alg.String(), Keys: k, Concurrency: c64})
			}
		}
	}
	for _, c := range b.cfg.Sweep {
		if c == c64 {
			continue // the matrix and the baselines measured it
		}
		cells = append(cells, noop(c), evalsha(backendStandalone, scriptFixedWindow, 1, c))
		for _, backend := range backends {
			cells = append(cells, cell{Group: groupSweep, Backend: backend, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c})
		}
	}
	hot := func(backend, alg string) cell {
		return cell{Group: groupHot, Backend: backend, Algorithm: alg, Keys: 1, Concurrency: c64, Over: hotOver}
	}
	for _, alg := range algorithms.Algorithms {
		cells = append(cells, hot(backendStandalone, alg.String()))
	}
	cells = append(cells, hot(backendMemory, sweepAlgorithm))
	if b.cluster != nil {
		cells = append(cells, hot(backendCluster, sweepAlgorithm))
	}
	if b.cfg.Profile {
		for _, c := range []cell{
			{Backend: backendMemory, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c64},
			{Backend: backendStandalone, Algorithm: sweepAlgorithm, Keys: sweepKeys, Concurrency: c64},
			hot(backendStandalone, sweepAlgorithm),
		} {
			c.Group = groupProfile
			cells = append(cells, c)
		}
	}
	return append(cells, noop(c64))
}

// runCell measures one cell against a fresh target: new server processes
// (and, for Redis, an emptied Redis), so no cell inherits another's state.
func (b *bench) runCell(ctx context.Context, c cell) (*result, *profileResult, error) {
	if c.Script != "" {
		return b.runEvalshaCell(ctx, c)
	}
	t, err := b.startTarget(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	defer t.close()

	p := loadParams{
		Addrs: t.addrs(addrfile.GRPC), Concurrency: c.Concurrency, Conns: b.cfg.Conns,
		Keys: c.Keys, Prefix: c.valuePrefix(), Dist: distUniform, Over: c.Over,
		Domain: defaultDomain, Key: c.Algorithm, RunID: newRunID(), Seed: rand.Uint64(),
		phases: phases{Warmup: b.cfg.Warmup, Duration: b.cfg.Duration},
	}
	if len(t.redis) > 0 {
		p.Stats = newStatsReader(proc.Addrs(t.redis))
		defer p.Stats.Close()
	}
	if t.leases {
		p.Leases = newLeaseReader(t.addrs(addrfile.HTTP))
	}
	p.CPU = t.cpuMeter()
	r, err := runLoad(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("%w\n%s", err, t.tail())
	}
	r.Name, r.Group, r.Backend = c.name(), c.Group, c.Backend
	if t.prof != nil {
		t.servers[0].Stop()
		if err := t.prof.read(ctx, b.cfg.Root); err != nil {
			return nil, nil, err
		}
	}
	return r, t.prof, nil
}

// target is what a cell sends to: its servers, the Redis servers behind
// them, and the profile its server writes, for a profiled cell.
type target struct {
	servers []*proc.Server
	redis   []*proc.Redis
	prof    *profileResult
	// leases reports that the servers are ratewarden's on Redis, which
	// count what their leases do.
	leases bool
}

// startTarget empties the Redis of c's backend and starts c's servers on
// it: c.Replicas of them (at least one), each with the cell's settings.
func (b *bench) startTarget(ctx context.Context, c cell) (*target, error) {
	t := &target{}
	env := map[string]string{
		"RLS_CONFIG_PATH":     b.limitsPath,
		"RLS_BACKEND":         "memory",
		"RLS_BACKEND_TIMEOUT": b.cfg.BackendTimeout.String(),
		"RLS_LOG_LEVEL":       "warn",
	}
	if c.NoLeases {
		env["RLS_LEASES"] = "false"
	}
	switch c.Backend {
	case backendStandalone, backendPeer:
		t.redis = []*proc.Redis{b.standalone}
		env["RLS_BACKEND"], env["RLS_REDIS_MODE"], env["RLS_REDIS_ADDRS"] = "redis", "standalone", b.standalone.Addr()
	case backendCluster:
		t.redis = b.cluster.Nodes()
		env["RLS_BACKEND"], env["RLS_REDIS_MODE"], env["RLS_REDIS_ADDRS"] = "redis", "cluster", strings.Join(b.cluster.Addrs(), ",")
	}
	// The before build may be older than the lease counters.
	t.leases = len(t.redis) > 0 && c.Backend != backendPeer && !c.NoLeases && !c.Baseline
	if err := flushMasters(ctx, t.redis); err != nil {
		return nil, err
	}
	cfg := proc.ServerConfig{Name: "ratewarden server", Bin: b.serverBin, Dir: b.dir, Env: env}
	switch {
	case c.Baseline:
		if b.baseline == nil {
			return nil, fmt.Errorf("loadgen: cell %s: no before build (-baseline)", c.name())
		}
		cfg.Name, cfg.Bin, cfg.NoAddrFile, cfg.Env = "ratewarden server (before)", b.baseline.bin, b.baseline.noAddrFile, b.baseline.env(env)
	case c.Backend == backendNoop:
		cfg = proc.ServerConfig{Name: "no-op server", Bin: b.self, Args: []string{"noop", "-addr", "127.0.0.1:0"}, Dir: b.dir}
	case c.Group == groupProfile:
		t.prof = &profileResult{Name: c.name(),
			cpuPath:    filepath.Join(b.dir, fmt.Sprintf("cpu-%d.pprof", rand.Uint32())),
			allocsPath: filepath.Join(b.dir, fmt.Sprintf("allocs-%d.pprof", rand.Uint32()))}
		cfg.Name, cfg.Bin = "profiled server", b.self
		cfg.Args = []string{"serve", "-cpuprofile", t.prof.cpuPath, "-allocprofile", t.prof.allocsPath}
	}
	for i := range max(c.Replicas, 1) {
		var srv *proc.Server
		var err error
		if c.Backend == backendPeer {
			srv, err = startPeer(ctx, b.peerBin, b.peerRoot, b.standalone.Addr())
		} else {
			replica := cfg
			if c.Replicas > 1 {
				replica.Name = fmt.Sprintf("%s %d", cfg.Name, i)
			}
			srv, err = startServing(ctx, replica)
		}
		if err != nil {
			t.close()
			return nil, err
		}
		t.servers = append(t.servers, srv)
	}
	return t, nil
}

// addrs returns the servers' addresses of the named listener.
func (t *target) addrs(listener string) []string {
	var out []string
	for _, s := range t.servers {
		out = append(out, s.Addrs[listener])
	}
	return out
}

// cpuMeter returns a meter of the load generator, the Redis servers and
// the servers, these summed as one.
func (t *target) cpuMeter() *cpuMeter {
	procs := redisProcs(t.redis)
	for _, s := range t.servers {
		procs = append(procs, cpuProc{name: cpuServer, pid: s.Pid()})
	}
	return newCPUMeter(procs...)
}

// tail returns the last lines the servers wrote.
func (t *target) tail() string {
	var parts []string
	for _, s := range t.servers {
		parts = append(parts, s.Tail(20))
	}
	return strings.Join(parts, "\n")
}

// close stops the servers.
func (t *target) close() {
	for _, s := range t.servers {
		s.Close()
	}
}

// runEvalshaCell measures raw EVALSHA calls on the cell's Redis.
func (b *bench) runEvalshaCell(ctx context.Context, c cell) (*result, *profileResult, error) {
	p := evalshaParams{
		Script: c.Script, Concurrency: c.Concurrency, Pipeline: c.Pipeline, Keys: c.Keys,
		RunID: newRunID(), Seed: rand.Uint64(),
		phases: phases{Warmup: b.cfg.Warmup, Duration: b.cfg.Duration},
	}
	var servers []*proc.Redis
	switch c.Backend {
	case backendStandalone:
		servers, p.Mode = []*proc.Redis{b.standalone}, redisx.ModeStandalone
	case backendCluster:
		servers, p.Mode = b.cluster.Nodes(), redisx.ModeCluster
	default:
		return nil, nil, fmt.Errorf("loadgen: evalsha on backend %q", c.Backend)
	}
	if err := flushMasters(ctx, servers); err != nil {
		return nil, nil, err
	}
	p.Addrs = proc.Addrs(servers)
	p.CPU = newCPUMeter(redisProcs(servers)...)
	p.Stats = newStatsReader(p.Addrs)
	defer p.Stats.Close()
	r, err := runEvalsha(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	r.Name, r.Group, r.Backend = c.name(), c.Group, c.Backend
	return r, nil, nil
}

// profileResult is where a profiled cell's server spent its time.
type profileResult struct {
	Name string `json:"name"`
	// CPU and Allocs are the top lines of `go tool pprof -top`.
	CPU    string `json:"cpu_top"`
	Allocs string `json:"allocs_top"`

	cpuPath, allocsPath string
}

// profileLines is how many lines of pprof's top the report keeps.
const profileLines = 32

// read runs go tool pprof on the profiles the server wrote.
func (p *profileResult) read(ctx context.Context, root string) error {
	var err error
	if p.CPU, err = pprofTop(ctx, root, p.cpuPath, []string{"-flat", "-cum"}); err != nil {
		return err
	}
	p.Allocs, err = pprofTop(ctx, root, p.allocsPath, []string{"-flat"}, "-sample_index=alloc_space")
	return err
}

// pprofTop returns the head of `go tool pprof -top` of a profile, once for
// each of sorts (-flat, -cum).
func pprofTop(ctx context.Context, root, path string, sorts []string, extra ...string) (string, error) {
	var parts []string
	for _, sort := range sorts {
		args := append([]string{"tool", "pprof", "-top", sort, "-nodecount=" + strconv.Itoa(profileLines)}, extra...)
		cmd := exec.CommandContext(ctx, "go", append(args, path)...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("loadgen: go tool pprof %s: %w", path, err)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		// Drop the lines naming the file and the build.
		lines = slices.DeleteFunc(lines, func(l string) bool {
			return strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:")
		})
		parts = append(parts, strings.Join(lines, "\n"))
	}
	return strings.Join(parts, "\n\n"), nil
}
