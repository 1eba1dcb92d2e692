package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/proc"
	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
)

// The overload benchmark (`loadgen overload`) runs ratewarden as a busy or
// CPU-throttled host would: busy loops compete for the CPUs with several
// server replicas, a Redis Cluster and the callers, and the servers run
// with their default settings. It measures, for the server built from the
// module, for one built from an earlier commit, and for no-op services
// beside them (the ceiling of any service on the machine), a closed loop of
// callers for each of several deadlines (Envoy's 20ms, a caller that allows
// a second, one that sends none) and an open loop that offers a multiple of
// the capacity at a constant rate with the first deadline, and checks:
//
//   - with a deadline of a second or more, or none, every call is answered
//     with a decision, and every exactness limit, offered far more than its
//     L, admits exactly L;
//   - with a shorter deadline, the share of calls not answered before it
//     is at most the no-op services' in the same pass plus lateSlack, any
//     other answer is a decision or the failure mode's (UNAVAILABLE by
//     default), and no exactness limit admits more than L;
//   - in the open loop, the decisions answered within their deadline per
//     second (goodput) stay at or above a share of the capacity.

// overloadConfig is what `loadgen overload` was asked to do.
type overloadConfig struct {
	Root     string `json:"-"`
	Out      string `json:"-"`
	Baseline string `json:"baseline"`
	Callers  int    `json:"callers"`
	Replicas int    `json:"replicas"`
	Spinners int    `json:"spinners"`
	Conns    int    `json:"conns_per_replica"`
	Keys     int    `json:"keys"`
	// Deadlines are the deadlines of the closed loops, one loop each, 0
	// for a caller that sends none; the open loop runs with the first.
	Deadlines []time.Duration `json:"-"`
	Warmup    time.Duration   `json:"-"`
	Closed    time.Duration   `json:"-"`
	Open      time.Duration   `json:"-"`
	// Overload is the open loop's rate as a multiple of the capacity.
	Overload float64 `json:"overload"`
	// Goodput is the share of the capacity the open loop's goodput must keep.
	Goodput float64 `json:"goodput_target"`
	// ExactLimit is L of every exactness limit, ExactKeys how many there
	// are per algorithm and phase, ExactShare the share of calls for them.
	ExactLimit int     `json:"exact_limit"`
	ExactKeys  int     `json:"exact_keys"`
	ExactShare float64 `json:"exact_share"`
	// Passes is how many rounds each build runs, in the order passOrder
	// gives.
	Passes int `json:"passes"`
	// Ceiling runs the loops against no-op services too, as a build of
	// every pass (noopBuild).
	Ceiling bool `json:"ceiling"`
	// Metrics logs the servers' own counters after each round.
	Metrics bool `json:"-"`
	// Env holds RLS_* settings of the servers beyond the defaults, for
	// experiments; the benchmark proper sets none.
	Env map[string]string `json:"env,omitempty"`

	DeadlinesText []string `json:"deadlines"`
	WarmupText    string   `json:"warmup"`
	ClosedText    string   `json:"closed"`
	OpenText      string   `json:"open"`
}

// exactValuePrefix starts the values of exactness limits: a wildcard rule
// of ExactLimit per ten years, so that no window ends, no bucket refills and
// no log entry expires during a run (see overloadLimits).
const exactValuePrefix = "e."

// exactWindowDays is the window of the exactness limits: the longest a
// limit may have.
const exactWindowDays = 3650

func overloadCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("overload", "overload [flags]: run the overload benchmark on this machine, before and after, and write its table of "+pagePath+", and "+overloadDetailPath+" and "+overloadJSONPath, stderr)
	var cfg overloadConfig
	fs.StringVar(&cfg.Root, "root", "", rootUsage)
	fs.StringVar(&cfg.Out, "out", "", "directory to write "+pagePath+" and "+detailDir+"/ into (default: -root)")
	fs.StringVar(&cfg.Baseline, "baseline", "f6d78ac", "commit of -root's repository to build the 'before' server from; empty skips it")
	fs.IntVar(&cfg.Callers, "callers", 128, "callers of the closed loop, each with one call in flight")
	fs.IntVar(&cfg.Replicas, "replicas", 2, "server replicas, all on one Redis Cluster of 3 masters and 3 replicas")
	fs.IntVar(&cfg.Spinners, "spinners", 2, "busy loops competing for the CPUs (processes spinning on one CPU each)")
	fs.IntVar(&cfg.Conns, "conns", 2, "gRPC connections to each replica")
	fs.IntVar(&cfg.Keys, "keys", 1000, "live descriptor values per algorithm")
	deadlines := fs.String("deadlines", "20ms,1s,none", "comma list of the closed loops' deadlines (none: the caller sends no deadline); the open loop runs with the first")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "how long the closed loop sends before measuring")
	fs.DurationVar(&cfg.Closed, "closed", 10*time.Second, "how long the closed loop measures")
	fs.DurationVar(&cfg.Open, "open", 10*time.Second, "how long the open loop measures")
	fs.Float64Var(&cfg.Overload, "overload", 4, "the open loop's rate, as a multiple of the capacity the closed loop measured")
	fs.Float64Var(&cfg.Goodput, "goodput", 0.8, "share of the capacity the open loop's goodput must keep")
	fs.IntVar(&cfg.ExactLimit, "exact-limit", 20, "L of every exactness limit")
	fs.IntVar(&cfg.ExactKeys, "exact-keys", 4, "exactness limits per algorithm and phase")
	fs.Float64Var(&cfg.ExactShare, "exact-share", 0.1, "share of the calls for exactness limits")
	fs.IntVar(&cfg.Passes, "passes", 3, "rounds of each build, in the order after, before, no-op, no-op, before, after, … so that the machine's drift and the order fall on all")
	fs.BoolVar(&cfg.Ceiling, "ceiling", true, "also run the loops against no-op RateLimitServices in every pass: what the machine answers in time when answering costs nothing")
	fs.BoolVar(&cfg.Metrics, "metrics", false, "log the servers' "+metrics.Prefix+"* samples after each round")
	env := fs.String("env", "", "comma list of NAME=VALUE settings for the servers, beyond the defaults (for experiments)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Root, err = orServerRoot(cfg.Root); err != nil {
		return err
	}
	if cfg.Out == "" {
		cfg.Out = cfg.Root
	}
	if cfg.Deadlines, err = parseDeadlines(*deadlines); err != nil {
		return err
	}
	for kv := range strings.SplitSeq(*env, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "RLS_") {
			return fmt.Errorf("loadgen: overload: -env: %q is not RLS_NAME=VALUE", kv)
		}
		if cfg.Env == nil {
			cfg.Env = map[string]string{}
		}
		cfg.Env[k] = v
	}
	switch {
	case cfg.Callers < 1 || cfg.Replicas < 1 || cfg.Conns < 1 || cfg.Keys < 1 || cfg.Passes < 1 || cfg.Spinners < 0:
		return errors.New("loadgen: overload: -callers, -replicas, -conns, -keys and -passes must be positive, -spinners not negative")
	case cfg.Closed <= 0 || cfg.Open <= 0 || cfg.Warmup < 0:
		return errors.New("loadgen: overload: -closed and -open must be positive, -warmup not negative")
	case cfg.Overload <= 0 || cfg.Goodput <= 0 || cfg.ExactLimit < 1 || cfg.ExactKeys < 1 || !(cfg.ExactShare > 0 && cfg.ExactShare < 1):
		return errors.New("loadgen: overload: -overload, -goodput, -exact-limit and -exact-keys must be positive, -exact-share in (0, 1)")
	}
	for _, d := range cfg.Deadlines {
		cfg.DeadlinesText = append(cfg.DeadlinesText, deadlineText(d))
	}
	cfg.WarmupText, cfg.ClosedText, cfg.OpenText = cfg.Warmup.String(), cfg.Closed.String(), cfg.Open.String()

	report, err := runOverload(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	report.Command = reproduceCommand(fs, "overload")
	return writeOverloadFiles(cfg.Out, report, stderr)
}

