// Command loadgen measures ratewarden: it drives a RateLimitService with
// ShouldRateLimit calls and reports decisions per second, latency
// percentiles and what each decision cost Redis; it serves the no-op
// RateLimitService and drives raw EVALSHA calls that are the baselines every
// result is compared with; and `loadgen bench`, `loadgen rediscost`,
// `loadgen overload` and `loadgen rlqs` run the benchmarks on this machine,
// each writing its table of BENCHMARKS.md and its page under benchmarks/.
//
// The load generator is a module of its own, in the repository's bench/,
// that imports the server's packages from the checkout. From the
// repository's root, `go -C bench run ./cmd/loadgen bench` runs it in
// bench/; it builds the server from the module above it (-root), and
// writes the reports there.
//
// Usage:
//
//	loadgen [run] [flags]     drive a RateLimitService (see loadgen run -h)
//	loadgen limits            print the limits YAML that runs measure against
//	loadgen noop -addr A      serve the no-op RateLimitService
//	loadgen evalsha [flags]   drive raw EVALSHA calls on Redis
//	loadgen bench [flags]     run the benchmark matrix, write its report
//	loadgen report [flags]    render the reports again from their JSON
//	loadgen serve -cpuprofile F   run ratewarden's server (RLS_* env) under the CPU profiler
//	loadgen overload [flags]  run the overload benchmark, before and after
//	loadgen rediscost [flags] what a decision costs Redis and the server, beside envoyproxy/ratelimit's
//	loadgen rlqs [flags]      one limit that binds, through RateLimitService and the Rate Limit Quota Service
//	loadgen spin              keep one CPU busy (the overload benchmark's busy loops)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ratewarden/ratewarden/internal/redisx"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
}

// usage is the overview `loadgen -h` prints.
const usage = `loadgen measures ratewarden.

  loadgen [run] [flags]       drive a RateLimitService with ShouldRateLimit calls
  loadgen limits [-o FILE]    write the limits YAML that runs measure against
  loadgen noop -addr ADDR     serve the no-op RateLimitService (the gRPC ceiling)
  loadgen evalsha [flags]     drive raw EVALSHA calls on Redis (the Redis ceiling)
  loadgen bench [flags]       run the benchmark matrix, write its table of BENCHMARKS.md and its page
  loadgen report [flags]      render BENCHMARKS.md and benchmarks/ again from the JSON there
  loadgen serve -cpuprofile F run ratewarden's server (RLS_* env) under the CPU profiler
  loadgen overload [flags]    run the overload benchmark on a busy machine, before and after
  loadgen rediscost [flags]   what a decision costs Redis and the server, beside envoyproxy/ratelimit's
  loadgen rlqs [flags]        one limit that binds, through RateLimitService and the Rate Limit Quota Service
  loadgen spin                keep one CPU busy until stopped

'loadgen COMMAND -h' lists a command's flags.
`

// run runs the command that args name, writing results to stdout and
// progress and errors to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCommand(ctx, args, stdout, stderr)
	case "limits":
		return limitsCommand(args, stdout, stderr)
	case "noop":
		return noopCommand(ctx, args, stderr)
	case "evalsha":
		return evalshaCommand(ctx, args, stdout, stderr)
	case "bench":
		return benchCommand(ctx, args, stderr)
	case "report":
		return reportCommand(args, stderr)
	case "serve":
		return serveCommand(ctx, args, stderr)
	case "overload":
		return overloadCommand(ctx, args, stderr)
	case "rediscost":
		return rediscostCommand(ctx, args, stdout, stderr)
	case "rlqs":
		return rlqsCommand(ctx, args, stdout, stderr)
	case "spin":
		return spinCommand(ctx, args, stderr)
	case "help":
		_, err := io.WriteString(stdout, usage)
		return err
	}
	return fmt.Errorf("loadgen: unknown command %q\n\n%s", cmd, usage)
}

