package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/proc"
	"github.com/ratewarden/ratewarden/internal/testkit/rlqsenvoy"
)

// The cells of `loadgen rlqs`: one hot limit that binds, offered twice what
// it allows for one window, through RateLimitService (a ShouldRateLimit call
// per request, as Envoy's ratelimit filter asks) and through the Rate Limit
// Quota Service (fake Envoys that enforce the server's grants locally and
// report every 5 s), side by side in the same window, each cell through a
// server and a Redis of its own.

// The protocols a cell of `loadgen rlqs` asks through.
const (
	protocolRLS  = "RLS"
	protocolRLQS = "RLQS"
)

// The shape of the cells of `loadgen rlqs`.
const (
	// quotaOffered is the offered load, as a multiple of the limit.
	quotaOffered = 2
	// quotaLead is the least time between the end of the set-up and the
	// start of the window the cells run in.
	quotaLead = 2 * time.Second
	// quotaMaxLate is how far an open loop may fall behind before its cell
	// is failed: its demand was then not the one asked. A request due in
	// the window that the loop could only make after it is not made, so
	// that a lag never moves demand into the next window.
	quotaMaxLate = time.Second
	// quotaTick is how often the fake Envoys run their timers (the reports,
	// the expiries), which fall due on the real clock.
	quotaTick = 10 * time.Millisecond
	// quotaReadLead is how long before the first request the counters are
	// read.
	quotaReadLead = 100 * time.Millisecond
	// quotaLogLines is how many of the lines a server writes during a cell
	// the result keeps.
	quotaLogLines = 5
)

// defaultQuotaAlgorithms are the algorithms `loadgen rlqs` measures unless
// told otherwise: a windowed limit and the exact sliding one.
var defaultQuotaAlgorithms = []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindowLog}

// rlqsCommand measures, for one hot limit that binds, what a request costs
// Redis and the server through RateLimitService and through the Rate Limit
// Quota Service, side by side in one window on this machine.
func rlqsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("rlqs", "rlqs [flags]: one hot limit offered twice what it allows, through RateLimitService and through the Rate Limit Quota Service, side by side in one window", stderr)
	root := flags.String("root", "", rootUsage)
	envoys := flags.Int("envoys", 3, "Envoys asking: the fake Envoys of the RLQS cells, and the gRPC connections of the RLS cells, one per Envoy")
	algs := flags.String("algorithms", joinAlgorithms(defaultQuotaAlgorithms), "comma list of the limit's algorithms, a cell through each protocol for each; not token_bucket, which one window at twice its rate does not bind")
	backendTimeout := flags.Duration("backend-timeout", time.Second, "RLS_BACKEND_TIMEOUT of the servers: long, so that a slow answer is measured, not turned into an error")
	update := flags.String("update", "", "the page, "+pagePath+", to write the table into, between its rlqs markers, with the detail and the JSON under "+detailDir+"/ beside it; default: print the detail")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if *envoys < 1 || *backendTimeout <= 0 {
		return errors.New("loadgen: rlqs: -envoys and -backend-timeout must be positive")
	}
	if *update != "" && filepath.Base(*update) != pagePath {
		return fmt.Errorf("loadgen: rlqs: -update %s: it names the page, a file called %s, beside which the detail goes into %s/", *update, pagePath, detailDir)
	}
	measured, err := parseQuotaAlgorithms(*algs)
	if err != nil {
		return err
	}
	if *root, err = orServerRoot(*root); err != nil {
		return err
	}
	begin := time.Now()
	dir, err := os.MkdirTemp("", "loadgen-rlqs-")
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer os.RemoveAll(dir)
	q := &quotaRun{root: *root, dir: dir, envoys: *envoys, backendTimeout: *backendTimeout, log: stderr}
	defer q.stop()
	if err := q.setUp(ctx, measured); err != nil {
		return err
	}
	m := describeMachine(ctx, q.root, q.cells[0].redis)
	results, err := q.run(ctx)
	if err != nil {
		return err
	}
	m.LoadAfter = loadAverage()
	rep := &rlqsReport{
		Command: reproduceCommand(flags, "rlqs"), Date: begin.UTC().Format("2006-01-02 15:04 MST"),
		Took: time.Since(begin).Round(time.Second).String(), Machine: m, Envoys: *envoys,
		Limit: quotaLimit, Unit: quotaUnit, Offered: quotaOffered, Rate: quotaOffered * quotaLimit / quotaWindow.Seconds(),
		ReportInterval: rlqsenvoy.DefaultReportInterval.String(), BackendTimeout: backendTimeout.String(), Cells: results,
	}
	var failed int
	if *update == "" {
		failed = rep.writeDetail(stdout, "")
	} else if failed, err = writeRLQSFiles(filepath.Dir(*update), rep, stderr); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("loadgen: rlqs: %d cells failed (see the report)", failed)
	}
	return nil
}