// parseDeadlines parses the -deadlines flag: a comma list of durations,
// and none for a caller that sends no deadline (0).
func parseDeadlines(list string) ([]time.Duration, error) {
	var out []time.Duration
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "none" {
			out = append(out, 0)
			continue
		}
		d, err := time.ParseDuration(item)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("loadgen: overload: -deadlines: %q is neither a positive duration nor none", item)
		}
		out = append(out, d)
	}
	return out, nil
}

// deadlineText names a deadline of -deadlines: its duration, or none.
func deadlineText(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

// overloadReport is what one overload run measured: benchmarks/overload.json,
// from which its block of the page and its detail page are rendered.
type overloadReport struct {
	Date     string           `json:"date"`
	Took     string           `json:"took"`
	Command  string           `json:"command"`
	Config   overloadConfig   `json:"config"`
	Machine  machine          `json:"machine"`
	Variants []*overloadRound `json:"variants"`
}

// overloadRound is what one build did in one pass: a closed loop per
// deadline, and its open loop.
type overloadRound struct {
	// Name is "after" (the module), "before" (the baseline commit) or
	// noopName (the no-op services), and Pass counts the build's rounds
	// from 1.
	Name   string `json:"name"`
	Commit string `json:"commit,omitempty"`
	Pass   int    `json:"pass,omitempty"`
	// Closed holds the closed loops, in the order of the run's deadlines.
	Closed []*phaseResult `json:"closed"`
	Open   *phaseResult   `json:"open"`
	// Servers sums the ratewarden_* counters of the replicas, over both
	// loops, by sample name.
	Servers map[string]float64 `json:"servers,omitempty"`
}

// label names the round in logs and tables: its build, and its pass when
// the run made several.
func (v *overloadRound) label() string {
	if v.Pass == 0 {
		return v.Name
	}
	return fmt.Sprintf("%s, pass %d", v.Name, v.Pass)
}

// phaseResult is what one phase of calls measured.
type phaseResult struct {
	// Deadline is the calls' deadline (see deadlineText).
	Deadline string  `json:"deadline"`
	Seconds  float64 `json:"seconds"`
	// Rate is the open loop's target rate; 0 for the closed loop.
	Rate float64 `json:"target_rate,omitempty"`
	// Calls counts every call sent while measuring; Decisions the calls
	// answered OK or OVER_LIMIT by a decision.
	Calls     uint64 `json:"calls"`
	Decisions uint64 `json:"decisions"`
	Allowed   uint64 `json:"allowed"`
	Denied    uint64 `json:"denied"`
	// Codes counts the calls answered with a gRPC error, by code, and the
	// answers that were neither OK nor OVER_LIMIT.
	Codes      map[string]uint64 `json:"error_codes,omitempty"`
	FirstError string            `json:"first_error,omitempty"`
	// Goodput is decisions answered within their deadline per second.
	Goodput float64 `json:"goodput"`
	// Latencies of every answered call, and of the decisions, in µs.
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	Max       float64 `json:"max_us"`
	Decided50 float64 `json:"decisions_p50_us"`
	Decided99 float64 `json:"decisions_p99_us"`
	// Exact holds, per exactness limit of L ExactLimit, the OK answers it
	// gave and the calls it was offered, over the whole phase (warm-up
	// included).
	ExactLimit int          `json:"exact_limit"`
	Exact      []exactCount `json:"exact"`
	// Cores is the CPU each group of processes used while measuring, in
	// CPUs (CPU seconds per second): loadgen, server, redis, busy loops.
	Cores map[string]float64 `json:"cores,omitempty"`
}

// cpuSpinners names the busy loops in phaseResult.Cores.
const cpuSpinners = "busy loops"

// coresUsed returns the CPUs each group used between two readings seconds
// apart.
func coresUsed(before, after map[string]time.Duration, seconds float64) map[string]float64 {
	cores := map[string]float64{}
	for name, d := range after {
		cores[name] = (d - before[name]).Seconds() / seconds
	}
	return cores
}

// exactCount is one exactness limit's tally.
type exactCount struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
	Offered   uint64 `json:"offered"`
	Admitted  uint64 `json:"admitted"`
}

