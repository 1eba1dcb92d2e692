package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/lua"
)

// modeEvalsha names runs of raw script calls.
const modeEvalsha = "evalsha"

// The scripts an evalsha run can call.
const (
	// scriptTrivial is `return 1`: the cost of EVALSHA itself.
	scriptTrivial = "trivial"
	// scriptFixedWindow is ratewarden's fixed_window script, as the Redis
	// limiter runs it for a limit no call reaches; the other algorithms'
	// scripts go by their names too.
	scriptFixedWindow = "fixed_window"
	// scriptPeer is no script: envoyproxy/ratelimit's fixed window, INCRBY
	// of the window's key and EXPIRE, pipelined in one round trip.
	scriptPeer = "peer"
)

// evalshaParams describes one run of raw EVALSHA calls.
type evalshaParams struct {
	Addrs       []string
	Mode        redisx.Mode
	Script      string
	Concurrency int
	// Pipeline is the number of calls each worker sends per round trip.
	Pipeline int
	Keys     int
	RunID    string
	Seed     uint64
	phases
}

// runEvalsha calls a script on Redis from p.Concurrency workers through a
// client built as the server builds its own (redisx.NewClient), each worker
// sending p.Pipeline EVALSHAs per round trip on keys drawn uniformly from
// p.Keys, and returns what it measured. Latencies are per round trip.
func runEvalsha(ctx context.Context, p evalshaParams) (*result, error) {
	switch {
	case p.Concurrency < 1:
		return nil, fmt.Errorf("loadgen: -concurrency %d must be at least 1", p.Concurrency)
	case p.Pipeline < 1:
		return nil, fmt.Errorf("loadgen: -pipeline %d must be at least 1", p.Pipeline)
	case p.Keys < 1:
		return nil, fmt.Errorf("loadgen: -keys %d must be at least 1", p.Keys)
	}
	client, err := redisx.NewClient(redisx.Options{Addrs: p.Addrs, Mode: p.Mode})
	if err != nil {
		return nil, fmt.Errorf("loadgen: -redis: %w", err)
	}
	defer client.Close()
	keys := make([]string, p.Keys)
	for i := range keys {
		keys[i] = "loadgen:{" + p.RunID + "." + strconv.Itoa(i) + "}"
	}
	calls := make([]callFunc, p.Concurrency)
	if p.Script == scriptPeer {
		for i := range calls {
			rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
			calls[i] = peerCaller(client, keys, p.Pipeline, rng)
		}
	} else {
		src, args, err := evalshaScript(p.Script)
		if err != nil {
			return nil, err
		}
		script := redis.NewScript(src)
		if err := loadScript(ctx, client, script); err != nil {
			return nil, err
		}
		for i := range calls {
			rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
			calls[i] = evalshaCaller(client, script, scriptKeys(p.Script, keys), args, p.Pipeline, rng)
		}
	}
	r, err := measure(ctx, p.phases, calls)
	if err != nil {
		return nil, err
	}
	r.Mode, r.Target, r.Script, r.Pipeline, r.Keys = modeEvalsha, strings.Join(p.Addrs, ","), p.Script, p.Pipeline, p.Keys
	return r, nil
}

// evalshaScript returns the source of the named script and the arguments of
// a call.
func evalshaScript(name string) (string, []any, error) {
	if name == scriptTrivial {
		return "return 1", nil, nil
	}
	alg, err := algorithms.ParseAlgorithm(name)
	if err != nil {
		return "", nil, fmt.Errorf("loadgen: -script %q is not %s, %s or an algorithm", name, scriptTrivial, scriptPeer)
	}
	src, err := lua.Source(name + ".lua")
	if err != nil {
		return "", nil, fmt.Errorf("loadgen: %w", err)
	}
	// take 1 hit at Redis TIME from a limit no run reaches: 10^9 a day, or
	// the log's largest, 10^5 a day (see lua.go for the arguments).
	l := algorithms.Limit{Algorithm: alg, Requests: 1_000_000_000, Window: 24 * time.Hour}
	if alg == algorithms.SlidingWindowLog {
		l.Requests = algorithms.MaxLogRequests
	}
	burst := ""
	if alg == algorithms.TokenBucket {
		burst = strconv.FormatUint(l.Capacity(), 10)
	}
	return src, []any{"take", "", strconv.FormatUint(l.Requests, 10), strconv.FormatInt(l.WindowMicros(), 10), "1", "", "",
		burst, "0", strconv.FormatUint(l.MaxDebt(), 10)}, nil
}