// newFlagSet returns a flag set for a command that reports to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loadgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loadgen %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and rejects positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// splitAddrs splits a comma list of addresses, dropping empty items.
func splitAddrs(s string) []string {
	var addrs []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// newRunID returns a random id for the values of one run.
func newRunID() string { return fmt.Sprintf("%08x", rand.Uint32()) }

// addPhaseFlags adds -duration and -warmup.
func addPhaseFlags(fs *flag.FlagSet, ph *phases, duration time.Duration) {
	fs.DurationVar(&ph.Duration, "duration", duration, "how long to measure")
	fs.DurationVar(&ph.Warmup, "warmup", time.Second, "how long to send before measuring")
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "[run] [flags]: send ShouldRateLimit calls and report what they measured", stderr)
	p := loadParams{phases: phases{Progress: stderr}}
	addrs := fs.String("addr", "localhost:8081", "gRPC address of the RateLimitService, or a comma list of its replicas' addresses, over which the callers spread")
	fs.IntVar(&p.Concurrency, "concurrency", 64, "callers, each with one call in flight")
	fs.IntVar(&p.Conns, "conns", 2, "gRPC connections to each address, which the callers share (Envoy keeps one per worker thread)")
	fs.IntVar(&p.Keys, "keys", 1000, "distinct descriptor values")
	fs.StringVar(&p.Dist, "dist", distUniform, "how values are drawn: uniform, zipf (s=1.1) or hot (value 0 gets -hot-share)")
	fs.Float64Var(&p.HotShare, "hot-share", 0.5, "with -dist hot, the share of calls for the hot value")
	fs.Float64Var(&p.Over, "over", 0, "share of calls for values whose limit is spent (see 'loadgen limits')")
	fs.StringVar(&p.Domain, "domain", defaultDomain, "domain of the requests")
	fs.StringVar(&p.Key, "descriptor", "sliding_window_counter", "descriptor key; 'loadgen limits' has one per algorithm")
	fs.StringVar(&p.RunID, "run-id", newRunID(), "prefix of this run's values (a new random one by default, so runs never share state)")
	fs.Uint64Var(&p.Seed, "seed", rand.Uint64(), "seed of the value draws")
	redisAddrs := fs.String("redis", "", "comma list of the Redis servers the service uses, to read INFO commandstats from (replicas are skipped)")
	jsonOut := fs.Bool("json", false, "print the result as one line of JSON")
	addPhaseFlags(fs, &p.phases, 10*time.Second)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	p.Addrs = splitAddrs(*addrs)
	if addrs := splitAddrs(*redisAddrs); len(addrs) > 0 {
		p.Stats = newStatsReader(addrs)
		defer p.Stats.Close()
	}
	writeRunHeader(stderr, p)
	r, err := runLoad(ctx, p)
	if err != nil {
		return err
	}
	if *jsonOut {
		return r.writeJSON(stdout)
	}
	return r.writeText(stdout)
}

func limitsCommand(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("limits", "limits [-domain D] [-o FILE]: write the limits YAML runs measure against", stderr)
	domain := fs.String("domain", defaultDomain, "domain of the limits")
	out := fs.String("o", "", "file to write (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return writeLimits(stdout, *domain)
	}
	f, err := os.Create(*out)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("loadgen: %w", cerr)
		}
	}()
	return writeLimits(f, *domain)
}

func noopCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("noop", "noop -addr ADDR: serve a RateLimitService that admits everything; with RLS_ADDR_FILE set, name the bound address there as the server does", stderr)
	addr := fs.String("addr", "127.0.0.1:8091", "gRPC listen address")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return serveNoop(ctx, *addr, os.Getenv("RLS_ADDR_FILE"), stderr)
}

func evalshaCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evalsha", "evalsha -redis ADDRS [flags]: call a script on Redis as fast as it answers", stderr)
	p := evalshaParams{phases: phases{Progress: stderr}}
	redisAddrs := fs.String("redis", "", "comma list of Redis addresses: the server, or any cluster nodes")
	mode := fs.String("mode", string(redisx.ModeStandalone), "standalone or cluster")
	fs.StringVar(&p.Script, "script", scriptFixedWindow, "trivial (return 1), an algorithm (ratewarden's script of it), or peer (envoyproxy/ratelimit's INCRBY and EXPIRE)")
	fs.IntVar(&p.Concurrency, "concurrency", 64, "callers, each with one round trip in flight")
	fs.IntVar(&p.Pipeline, "pipeline", 1, "EVALSHAs per round trip")
	fs.IntVar(&p.Keys, "keys", 1000, "distinct keys, drawn uniformly")
	fs.StringVar(&p.RunID, "run-id", newRunID(), "prefix of this run's keys")
	fs.Uint64Var(&p.Seed, "seed", rand.Uint64(), "seed of the key draws")
	jsonOut := fs.Bool("json", false, "print the result as one line of JSON")
	addPhaseFlags(fs, &p.phases, 10*time.Second)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Addrs = splitAddrs(*redisAddrs); len(p.Addrs) == 0 {
		return errNoRedis
	}
	p.Mode = redisx.Mode(*mode)
	p.Stats = newStatsReader(p.Addrs)
	defer p.Stats.Close()
	r, err := runEvalsha(ctx, p)
	if err != nil {
		return err
	}
	if *jsonOut {
		return r.writeJSON(stdout)
	}
	return r.writeText(stdout)
}

func serveCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve -cpuprofile FILE [-allocprofile FILE]: run ratewarden's server, configured by RLS_* variables, under the CPU profiler", stderr)
	cpu := fs.String("cpuprofile", "", "where to write the CPU profile when the server stops (SIGTERM)")
	allocs := fs.String("allocprofile", "", "where to write the allocation profile when the server stops")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return serveProfiled(ctx, *cpu, *allocs, stderr)
}