// runOverload builds the servers, starts Redis and the busy loops, and runs
// every round.
func runOverload(ctx context.Context, cfg overloadConfig, log io.Writer) (*overloadReport, error) {
	begin := time.Now()
	dir, err := os.MkdirTemp("", "loadgen-overload-")
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer os.RemoveAll(dir)
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}

	type build = overloadBuild
	builds := []build{{name: "after", bin: filepath.Join(dir, "server-after")}}
	fmt.Fprintf(log, "loadgen: overload: building %s\n", filepath.Join(cfg.Root, "cmd/server"))
	if err := goBuild(ctx, cfg.Root, builds[0].bin); err != nil {
		return nil, err
	}
	builds[0].commit = gitDescribe(ctx, cfg.Root)
	if cfg.Baseline != "" {
		fmt.Fprintf(log, "loadgen: overload: building commit %s\n", cfg.Baseline)
		b := build{name: "before", commit: cfg.Baseline, bin: filepath.Join(dir, "server-before")}
		if b.noAddrFile, err = buildCommit(ctx, cfg.Root, cfg.Baseline, filepath.Join(dir, "baseline"), b.bin); err != nil {
			return nil, err
		}
		builds = append(builds, b)
	}
	if cfg.Ceiling {
		builds = append(builds, build{name: noopName, bin: self, noop: true})
	}
	limitsPath := filepath.Join(dir, "limits.yaml")
	if err := writeOverloadLimits(limitsPath, cfg.ExactLimit); err != nil {
		return nil, err
	}

	fmt.Fprintln(log, "loadgen: overload: starting a Redis Cluster of 3 masters with a replica each")
	cluster, err := startBenchCluster(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer cluster.Close()

	report := &overloadReport{
		Date:    begin.UTC().Format("2006-01-02 15:04 MST"),
		Config:  cfg,
		Machine: describeMachine(ctx, cfg.Root, cluster.Nodes()[0]),
	}
	var spinners []*proc.Process
	defer func() {
		for _, p := range spinners {
			p.Stop()
		}
	}()
	for i := range cfg.Spinners {
		p, err := proc.Start(proc.Command{Name: fmt.Sprintf("busy loop %d", i), Bin: self, Args: []string{"spin"}, Dir: dir})
		if err != nil {
			return nil, err
		}
		spinners = append(spinners, p)
	}
	fmt.Fprintf(log, "loadgen: overload: %d busy loops running\n", len(spinners))

	var capacity float64
	for _, b := range passOrder(builds, cfg.Passes) {
		round := &overloadRound{Name: b.name, Commit: b.commit, Pass: b.pass}
		report.Variants = append(report.Variants, round)
		if err := flushMasters(ctx, cluster.Nodes()); err != nil {
			return nil, err
		}
		var servers []*proc.Server
		if b.noop {
			servers, err = startNoops(ctx, dir, self, cfg.Replicas)
		} else {
			servers, err = startReplicas(ctx, dir, b.bin, b.noAddrFile, limitsPath, cluster, cfg.Replicas, cfg.Env)
		}
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer func() {
				for _, s := range servers {
					s.Close()
				}
			}()
			addrs := make([]string, len(servers))
			for i, s := range servers {
				addrs[i] = s.Addrs[addrfile.GRPC]
			}
			conns, err := dialAll(addrs, cfg.Conns)
			if err != nil {
				return err
			}
			defer closeAll(conns)
			var procs []cpuProc
			if !b.noop {
				procs = redisProcs(cluster.Nodes())
			}
			for _, s := range servers {
				procs = append(procs, cpuProc{name: cpuServer, pid: s.Pid()})
			}
			for _, sp := range spinners {
				procs = append(procs, cpuProc{name: cpuSpinners, pid: sp.Pid()})
			}
			cpu := newCPUMeter(procs...)
			for i, deadline := range cfg.Deadlines {
				fmt.Fprintf(log, "loadgen: overload: %s: closed loop, %d callers on %d replicas, deadline %s\n", round.label(), cfg.Callers, len(servers), deadlineText(deadline))
				closed, err := closedLoop(ctx, cfg, deadline, conns, newRunID(), cpu)
				if err != nil {
					return err
				}
				round.Closed = append(round.Closed, closed)
				fmt.Fprintf(log, "loadgen: overload: %s: %s\n", round.label(), closed.summary())
				if capacity == 0 && i == 0 && !b.noop {
					// The newer build's first closed loop sets the open
					// loops' rate for every pass.
					capacity = float64(closed.Decisions) / closed.Seconds
				}
			}
			rate := cfg.Overload * capacity
			fmt.Fprintf(log, "loadgen: overload: %s: open loop at %.0f calls/s (%.1f× %.0f/s), deadline %s\n", round.label(), rate, cfg.Overload, capacity, deadlineText(cfg.Deadlines[0]))
			if round.Open, err = openLoop(ctx, cfg, cfg.Deadlines[0], conns, newRunID(), rate, cpu); err != nil {
				return err
			}
			fmt.Fprintf(log, "loadgen: overload: %s: %s\n", round.label(), round.Open.summary())
			if b.noop {
				return nil
			}
			round.Servers = map[string]float64{}
			for i, s := range servers {
				samples, err := serverSamples(s.Addrs[addrfile.HTTP])
				if err != nil {
					fmt.Fprintf(log, "loadgen: overload: %s replica %d: metrics: %v\n", b.name, i, err)
					continue
				}
				for k, v := range samples {
					round.Servers[k] += v
					if cfg.Metrics {
						fmt.Fprintf(log, "  %s replica %d: %s %v\n", b.name, i, k, v)
					}
				}
			}
			return nil
		}()
		if err != nil {
			return nil, fmt.Errorf("loadgen: overload: %s: %w", b.name, err)
		}
	}
	report.Took = time.Since(begin).Round(time.Second).String()
	report.Machine.LoadAfter = loadAverage()
	return report, nil
}

