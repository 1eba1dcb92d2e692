package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/server"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// These tests check that the load generator works end to end against real
// servers. They never assert speed: only that decisions were made, none
// failed, and the figures are consistent.

// startServer runs ratewarden's server in-process with the loadgen limits
// and the given RLS_* variables, and returns its gRPC address. It stops
// when the test ends.
func startServer(t *testing.T, env map[string]string) string {
	t.Helper()
	grpcAddr, _ := startServerAt(t, env)
	return grpcAddr
}

// startServerAt is startServer, and returns the HTTP address too.
func startServerAt(t *testing.T, env map[string]string) (grpcAddr, httpAddr string) {
	t.Helper()
	limits := filepath.Join(t.TempDir(), "limits.yaml")
	var b bytes.Buffer
	require.NoError(t, writeLimits(&b, defaultDomain))
	require.NoError(t, os.WriteFile(limits, b.Bytes(), 0o644))
	vars := map[string]string{
		"RLS_GRPC_ADDR":       "127.0.0.1:0",
		"RLS_HTTP_ADDR":       "127.0.0.1:0",
		"RLS_CONFIG_PATH":     limits,
		"RLS_BACKEND_TIMEOUT": "10s", // the race detector is slow; errors are not under test
	}
	for k, v := range env {
		vars[k] = v
	}
	set, err := settings.Load(func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return srv.GRPCAddr().String(), srv.HTTPAddr().String()
}

// runJSON runs loadgen with args and -json and returns the result it
// printed.
func runJSON(t *testing.T, args ...string) *result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append(args, "-json"), &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	var r result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), "stdout: %s", stdout.String())
	return &r
}

// checkConsistent checks what every successful run must show.
func checkConsistent(t *testing.T, r *result) {
	t.Helper()
	assert.Positive(t, r.Decisions, "decisions were made")
	assert.Zero(t, r.Errors, "no errors (first: %s)", r.FirstError)
	assert.Equal(t, r.Decisions, r.Allowed+r.Denied)
	assert.Positive(t, r.Seconds)
	assert.InEpsilon(t, float64(r.Decisions)/r.Seconds, r.Rate, 1e-9)
	assert.Positive(t, r.P50)
	assert.LessOrEqual(t, r.P50, r.P99)
	assert.LessOrEqual(t, r.P99, r.P999)
	assert.LessOrEqual(t, r.P999, r.Max)
}

var smokeArgs = []string{"-duration", "2s", "-warmup", "200ms", "-concurrency", "8", "-conns", "2"}

func TestSmokeMemoryBackend(t *testing.T) {
	addr := startServer(t, map[string]string{"RLS_BACKEND": "memory"})
	r := runJSON(t, append([]string{"-addr", addr, "-descriptor", "token_bucket", "-keys", "100"}, smokeArgs...)...)
	checkConsistent(t, r)
	assert.Equal(t, r.Decisions, r.Allowed, "live values are never over their limit")
	assert.Nil(t, r.Redis)
	assert.Equal(t, modeRLS, r.Mode)
	assert.Equal(t, "token_bucket", r.Key)
}

func TestSmokeRedisBackend(t *testing.T) {
	redisSrv := redistest.Standalone(t)
	addr := startServer(t, map[string]string{
		"RLS_BACKEND":     "redis",
		"RLS_REDIS_MODE":  "standalone",
		"RLS_REDIS_ADDRS": redisSrv.Addr(),
	})
	r := runJSON(t, append([]string{"-addr", addr, "-descriptor", "sliding_window_log", "-keys", "50",
		"-dist", "zipf", "-over", "0.5", "-redis", redisSrv.Addr()}, smokeArgs...)...)
	checkConsistent(t, r)
	// Half the calls go to exhausted values: they, and only they, are denied.
	assert.InDelta(t, 0.5, float64(r.Denied)/float64(r.Decisions), 0.1)
	require.NotNil(t, r.Redis)
	// At most one script per decision (a denial of a lone descriptor
	// refunds nothing; a deny cache or coalescing make it fewer), give or
	// take the calls in flight at either end.
	assert.Positive(t, r.Redis.EvalshaPerDecision)
	assert.LessOrEqual(t, r.Redis.EvalshaPerDecision, 1.05)
	assert.Greater(t, r.Redis.PerDecision, r.Redis.EvalshaPerDecision, "scripts run commands inside Redis")
	assert.NotContains(t, r.Redis.Commands, "info")
}

