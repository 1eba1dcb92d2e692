package test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/exactness"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// exactnessDomain is the domain of the exactness tests' limits.
const exactnessDomain = "exactness"

// exactnessRule is one descriptor of an exactness run's limits file: a key
// with one limit, its hits charges (charge: window or debt) or takes, and
// whether is_negative_hits gives hits back to it.
type exactnessRule struct {
	limit   exactness.Limit
	charges bool
	refunds bool
}

// exactnessRun is replicas of the server binary sharing a redis-server of
// their own (which a test may flush), a limits file they watch, and a
// Recorder of every call made to them. Its methods are safe for concurrent
// use.
type exactnessRun struct {
	t       *testing.T
	redis   *redis.Client
	dir     string
	servers []*serverProcess

	mu    sync.Mutex
	rules map[string]exactnessRule
	rec   *exactness.Recorder
	value string // the descriptors' value, new at each restart
}

// startExactnessRun starts replicas servers with env on top of the Redis
// backend, a fresh redis-server and the limits of rules, keyed by
// descriptor key.
func startExactnessRun(t *testing.T, replicas int, env map[string]string, rules map[string]exactnessRule) *exactnessRun {
	t.Helper()
	srv := redistest.Standalone(t)
	r := &exactnessRun{t: t, redis: srv.Client(t), dir: t.TempDir(), rules: rules,
		value: fmt.Sprintf("run-%d", rand.Uint64())}
	limits := map[string]exactness.Limit{}
	for key, rule := range rules {
		limits[key] = rule.limit
	}
	r.rec = exactness.NewRecorder(limits)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "limits.yaml"), []byte(r.limitsFile()), 0o644))
	vars := map[string]string{
		"RLS_BACKEND":         "redis",
		"RLS_REDIS_ADDRS":     srv.Addr(),
		"RLS_CONFIG_PATH":     r.dir,
		"RLS_BACKEND_TIMEOUT": "5s", // exactness, not latency, is under test
	}
	for k, v := range env {
		vars[k] = v
	}
	servers := make([]*serverProcess, replicas)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			p, err := launchServer(t, "", vars, insecure.NewCredentials())
			if err == nil {
				servers[i] = p
			} else {
				t.Errorf("replica %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	r.servers = servers
	return r
}

// limitsFile returns the limits file of the run's rules.
func (r *exactnessRun) limitsFile() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", exactnessDomain)
	for _, key := range slices.Sorted(maps.Keys(r.rules)) {
		rule := r.rules[key]
		fmt.Fprintf(&b, "  - key: %s\n", key)
		if rule.refunds {
			b.WriteString("    allow_negative_hits: true\n")
		}
		if rule.charges {
			charge := "window"
			if rule.limit.Debt {
				charge = "debt"
			}
			fmt.Fprintf(&b, "    charge: %s\n", charge)
		}
		l := rule.limit
		fmt.Fprintf(&b, "    rate_limit: {unit: %s, requests_per_unit: %d, algorithm: %s", unitOf(l.Window), l.Requests, l.Algorithm)
		if l.Burst != 0 {
			fmt.Fprintf(&b, ", burst: %d", l.Burst)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// unitOf returns the limits file's unit of a window of one unit.
func unitOf(w time.Duration) string {
	switch w {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	panic(fmt.Sprintf("no unit of %s", w))
}

// call sends one request of one descriptor, key's, to replica: kind of
// hits, and records it as caller's.
func (r *exactnessRun) call(ctx context.Context, replica, caller int, key string, kind exactness.Kind, hits uint64) exactness.Call {
	if kind == exactness.Check {
		hits = 0
	}
	d := &ratelimitv3.RateLimitDescriptor{
		Entries:        []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key}},
		HitsAddend:     wrapperspb.UInt64(hits),
		IsNegativeHits: kind == exactness.Refund,
	}
	req := &rlsv3.RateLimitRequest{Domain: exactnessDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	r.mu.Lock()
	value, rec := r.value, r.rec
	r.mu.Unlock()
	d.Entries[0].Value = value
	c := exactness.Call{Replica: replica, Caller: caller, Limit: key, Kind: kind, Hits: hits}
	c.Sent = time.Now()
	resp, err := r.servers[replica].Client.ShouldRateLimit(ctx, req)
	c.Received = time.Now()
	switch {
	case err != nil:
		c.Err = err
	case len(resp.GetStatuses()) != 1:
		c.Err = fmt.Errorf("%d statuses for one descriptor", len(resp.GetStatuses()))
	default:
		st := resp.GetStatuses()[0]
		c.Allowed = st.GetCode() == rlsv3.RateLimitResponse_OK
		c.Remaining = uint64(st.GetLimitRemaining())
		c.Reset = st.GetDurationUntilReset().AsDuration()
	}
	if ctx.Err() != nil && err != nil {
		return c // the run ended with the call: not an answer
	}
	rec.Add(c)
	return c
}

// restart starts afresh on new states: the calls from now on name another
// descriptor value, and a new Recorder records them. It returns the
// history of the calls before. No call may be under way.
func (r *exactnessRun) restart() exactness.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.rec.History()
	limits := map[string]exactness.Limit{}
	for key, rule := range r.rules {
		limits[key] = rule.limit
	}
	r.rec = exactness.NewRecorder(limits)
	r.value = fmt.Sprintf("run-%d", rand.Uint64())
	return h
}

// history returns what was recorded since the run started or restarted.
func (r *exactnessRun) history() exactness.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.History()
}

// reload rewrites the limits file with key's limit changed to to, and
// records the reload: from just before the file changed to when every
// replica answers with the new limit.
func (r *exactnessRun) reload(ctx context.Context, key string, to exactness.Limit) error {
	r.mu.Lock()
	rule := r.rules[key]
	rule.limit = to
	r.rules[key] = rule
	r.mu.Unlock()
	tmp := filepath.Join(r.dir, ".limits.yaml.new") // dot files are not read
	if err := os.WriteFile(tmp, []byte(r.limitsFile()), 0o644); err != nil {
		return err
	}
	before := time.Now()
	if err := os.Rename(tmp, filepath.Join(r.dir, "limits.yaml")); err != nil {
		return err
	}
	for replica := range r.servers {
		deadline := time.Now().Add(10 * time.Second)
		for r.currentLimit(ctx, replica, key) != to.Requests {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("replica %d did not load the new limit of %s in 10s", replica, key)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Reload(key, to, before, time.Now())
	return nil
}

// currentLimit returns the requests_per_unit replica answers for key, by a
// check it does not record (a check changes nothing).
func (r *exactnessRun) currentLimit(ctx context.Context, replica int, key string) uint64 {
	d := &ratelimitv3.RateLimitDescriptor{
		Entries:    []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "probe"}},
		HitsAddend: wrapperspb.UInt64(0),
	}
	resp, err := r.servers[replica].Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: exactnessDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	if err != nil || len(resp.GetStatuses()) != 1 {
		return 0
	}
	return uint64(resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
}

// flush makes Redis forget every state, and records it.
func (r *exactnessRun) flush(ctx context.Context) error {
	before := time.Now()
	if err := r.redis.FlushAll(ctx).Err(); err != nil {
		return err
	}
	after := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Loss(before, after)
	return nil
}

// limitOf returns a limit of alg: requests per window, and burst for a
// token bucket (0: the requests).
func limitOf(alg algorithms.Algorithm, requests uint64, window time.Duration, burst uint64) exactness.Limit {
	return exactness.Limit{Limit: algorithms.Limit{Algorithm: alg, Requests: requests, Window: window, Burst: burst}}
}

// exactnessSeed is the seed of the generated schedules: the one -exactness.seed
// names, or a fresh one.
func exactnessSeed() uint64 {
	if *exactnessSeedFlag != 0 {
		return *exactnessSeedFlag
	}
	return rand.Uint64() % 1_000_000_000
}

// judge runs the three checks on the run's history with tol, and fails the
// test with what they found, the seed and the command that replays it.
func (r *exactnessRun) judge(tol exactness.Tolerance, seed uint64) []exactness.Violation {
	r.t.Helper()
	return judge(r.t, r.history(), tol, fmt.Sprintf("seed %d; replay: %s", seed, replayCommand(r.t, seed)),
		exactness.CheckAdmitted, exactness.CheckDenials, exactness.CheckRemaining)
}

// check is one of package exactness's checks.
type check func(exactness.History, exactness.Tolerance) []exactness.Violation

// judge runs checks on h with tol, logs what h holds, and fails t with what
// the checks found, the calls around the worst of each, and then.
func judge(t *testing.T, h exactness.History, tol exactness.Tolerance, then string, checks ...check) []exactness.Violation {
	t.Helper()
	begin := time.Now()
	var vs []exactness.Violation
	for _, c := range checks {
		vs = append(vs, c(h, tol)...)
	}
	admitted, denied, failed := 0, 0, 0
	for _, c := range h.Calls {
		switch {
		case c.Err != nil:
			failed++
		case c.Allowed:
			admitted++
		default:
			denied++
		}
	}
	t.Logf("%d calls (%d OK, %d over the limit, %d failed), %d reloads, %d losses, checked in %s with %+v",
		len(h.Calls), admitted, denied, failed, len(h.Reloads), len(h.Losses), time.Since(begin).Round(time.Millisecond), tol)
	if len(vs) > 0 {
		var events strings.Builder
		for _, r := range h.Reloads {
			fmt.Fprintf(&events, "    reload of %s to %d/%s [%s, %s]\n", r.Limit, r.To.Requests, r.To.Window,
				r.Before.Format("15:04:05.000000"), r.After.Format("15:04:05.000000"))
		}
		for _, l := range h.Losses {
			fmt.Fprintf(&events, "    state lost [%s, %s]\n", l.Before.Format("15:04:05.000000"), l.After.Format("15:04:05.000000"))
		}
		t.Errorf("%s\n%s%s\n%s", exactness.Report(vs, 4), events.String(), around(h, vs), then)
	}
	return vs
}

// replayCommand returns the command that runs t again with seed.
func replayCommand(t *testing.T, seed uint64) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + p + "$"
	}
	return fmt.Sprintf("go test ./test -run '%s' -exactness.seed=%d -v", strings.Join(parts, "/"), seed)
}

// around returns the calls around the worst violation of each check: those
// of its limit that may have been decided from 10 ms before it to 2 ms
// after, at most 40.
func around(h exactness.History, vs []exactness.Violation) string {
	worst := map[string]exactness.Violation{}
	for _, v := range vs {
		if w, ok := worst[v.Check]; !ok || v.Excess > w.Excess {
			worst[v.Check] = v
		}
	}
	var b strings.Builder
	for _, check := range slices.Sorted(maps.Keys(worst)) {
		v := worst[check]
		fmt.Fprintf(&b, "around the worst %s violation:\n", check)
		n := 0
		for _, c := range h.Calls {
			if c.Limit == v.Limit && c.Received.After(v.From.Add(-10*time.Millisecond)) && c.Sent.Before(v.To.Add(2*time.Millisecond)) {
				if n++; n > 40 {
					b.WriteString("    …\n")
					break
				}
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
	}
	return b.String()
}