// noopName names the no-op services' rounds.
const noopName = "no-op"

// startNoops starts n no-op RateLimitServices (`loadgen noop`, separate
// processes as the servers are): what the machine answers in time when
// answering costs nothing but the gRPC call itself, the ceiling of any rate
// limit service's there.
func startNoops(ctx context.Context, dir, self string, n int) ([]*proc.Server, error) {
	var out []*proc.Server
	for i := range n {
		s, err := startServing(ctx, proc.ServerConfig{
			Name: fmt.Sprintf("no-op service %d", i), Bin: self, Dir: dir,
			Args: []string{"noop", "-addr", "127.0.0.1:0"},
		})
		if err != nil {
			for _, s := range out {
				s.Close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// overloadBuild is one server build of an overload run, or the no-op
// services (noop); noAddrFile marks a build from before RLS_ADDR_FILE,
// which cannot name the ports it is bound to (see
// proc.ServerConfig.NoAddrFile).
type overloadBuild struct {
	name, commit, bin string
	noAddrFile, noop  bool
	pass              int
}

// passOrder returns the rounds to run: each build passes times, the newer
// first, in the order A B C C B A A B C … with three builds, so that none
// gains from running first or last on a machine whose speed drifts.
func passOrder(builds []overloadBuild, passes int) []overloadBuild {
	var out []overloadBuild
	for p := range passes {
		for i := range builds {
			b := builds[i]
			if p%2 == 1 {
				b = builds[len(builds)-1-i]
			}
			b.pass = p + 1
			out = append(out, b)
		}
	}
	return out
}

// writeOverloadLimits writes the loadgen limits (see writeLimits) and, per
// algorithm, an exactness rule: values starting with exactValuePrefix get
// a limit of exactLimit per exactWindowDays days each.
func writeOverloadLimits(path string, exactLimit int) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("loadgen: %w", cerr)
		}
	}()
	if err := writeLimits(f, defaultDomain); err != nil {
		return err
	}
	for _, alg := range algorithms.Algorithms {
		if _, err := fmt.Fprintf(f, "  - key: %[1]s\n"+
			"    value: %[2]q\n"+
			"    rate_limit: {unit: day, unit_multiplier: %[3]d, requests_per_unit: %[4]d, algorithm: %[1]s}\n",
			alg, exactValuePrefix+"*", exactWindowDays, exactLimit); err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
	}
	return nil
}

// startReplicas starts n servers from bin on cluster with the default
// settings and extra, and waits until each serves.
func startReplicas(ctx context.Context, dir, bin string, noAddrFile bool, limits string, cluster *proc.Cluster, n int, extra map[string]string) ([]*proc.Server, error) {
	var out []*proc.Server
	for i := range n {
		env := map[string]string{
			"RLS_CONFIG_PATH": limits,
			"RLS_BACKEND":     "redis",
			"RLS_REDIS_MODE":  "cluster",
			"RLS_REDIS_ADDRS": strings.Join(cluster.Addrs(), ","),
			"RLS_LOG_LEVEL":   "warn",
		}
		maps.Copy(env, extra)
		s, err := startServing(ctx, proc.ServerConfig{Name: fmt.Sprintf("ratewarden replica %d", i), Bin: bin, Dir: dir, Env: env, NoAddrFile: noAddrFile})
		if err != nil {
			for _, s := range out {
				s.Close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// overloadTraffic draws the requests of a phase: a share of them for the
// phase's exactness limits, the others for live values; each for an
// algorithm drawn uniformly.
type overloadTraffic struct {
	runID string
	keys  int
	share float64
	limit int // L of the exactness limits
	// exact lists the exactness values, per algorithm.
	exact [][]string
}

func newOverloadTraffic(cfg overloadConfig, runID string) *overloadTraffic {
	t := &overloadTraffic{runID: runID, keys: cfg.Keys, share: cfg.ExactShare, limit: cfg.ExactLimit}
	for range algorithms.Algorithms {
		var vals []string
		for k := range cfg.ExactKeys {
			vals = append(vals, fmt.Sprintf("%s%s.%d", exactValuePrefix, runID, k))
		}
		t.exact = append(t.exact, vals)
	}
	return t
}

// draw returns the algorithm and value of a request, and the index of its
// exactness limit (-1 for a live value).
func (t *overloadTraffic) draw(rng *rand.Rand) (alg int, value string, exact int) {
	alg = rng.IntN(len(algorithms.Algorithms))
	if rng.Float64() < t.share {
		k := rng.IntN(len(t.exact[alg]))
		return alg, t.exact[alg][k], alg*len(t.exact[alg]) + k
	}
	return alg, fmt.Sprintf("%s%s.%d", liveValuePrefix, t.runID, rng.IntN(t.keys)), -1
}

// phaseTally counts the outcomes of a phase's calls. It is safe for
// concurrent use.
type phaseTally struct {
	measuring atomic.Bool
	deadline  time.Duration

	all, decided *Histogram
	calls        atomic.Uint64
	allowed      atomic.Uint64
	denied       atomic.Uint64
	intime       atomic.Uint64

	mu       sync.Mutex
	codes    map[string]uint64
	firstErr string
	// exactOK and exactOffered count every call for an exactness limit,
	// measured or not.
	exactOK      []atomic.Uint64
	exactOffered []atomic.Uint64
}

func newPhaseTally(deadline time.Duration, exact int) *phaseTally {
	return &phaseTally{
		deadline: deadline, all: NewHistogram(), decided: NewHistogram(), codes: map[string]uint64{},
		exactOK: make([]atomic.Uint64, exact), exactOffered: make([]atomic.Uint64, exact),
	}
}

// noDeadlineWatchdog is how long a call without a deadline is waited for
// before the load generator gives up on it (cancelled, an error): the server
// answers it within its RLS_BACKEND_TIMEOUT.
const noDeadlineWatchdog = 30 * time.Second

// call sends one request with the phase's deadline counted from at, or with
// none, and counts its outcome.
func (p *phaseTally) call(ctx context.Context, client rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest, exact int, at time.Time) {
	var callCtx context.Context
	var cancel context.CancelFunc
	if p.deadline > 0 {
		callCtx, cancel = context.WithDeadline(ctx, at.Add(p.deadline))
	} else {
		// Cancelled, not a deadline: gRPC sends no grpc-timeout.
		callCtx, cancel = context.WithCancel(ctx)
		stop := time.AfterFunc(noDeadlineWatchdog, cancel)
		defer stop.Stop()
	}
	resp, err := client.ShouldRateLimit(callCtx, req)
	cancel()
	elapsed := time.Since(at)
	if exact >= 0 {
		p.exactOffered[exact].Add(1)
		if err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			p.exactOK[exact].Add(1)
		}
	}
	if !p.measuring.Load() || ctx.Err() != nil {
		return
	}
	p.calls.Add(1)
	if err != nil {
		p.failed(status.Code(err).String(), err)
		if status.Code(err).String() != "DeadlineExceeded" {
			p.all.Record(elapsed)
		}
		return
	}
	p.all.Record(elapsed)
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		p.allowed.Add(1)
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		p.denied.Add(1)
	default:
		p.failed("answer "+resp.GetOverallCode().String(), nil)
		return
	}
	p.decided.Record(elapsed)
	if p.deadline == 0 || elapsed <= p.deadline {
		p.intime.Add(1)
	}
}

func (p *phaseTally) failed(code string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.codes[code]++
	if p.firstErr == "" && err != nil {
		p.firstErr = err.Error()
	}
}

// result returns what the tally counted over seconds of measuring.
func (p *phaseTally) result(seconds float64, traffic *overloadTraffic) *phaseResult {
	r := &phaseResult{
		Deadline: deadlineText(p.deadline),
		Seconds:  seconds, Calls: p.calls.Load(), Allowed: p.allowed.Load(), Denied: p.denied.Load(),
		P50: micros(p.all.Quantile(0.5)), P99: micros(p.all.Quantile(0.99)), Max: micros(p.all.Max()),
		Decided50: micros(p.decided.Quantile(0.5)), Decided99: micros(p.decided.Quantile(0.99)),
	}
	r.Decisions = r.Allowed + r.Denied
	r.Goodput = float64(p.intime.Load()) / seconds
	r.ExactLimit = traffic.limit
	p.mu.Lock()
	if len(p.codes) > 0 {
		r.Codes = p.codes
	}
	r.FirstError = p.firstErr
	p.mu.Unlock()
	for a, vals := range traffic.exact {
		for k, v := range vals {
			i := a*len(vals) + k
			r.Exact = append(r.Exact, exactCount{
				Algorithm: algorithms.Algorithms[a].String(), Value: v,
				Offered: p.exactOffered[i].Load(), Admitted: p.exactOK[i].Load(),
			})
		}
	}
	return r
}

// overloadRequest returns a request of one descriptor.
func overloadRequest(alg int, value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: defaultDomain,
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: algorithms.Algorithms[alg].String(), Value: value},
		}}},
	}
}