// TestSmokeReplicas: a run spreads its callers over the replicas it names,
// and reads what their leases did on one hot key.
func TestSmokeReplicas(t *testing.T) {
	redisSrv := redistest.Standalone(t)
	env := map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_MODE": "standalone", "RLS_REDIS_ADDRS": redisSrv.Addr()}
	g1, h1 := startServerAt(t, env)
	g2, h2 := startServerAt(t, env)
	leases := newLeaseReader([]string{h1, h2})
	r, err := runLoad(context.Background(), loadParams{
		Addrs: []string{g1, g2}, Concurrency: 8, Conns: 1, Keys: 1, Prefix: hotValuePrefix, Dist: distUniform,
		Domain: defaultDomain, Key: "fixed_window", RunID: newRunID(), Seed: 1,
		phases: phases{Warmup: 200 * time.Millisecond, Duration: 2 * time.Second, Leases: leases},
	})
	require.NoError(t, err)
	checkConsistent(t, r)
	assert.Equal(t, r.Decisions, r.Allowed, "the hot rule is far above the load")
	assert.Equal(t, g1+","+g2, r.Target)
	require.NotNil(t, r.Leases)
	assert.Positive(t, r.Leases.Taken, "one key asked by 8 callers is leased")
	assert.Positive(t, r.Leases.Served)
	for _, h := range []string{h1, h2} {
		c, err := newLeaseReader([]string{h}).read()
		require.NoError(t, err)
		assert.Positive(t, c.Served, "replica %s served calls from its leases", h)
	}
}

// TestSmokeBindingRun: a binding run through two replicas on one Redis
// sends every call and accounts for it, is never above the limit, and reads
// what the leases did. It takes 10 s, so -short skips it.
func TestSmokeBindingRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a binding run takes 10 s")
	}
	redisSrv := redistest.Standalone(t)
	env := map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_MODE": "standalone", "RLS_REDIS_ADDRS": redisSrv.Addr()}
	g1, h1 := startServerAt(t, env)
	g2, h2 := startServerAt(t, env)
	r, err := runBinding(context.Background(), bindingParams{Addrs: []string{g1, g2}, Conns: 1,
		Algorithm: algorithms.FixedWindow, RunID: newRunID(), Leases: newLeaseReader([]string{h1, h2})})
	require.NoError(t, err)
	assert.Equal(t, uint64(bindingOffered*bindingLimit*bindingWindows), r.Sent)
	// A slow machine (or the race detector) may have the servers shed
	// calls, which are errors; every call is accounted for either way.
	assert.Equal(t, r.Sent, r.Allowed+r.Denied+r.Errors)
	assert.Equal(t, checkWindows, r.Check.Kind)
	assert.False(t, r.Check.Above, "%s", r.Check.describe())
	assert.LessOrEqual(t, r.Check.Certain, float64(bindingLimit))
	assert.Positive(t, r.Allowed)
	assert.Equal(t, float64(bindingWindows*bindingLimit), r.Allows)
	require.NotNil(t, r.Leases)
	assert.Positive(t, r.Leases.Taken, "1 000 calls a second on each replica are leased")
}

func TestSmokeNoopServer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newNoopServer()
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	r := runJSON(t, append([]string{"-addr", lis.Addr().String(), "-over", "0.5"}, smokeArgs...)...)
	checkConsistent(t, r)
	assert.Equal(t, r.Decisions, r.Allowed, "the no-op server admits everything")
}