// joinAlgorithms returns the names of algs as a comma list.
func joinAlgorithms(algs []algorithms.Algorithm) string {
	names := make([]string, len(algs))
	for i, a := range algs {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

// parseQuotaAlgorithms parses -algorithms of `loadgen rlqs`.
func parseQuotaAlgorithms(s string) ([]algorithms.Algorithm, error) {
	var out []algorithms.Algorithm
	for name := range strings.SplitSeq(s, ",") {
		a, err := algorithms.ParseAlgorithm(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("loadgen: rlqs: -algorithms: %w", err)
		}
		if a == algorithms.TokenBucket {
			return nil, fmt.Errorf("loadgen: rlqs: -algorithms: %s: a bucket starts full, so one window at twice its rate does not bind it", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// quotaRun holds what a run of `loadgen rlqs` has started.
type quotaRun struct {
	root, dir      string
	envoys         int
	backendTimeout time.Duration
	log            io.Writer
	cells          []*quotaCell
}

// quotaCell is one cell and what it runs on: a server and a Redis of its
// own, so that each cell's commands and CPU are its own.
type quotaCell struct {
	protocol  string
	algorithm algorithms.Algorithm
	redis     *proc.Redis
	server    *proc.Server
}

// setUp builds the server, writes the limits, and starts a Redis and a
// server for each cell: each algorithm through RLS, then through RLQS.
func (q *quotaRun) setUp(ctx context.Context, algs []algorithms.Algorithm) error {
	bin := filepath.Join(q.dir, "ratewarden-server")
	fmt.Fprintf(q.log, "loadgen: rlqs: building %s\n", filepath.Join(q.root, "cmd/server"))
	if err := goBuild(ctx, q.root, bin); err != nil {
		return err
	}
	limits := filepath.Join(q.dir, "limits.yaml")
	var b strings.Builder
	if err := writeLimits(&b, defaultDomain); err != nil {
		return err
	}
	if err := os.WriteFile(limits, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	for _, alg := range algs {
		for _, protocol := range []string{protocolRLS, protocolRLQS} {
			c := &quotaCell{protocol: protocol, algorithm: alg}
			q.cells = append(q.cells, c)
			var err error
			if c.redis, err = proc.StartRedis(proc.RedisConfig{}); err != nil {
				return fmt.Errorf("loadgen: %w", err)
			}
			c.server, err = startServing(ctx, proc.ServerConfig{
				Name: fmt.Sprintf("ratewarden server (%s, %s)", protocol, alg), Bin: bin, Dir: q.dir,
				Env: map[string]string{
					"RLS_CONFIG_PATH":     limits,
					"RLS_BACKEND":         "redis",
					"RLS_REDIS_MODE":      "standalone",
					"RLS_REDIS_ADDRS":     c.redis.Addr(),
					"RLS_BACKEND_TIMEOUT": q.backendTimeout.String(),
					"RLS_LOG_LEVEL":       "warn",
				},
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// stop stops every server and Redis the run started.
func (q *quotaRun) stop() {
	for _, c := range q.cells {
		if c.server != nil {
			c.server.Close()
		}
		if c.redis != nil {
			c.redis.Close()
		}
	}
}

// run runs every cell side by side in the next window at least quotaLead
// away, and returns their results in the order of the cells.
func (q *quotaRun) run(ctx context.Context) ([]*quotaResult, error) {
	start := windowAfter(time.Now().Add(quotaLead), quotaWindow)
	fmt.Fprintf(q.log, "loadgen: rlqs: %d cells side by side for the window of %s from %s, in %s\n",
		len(q.cells), quotaWindow, start.UTC().Format(time.TimeOnly), time.Until(start).Round(time.Second))
	runID := newRunID()
	results := make([]*quotaResult, len(q.cells))
	errs := make([]error, len(q.cells))
	var wg sync.WaitGroup
	for i, c := range q.cells {
		p := quotaParams{
			Protocol: c.protocol, Algorithm: c.algorithm, Addr: c.server.Addrs[addrfile.GRPC], Envoys: q.envoys,
			Value: quotaValuePrefix + runID, Start: start, Length: quotaWindow,
			CPU: newCPUMeter(cpuProc{name: cpuServer, pid: c.server.Pid()}, cpuProc{name: cpuRedis, pid: c.redis.Pid()}),
			Log: c.server.Output,
		}
		wg.Go(func() {
			p.Stats = newStatsReader([]string{c.redis.Addr()})
			defer p.Stats.Close()
			if c.protocol == protocolRLS {
				p.Leases = newLeaseReader([]string{c.server.Addrs[addrfile.HTTP]})
			}
			r, err := runQuotaCell(ctx, p)
			if err != nil {
				errs[i] = fmt.Errorf("loadgen: rlqs cell %s %s: %w\n%s", c.protocol, c.algorithm, err, c.server.Tail(20))
				return
			}
			results[i] = r
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, r := range results {
		fmt.Fprintf(q.log, "loadgen: rlqs: %-4s %-22s %s\n", r.Protocol, r.Algorithm, r.summary())
	}
	return results, nil
}

// windowAfter returns the start of the first window of length w, aligned
// to the epoch as the limits' windows are, that starts after t.
func windowAfter(t time.Time, w time.Duration) time.Time {
	n := w.Nanoseconds()
	return time.Unix(0, (t.UnixNano()/n+1)*n)
}

// quotaParams describes one cell of `loadgen rlqs`.
type quotaParams struct {
	Protocol  string
	Algorithm algorithms.Algorithm
	// Addr is the server's gRPC address. Envoys are the clients that ask
	// it: through RLS, gRPC connections (one per Envoy) that the calls take
	// in turn; through RLQS, fake Envoys on a connection and a stream each,
	// the requests taking them in turn.
	Addr   string
	Envoys int
	// Value is the descriptor's value (the bucket id's), one of
	// quotaValuePrefix.
	Value string
	// Start is when the first request is due; requests are offered for
	// Length from then, quotaOffered × quotaLimit per quotaWindow.
	Start  time.Time
	Length time.Duration
	// Stats, CPU and Leases, when not nil, are read just before Start and
	// just after the last answer. Log, when not nil, returns what the
	// server has written so far.
	Stats  *statsReader
	CPU    *cpuMeter
	Leases *leaseReader
	Log    func() string
}

// calls returns how many requests p offers, and at what interval.
func (p quotaParams) calls() (n int, interval time.Duration) {
	n = int(math.Round(quotaOffered * quotaLimit * p.Length.Seconds() / quotaWindow.Seconds()))
	return n, p.Length / time.Duration(max(n, 1))
}

// quotaResult is what one cell of `loadgen rlqs` measured.
type quotaResult struct {
	Algorithm string `json:"algorithm"`
	Protocol  string `json:"protocol"`
	Envoys    int    `json:"envoys"`
	// Rate is the requests offered a second; Seconds how far apart the
	// counters' two reads were.
	Rate    float64 `json:"rate"`
	Seconds float64 `json:"seconds"`
	// Sent counts the requests made; Skipped those due in the window
	// that the open loop could make only after it, and did not.
	Sent    uint64 `json:"sent"`
	Skipped uint64 `json:"skipped,omitempty"`
	Allowed uint64 `json:"allowed"`
	Denied  uint64 `json:"denied"`
	// Errors counts the calls that failed (RLS).
	Errors     uint64            `json:"errors"`
	ErrorCodes map[string]uint64 `json:"error_codes,omitempty"`
	FirstError string            `json:"first_error,omitempty"`
	// Late is the most a request was made after its time, in µs: the open
	// loop's own lag.
	Late float64 `json:"late_us"`
	// P50 and P99 are the latencies of the answers, in µs (RLS; Envoy
	// decides an RLQS request locally).
	P50 float64 `json:"p50_us,omitempty"`
	P99 float64 `json:"p99_us,omitempty"`
	// Allows is what the limit allows over the run; Check is what the
	// times of the admitted requests say of it.
	Allows float64    `json:"allows"`
	Check  limitCheck `json:"check"`
	// Commands are the Redis commands called between the reads, by name,
	// those a script runs included.
	Commands commandStats `json:"redis_commands"`
	// ServerCPU and RedisCPU are the CPU seconds (user and system) the
	// server and its Redis used between the reads.
	ServerCPU float64 `json:"server_cpu_s"`
	RedisCPU  float64 `json:"redis_cpu_s"`
	// Leases is what the server's leases did (RLS).
	Leases *leaseCounts `json:"leases,omitempty"`
	// Quota is what the fake Envoys counted (RLQS).
	Quota *envoyCounts `json:"quota,omitempty"`
	// ServerLogLines counts the lines the server wrote between the reads:
	// at RLS_LOG_LEVEL=warn, warnings and errors. ServerLog holds the
	// first quotaLogLines of them.
	ServerLogLines int      `json:"server_log_lines,omitempty"`
	ServerLog      []string `json:"server_log,omitempty"`
}

// envoyCounts is what the fake Envoys of an RLQS cell counted, summed.
type envoyCounts struct {
	Streams     int `json:"streams"`
	ReportsSent int `json:"reports_sent"`
	ReportsLost int `json:"reports_lost"`
	Responses   int `json:"responses"`
}

// runQuotaCell runs the cell p describes, through its protocol.
func runQuotaCell(ctx context.Context, p quotaParams) (*quotaResult, error) {
	switch p.Protocol {
	case protocolRLS:
		return runQuotaRLS(ctx, p)
	case protocolRLQS:
		return runQuotaRLQS(ctx, p)
	}
	return nil, fmt.Errorf("loadgen: rlqs: protocol %q", p.Protocol)
}

// runQuotaRLS offers p's requests as ShouldRateLimit calls, each at its
// time whatever became of the others, the calls taking the connections in
// turn.
func runQuotaRLS(ctx context.Context, p quotaParams) (*quotaResult, error) {
	conns, err := dialAll([]string{p.Addr}, p.Envoys)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	clients := make([]rlsv3.RateLimitServiceClient, len(conns))
	for i, c := range conns {
		clients[i] = rlsv3.NewRateLimitServiceClient(c)
		// Connect, with a call for a value of its own, before the run.
		if _, _, err := decide(ctx, clients[i], bindingRequest(p.Algorithm, p.Value+".warm")); err != nil {
			return nil, fmt.Errorf("loadgen: rlqs: %w", err)
		}
	}
	before, err := p.readBefore(ctx)
	if err != nil {
		return nil, err
	}
	n, interval := p.calls()
	req := bindingRequest(p.Algorithm, p.Value)
	tally := &bindingTally{hist: NewHistogram(), codes: map[string]uint64{}, spans: make([]span, 0, n)}
	var wg sync.WaitGroup
	var skipped uint64
	end := p.Start.Add(p.Length)
	late := offer(ctx, p.Start, n, interval, func(k int) {
		if !time.Now().Before(end) {
			skipped++
			return
		}
		client := clients[k%len(clients)]
		wg.Go(func() { tally.call(ctx, client, req) })
	})
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("loadgen: rlqs: interrupted: %w", ctx.Err())
	}
	r := p.result(late, tally.spans)
	r.Sent, r.Skipped = uint64(n)-skipped, skipped
	r.Allowed, r.Denied, r.Errors = tally.allowed, tally.denied, tally.errors
	if len(tally.codes) > 0 {
		r.ErrorCodes = tally.codes
	}
	r.FirstError = tally.firstErr
	r.P50, r.P99 = micros(tally.hist.Quantile(0.5)), micros(tally.hist.Quantile(0.99))
	return r, p.readAfter(ctx, before, r)
}

// runQuotaRLQS offers p's requests to fake Envoys, each on a connection and
// a stream of its own, the requests taking them in turn, each at its time.
// The Envoys deny what no grant covers (DENY_ALL with no assignment and
// after one expires, as ratewarden's documentation asks of an operator)
// and report every rlqsenvoy.DefaultReportInterval, Envoy's own.
func runQuotaRLQS(ctx context.Context, p quotaParams) (*quotaResult, error) {
	conns, err := dialAll([]string{p.Addr}, p.Envoys)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	timers, stop := context.WithCancel(ctx)
	defer stop()
	deny := rlqsenvoy.Settings{NoAssignment: rlqsenvoy.DenyAll(), ExpiredFallback: rlqsenvoy.DenyAll()}
	envoys := make([]*rlqsenvoy.Envoy, len(conns))
	for i, c := range conns {
		if err := connect(ctx, c); err != nil {
			return nil, err
		}
		e, err := rlqsenvoy.New(rlqsv3.NewRateLimitQuotaServiceClient(c), rlqsenvoy.Config{Domain: defaultDomain, Settings: deny})
		if err != nil {
			return nil, fmt.Errorf("loadgen: rlqs: %w", err)
		}
		defer e.Close()
		go e.Run(timers, quotaTick)
		envoys[i] = e
	}
	before, err := p.readBefore(ctx)
	if err != nil {
		return nil, err
	}
	n, interval := p.calls()
	bucket := map[string]string{p.Algorithm.String(): p.Value}
	type tally struct {
		allowed, denied, skipped uint64
		spans                    []span
		late                     time.Duration
	}
	end := p.Start.Add(p.Length)
	tallies := make([]tally, len(envoys))
	var wg sync.WaitGroup
	for i, e := range envoys {
		t := &tallies[i]
		// Envoy i makes requests i, i+N, i+2N, … of the n.
		calls := (n - i + len(envoys) - 1) / len(envoys)
		t.spans = make([]span, 0, calls)
		wg.Go(func() {
			t.late = offer(ctx, p.Start.Add(time.Duration(i)*interval), calls, time.Duration(len(envoys))*interval, func(int) {
				send := time.Now()
				if !send.Before(end) {
					t.skipped++
					return
				}
				allowed := e.Request(bucket)
				s := span{Send: send.UnixNano(), Recv: time.Now().UnixNano()}
				if allowed {
					t.allowed++
					t.spans = append(t.spans, s)
				} else {
					t.denied++
				}
			})
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("loadgen: rlqs: interrupted: %w", ctx.Err())
	}
	var late time.Duration
	var spans []span
	q := &envoyCounts{}
	var allowed, denied, skipped uint64
	for i, t := range tallies {
		late, allowed, denied, skipped = max(late, t.late), allowed+t.allowed, denied+t.denied, skipped+t.skipped
		spans = append(spans, t.spans...)
		c := envoys[i].Counters()
		q.Streams, q.ReportsSent, q.ReportsLost, q.Responses = q.Streams+c.Streams, q.ReportsSent+c.ReportsSent,
			q.ReportsLost+c.ReportsLost, q.Responses+c.Responses
	}
	r := p.result(late, spans)
	r.Sent, r.Skipped, r.Allowed, r.Denied, r.Quota = uint64(n)-skipped, skipped, allowed, denied, q
	return r, p.readAfter(ctx, before, r)
}

// connect connects c and waits until it is ready, so that no stream of a
// run waits for its connection.
func connect(ctx context.Context, c *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, servingTimeout)
	defer cancel()
	c.Connect()
	for s := c.GetState(); s != connectivity.Ready; s = c.GetState() {
		if !c.WaitForStateChange(ctx, s) {
			return fmt.Errorf("loadgen: rlqs: connecting to %s: %w", c.Target(), ctx.Err())
		}
	}
	return nil
}

// result returns the result of p's run, with the check of the admitted
// requests' spans against the limit over the windows the run touched.
func (p quotaParams) result(late time.Duration, spans []span) *quotaResult {
	n, _ := p.calls()
	windows := max(int(math.Ceil(p.Length.Seconds()/quotaWindow.Seconds())), 1)
	r := &quotaResult{Algorithm: p.Algorithm.String(), Protocol: p.Protocol, Envoys: p.Envoys,
		Rate: float64(n) / p.Length.Seconds(), Late: micros(late)}
	r.Allows, r.Check = limitVerdict(p.Algorithm, spans, quotaLimit, quotaWindow, windows)
	return r
}

// quotaReading is what a cell reads of its server and Redis before and
// after its requests.
type quotaReading struct {
	at       time.Time
	commands commandStats
	cpu      map[string]time.Duration
	leases   leaseCounts
	log      int
}

// readBefore waits until quotaReadLead before p.Start and reads the
// counters.
func (p quotaParams) readBefore(ctx context.Context) (quotaReading, error) {
	if !sleep(ctx, time.Until(p.Start.Add(-quotaReadLead))) {
		return quotaReading{}, fmt.Errorf("loadgen: rlqs: interrupted: %w", ctx.Err())
	}
	return p.read(ctx)
}

// read reads the counters p has readers of.
func (p quotaParams) read(ctx context.Context) (quotaReading, error) {
	r := quotaReading{at: time.Now()}
	var err error
	if p.Stats != nil {
		if r.commands, err = p.Stats.read(ctx); err != nil {
			return r, err
		}
	}
	if p.CPU != nil {
		if r.cpu, err = p.CPU.read(); err != nil {
			return r, err
		}
	}
	if p.Leases != nil {
		if r.leases, err = p.Leases.read(); err != nil {
			return r, err
		}
	}
	if p.Log != nil {
		r.log = len(p.Log())
	}
	return r, nil
}

// readAfter reads the counters again and puts into r what they counted
// since before.
func (p quotaParams) readAfter(ctx context.Context, before quotaReading, r *quotaResult) error {
	after, err := p.read(ctx)
	if err != nil {
		return err
	}
	r.Seconds = after.at.Sub(before.at).Seconds()
	if p.Stats != nil {
		r.Commands = after.commands.since(before.commands)
	}
	if p.CPU != nil {
		r.ServerCPU = (after.cpu[cpuServer] - before.cpu[cpuServer]).Seconds()
		r.RedisCPU = (after.cpu[cpuRedis] - before.cpu[cpuRedis]).Seconds()
	}
	if p.Leases != nil {
		d := after.leases.since(before.leases)
		r.Leases = &d
	}
	if p.Log != nil {
		for line := range strings.Lines(p.Log()[before.log:]) {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			r.ServerLogLines++
			if len(r.ServerLog) < quotaLogLines {
				r.ServerLog = append(r.ServerLog, line)
			}
		}
	}
	return nil
}