// closedLoop runs cfg.Callers callers, each sending its next call with
// deadline (0: none) as soon as the last is answered, and measures for
// cfg.Closed after cfg.Warmup.
func closedLoop(ctx context.Context, cfg overloadConfig, deadline time.Duration, conns []*grpc.ClientConn, runID string, cpu *cpuMeter) (*phaseResult, error) {
	traffic := newOverloadTraffic(cfg, runID)
	tally := newPhaseTally(deadline, len(algorithms.Algorithms)*cfg.ExactKeys)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range cfg.Callers {
		client := rlsv3.NewRateLimitServiceClient(conns[i%len(conns)])
		rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(i)))
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				alg, value, exact := traffic.draw(rng)
				tally.call(ctx, client, overloadRequest(alg, value), exact, time.Now())
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	if !sleep(ctx, cfg.Warmup) {
		return nil, ctx.Err()
	}
	cpuBefore, err := cpu.read()
	if err != nil {
		return nil, err
	}
	tally.measuring.Store(true)
	start := time.Now()
	ok := sleep(ctx, cfg.Closed)
	tally.measuring.Store(false)
	seconds := time.Since(start).Seconds()
	cpuAfter, err := cpu.read()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ctx.Err()
	}
	stop.Store(true)
	wg.Wait()
	r := tally.result(seconds, traffic)
	r.Cores = coresUsed(cpuBefore, cpuAfter, seconds)
	return r, nil
}