func TestSmokeEvalsha(t *testing.T) {
	redisSrv := redistest.Standalone(t)
	for _, script := range []string{scriptTrivial, scriptFixedWindow} {
		for _, pipeline := range []string{"1", "4"} {
			t.Run(script+"/pipeline="+pipeline, func(t *testing.T) {
				r := runJSON(t, "evalsha", "-redis", redisSrv.Addr(), "-script", script, "-pipeline", pipeline,
					"-duration", "1s", "-warmup", "100ms", "-concurrency", "4", "-keys", "10")
				checkConsistent(t, r)
				assert.Equal(t, r.Decisions, r.Allowed)
				require.NotNil(t, r.Redis)
				if script == scriptTrivial {
					assert.InDelta(t, 1.0, r.Redis.EvalshaPerDecision, 0.05)
					assert.InDelta(t, 1.0, r.Redis.PerDecision, 0.05, "return 1 runs no command")
				} else {
					assert.Zero(t, r.Redis.EvalshaPerDecision, "fixed_window runs no script")
					assert.InDelta(t, 2.0, r.Redis.PerDecision, 0.05, "fixed_window: SET NX PX and INCRBY of its count")
				}
			})
		}
	}
}

func TestCommandErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"positional argument", []string{"run", "-keys", "3", "extra"}, `unexpected argument "extra"`},
		{"bad over", []string{"-over", "2", "-addr", "127.0.0.1:1"}, "-over 2 is not in [0, 1]"},
		{"bad dist", []string{"-dist", "normal", "-addr", "127.0.0.1:1"}, `-dist "normal"`},
		{"evalsha without redis", []string{"evalsha"}, "-redis must name"},
		{"bad script", []string{"evalsha", "-redis", "127.0.0.1:1", "-script", "nope"}, `-script "nope"`},
		{"serve without profile", []string{"serve"}, "needs -cpuprofile"},
		{"bad sweep", []string{"bench", "-sweep", "1,x"}, "-sweep"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLimitsCommand(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"limits", "-domain", "d"}, &out, io.Discard))
	assert.Contains(t, out.String(), "domain: d\n")
	path := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, run(context.Background(), []string{"limits", "-o", path}, io.Discard, io.Discard))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(data), "domain: "+defaultDomain+"\n")
}

// TestBenchQuick runs `loadgen bench -quick` as a program (it starts the
// no-op and profiled servers from its own executable), in this directory,
// from which its default -root finds the repository's root, and checks the
// files it writes. It takes about half a minute, so -short skips it.
func TestBenchQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("bench -quick takes about half a minute")
	}
	redistest.NeedProgram(t, "redis-server", "apt-get install redis-server")
	redistest.NeedProgram(t, "redis-cli", "apt-get install redis-tools")
	dir := t.TempDir()
	bin := filepath.Join(dir, "loadgen")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	outDir := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bench := exec.CommandContext(ctx, bin, "bench", "-quick", "-out", outDir)
	out, err = bench.CombinedOutput()
	require.NoError(t, err, "%s", out)

	data, err := os.ReadFile(filepath.Join(outDir, reportJSONPath))
	require.NoError(t, err)
	var report benchReport
	require.NoError(t, json.Unmarshal(data, &report))
	require.NotEmpty(t, report.Results)
	groups := map[string]bool{}
	for _, r := range report.Results {
		checkConsistent(t, r)
		groups[r.Group] = true
		if runtime.GOOS == "linux" {
			assert.Positive(t, r.CPU[cpuLoadgen], "%s: the load generator's CPU is measured", r.Name)
			if r.Mode == modeRLS {
				assert.Contains(t, r.CPU, cpuServer, r.Name)
			}
			if r.Backend == backendStandalone {
				assert.Contains(t, r.CPU, cpuRedis, r.Name)
			}
		}
	}
	for _, g := range []string{groupBaseline, groupEvalsha, groupMatrix, groupHot} {
		assert.True(t, groups[g], "the quick bench measures group %s", g)
	}
	md, err := os.ReadFile(filepath.Join(outDir, reportDetailPath))
	require.NoError(t, err)
	assert.Contains(t, string(md), "## Targets")
	assert.NotContains(t, string(md), "%!")
	page, err := os.ReadFile(filepath.Join(outDir, pagePath))
	require.NoError(t, err)
	assert.Contains(t, string(page), "| standalone | sliding_window_log |", "the page's headline table")
	assert.NotContains(t, string(page), "%!")
	svg, err := os.ReadFile(filepath.Join(outDir, reportSVGPath))
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
}