// peerCaller returns a worker's call as envoyproxy/ratelimit's fixed window
// makes it (its Redis cache, without local cache or implicit pipelining):
// per decision INCRBY of the key of the current one-minute window and
// EXPIRE of that key, pipelined, pipeline decisions per round trip.
func peerCaller(client redis.UniversalClient, keys []string, pipeline int, rng *rand.Rand) callFunc {
	incrs := make([]*redis.IntCmd, pipeline)
	return func(ctx context.Context) (int, int, error) {
		window := strconv.FormatInt(time.Now().Unix()/60*60, 10)
		pipe := client.Pipeline()
		for i := range incrs {
			key := keys[rng.IntN(len(keys))] + "_" + window
			incrs[i] = pipe.IncrBy(ctx, key, 1)
			pipe.Expire(ctx, key, time.Minute)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, 0, fmt.Errorf("loadgen: INCRBY and EXPIRE pipeline: %w", err)
		}
		return pipeline, 0, nil
	}
}

// loadScript caches script on every master, so that calls never fall back
// to EVAL.
func loadScript(ctx context.Context, client redis.UniversalClient, script *redis.Script) error {
	load := func(ctx context.Context, c *redis.Client) error { return script.Load(ctx, c).Err() }
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, load)
	} else {
		err = script.Load(ctx, client).Err()
	}
	if err != nil {
		return fmt.Errorf("loadgen: SCRIPT LOAD: %w", err)
	}
	return nil
}

// scriptKeys returns the KEYS of each of keys' calls of the named script:
// the key, and for the sliding window log its sequence counter too.
func scriptKeys(name string, keys []string) [][]string {
	per := make([][]string, len(keys))
	for i, k := range keys {
		per[i] = []string{k}
		if name == algorithms.SlidingWindowLog.String() {
			per[i] = append(per[i], k+":seq")
		}
	}
	return per
}

// evalshaCaller returns a worker's call: pipeline EVALSHAs on random keys in
// one round trip. A reply whose first element is 0 (a denial) counts as
// denied, any other as admitted.
func evalshaCaller(client redis.UniversalClient, script *redis.Script, keys [][]string, args []any, pipeline int, rng *rand.Rand) callFunc {
	if pipeline == 1 {
		return func(ctx context.Context) (int, int, error) {
			v, err := script.EvalSha(ctx, client, keys[rng.IntN(len(keys))], args...).Result()
			if err != nil {
				return 0, 0, fmt.Errorf("loadgen: EVALSHA: %w", err)
			}
			if admitted(v) {
				return 1, 0, nil
			}
			return 0, 1, nil
		}
	}
	cmds := make([]*redis.Cmd, pipeline)
	return func(ctx context.Context) (int, int, error) {
		pipe := client.Pipeline()
		for i := range cmds {
			cmds[i] = script.EvalSha(ctx, pipe, keys[rng.IntN(len(keys))], args...)
		}
		_, err := pipe.Exec(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("loadgen: EVALSHA pipeline: %w", err)
		}
		allowed := 0
		for _, c := range cmds {
			if admitted(c.Val()) {
				allowed++
			}
		}
		return allowed, pipeline - allowed, nil
	}
}

// admitted reads a script's reply: 1, or an array starting with 1, admits.
func admitted(v any) bool {
	switch v := v.(type) {
	case int64:
		return v != 0
	case []any:
		if len(v) > 0 {
			n, ok := v[0].(int64)
			return ok && n != 0
		}
	}
	return false
}

// errNoRedis says a run that needs Redis was given no address.
var errNoRedis = errors.New("loadgen: -redis must name at least one Redis address")