// openLoop sends calls at a constant rate, whatever becomes of them, for
// cfg.Open: each call is due at its slot, and its deadline (0: none) runs
// from then.
func openLoop(ctx context.Context, cfg overloadConfig, deadline time.Duration, conns []*grpc.ClientConn, runID string, rate float64, cpu *cpuMeter) (*phaseResult, error) {
	traffic := newOverloadTraffic(cfg, runID)
	tally := newPhaseTally(deadline, len(algorithms.Algorithms)*cfg.ExactKeys)
	clients := make([]rlsv3.RateLimitServiceClient, len(conns))
	for i, c := range conns {
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
	}
	// Dispatchers, one per CPU, each sending its share of the slots.
	dispatchers := runtime.GOMAXPROCS(0)
	interval := time.Duration(float64(time.Second) * float64(dispatchers) / rate)
	var wg sync.WaitGroup
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(cfg.Open)
	cpuBefore, err := cpu.read()
	if err != nil {
		return nil, err
	}
	readAt := time.Now()
	var cpuAfter map[string]time.Duration
	var cpuErr error
	var cpuSeconds float64
	wg.Go(func() {
		sleep(ctx, time.Until(end))
		cpuAfter, cpuErr = cpu.read()
		cpuSeconds = time.Since(readAt).Seconds()
	})
	tally.measuring.Store(true)
	for d := range dispatchers {
		rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(d)))
		wg.Go(func() {
			next := start.Add(time.Duration(d) * interval / time.Duration(dispatchers))
			for n := 0; next.Before(end) && ctx.Err() == nil; n++ {
				if wait := time.Until(next); wait > 0 {
					time.Sleep(wait)
				}
				alg, value, exact := traffic.draw(rng)
				client := clients[(n*dispatchers+d)%len(clients)]
				at := next
				wg.Go(func() { tally.call(ctx, client, overloadRequest(alg, value), exact, at) })
				next = next.Add(interval)
			}
		})
	}
	wg.Wait()
	tally.measuring.Store(false)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cpuErr != nil {
		return nil, cpuErr
	}
	r := tally.result(cfg.Open.Seconds(), traffic)
	r.Rate = rate
	r.Cores = coresUsed(cpuBefore, cpuAfter, cpuSeconds)
	return r, nil
}

// summary is a phase's progress line.
func (r *phaseResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d calls, %d decisions (%.0f/s), goodput %.0f/s, p50 %s p99 %s max %s", r.Calls, r.Decisions,
		float64(r.Decisions)/r.Seconds, r.Goodput, fmtMicros(r.P50), fmtMicros(r.P99), fmtMicros(r.Max))
	for code, n := range r.Codes {
		fmt.Fprintf(&b, ", %s %d", code, n)
	}
	fmt.Fprintf(&b, ", %d of %d limits admitted exactly L, %d more", r.exactLimits(), len(r.Exact), r.aboveL())
	return b.String()
}

// exactLimits returns how many exactness limits admitted exactly L.
func (r *phaseResult) exactLimits() int {
	n := 0
	for _, e := range r.Exact {
		if e.Admitted == uint64(r.ExactLimit) {
			n++
		}
	}
	return n
}

// serverSamples returns the ratewarden_* samples of the server whose HTTP
// address is addr, but the per-rule ones and histogram buckets.
func serverSamples(addr string) (map[string]float64, error) {
	all, err := promtext.Scrape("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	samples := map[string]float64{}
	for series, v := range all {
		if strings.HasPrefix(series, metrics.Prefix) && !strings.HasPrefix(series, metrics.RulePrefix) && !strings.Contains(series, "_bucket{") {
			samples[series] = v
		}
	}
	return samples, nil
}

// spinCommand spins on one CPU until it is stopped: a busy loop that
// competes with the benchmark for the machine.
func spinCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("spin", "spin: keep one CPU busy until stopped", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	runtime.GOMAXPROCS(1)
	x := uint64(0)
	for ctx.Err() == nil {
		for i := range uint64(1 << 20) {
			x += i * i
		}
	}
	if x == 1 {
		fmt.Fprintln(stderr, x) // keeps the loop from being optimised away
	}
	return nil
}
