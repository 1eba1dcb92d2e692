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
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// modeEvalsha names runs of raw script calls.
const modeEvalsha = "evalsha"

// The scripts an evalsha run can call.
const (
	// scriptTrivial is `return 1`: the cost of EVALSHA itself.
	scriptTrivial = "trivial"
	// scriptFixedWindow is ratewarden's fixed_window, as the Redis limiter
	// counts it for a limit no call reaches: no script, but SET NX PX and
	// INCRBY of the window's count; the other algorithms' scripts go by
	// their names too.
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
	calls := make([]callFunc, p.Concurrency)
	if p.Script == scriptPeer {
		keys := runKeys(p.RunID, p.Keys)
		for i := range calls {
			rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
			calls[i] = peerCaller(client, keys, p.Pipeline, rng)
		}
	} else {
		commands, err := evalshaCommands(ctx, client, p.Script, p.RunID, p.Keys)
		if err != nil {
			return nil, err
		}
		for i := range calls {
			rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
			calls[i] = evalshaCaller(client, commands, p.Pipeline, rng)
		}
	}
	r, err := measure(ctx, p.phases, calls)
	if err != nil {
		return nil, err
	}
	r.Mode, r.Target, r.Script, r.Pipeline, r.Keys = modeEvalsha, strings.Join(p.Addrs, ","), p.Script, p.Pipeline, p.Keys
	return r, nil
}

// runKeys returns the keys of the run's calls of the empty script and of
// the peer's commands, one per limit.
func runKeys(runID string, keys int) []string {
	out := make([]string, keys)
	for i := range out {
		out[i] = "loadgen:{" + runID + "." + strconv.Itoa(i) + "}"
	}
	return out
}

// serverKeyPrefix returns the prefix of the Redis keys of a server that no
// variable configures: the default of RLS_KEY_PREFIX.
func serverKeyPrefix() (string, error) {
	s, err := settings.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		return "", fmt.Errorf("loadgen: the server's default settings: %w", err)
	}
	return s.KeyPrefix, nil
}

// evalshaCommands returns, for each of the run's keys, the commands of one
// decision of the named script, once the script is cached on every master,
// so that no call falls back to EVAL. For the empty script it is `return 1`
// on the limit's key; for an algorithm, what the Redis limiter sends
// (redisx.Encoder) to take 1 hit at Redis TIME from a live limit of `loadgen
// limits`, which no run reaches: its EVALSHA, or for the fixed window, which
// has no script, its SET NX PX and INCRBY.
func evalshaCommands(ctx context.Context, client redis.UniversalClient, name, runID string, keys int) ([][][]any, error) {
	commands := make([][][]any, keys)
	if name == scriptTrivial {
		script := redis.NewScript("return 1")
		if err := loadScript(ctx, client, script); err != nil {
			return nil, err
		}
		for i, key := range runKeys(runID, keys) {
			commands[i] = [][]any{{"evalsha", script.Hash(), 1, key}}
		}
		return commands, nil
	}
	alg, err := algorithms.ParseAlgorithm(name)
	if err != nil {
		return nil, fmt.Errorf("loadgen: -script %q is not %s, %s or an algorithm", name, scriptTrivial, scriptPeer)
	}
	prefix, err := serverKeyPrefix()
	if err != nil {
		return nil, err
	}
	enc, err := redisx.NewEncoder(prefix, 0)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	if err := enc.LoadScripts(ctx, client); err != nil {
		return nil, fmt.Errorf("loadgen: SCRIPT LOAD: %w", err)
	}
	limit := algorithms.Limit{Algorithm: alg, Requests: liveLimit(alg), Window: 24 * time.Hour}
	for i, value := range newKeySpace(liveValuePrefix, runID, keys, false).live {
		op := rate.Op{
			Key:   rate.Key{Domain: defaultDomain, Entries: []rate.Entry{{Key: alg.String(), Value: value}}},
			Limit: limit,
			Hits:  1,
		}
		if alg.Spec().Counter {
			commands[i], err = enc.CounterCommands(&op, redisx.Unsharded, time.Now())
		} else {
			var cmd []any
			cmd, err = enc.Command(&op, redisx.Unsharded, "")
			commands[i] = [][]any{cmd}
		}
		if err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
	}
	return commands, nil
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

// evalshaCaller returns a worker's call: pipeline decisions, drawn at
// random, in one round trip. A decision whose last reply is 0, or an array
// starting with 0 (a denial), counts as denied, any other as admitted.
func evalshaCaller(client redis.UniversalClient, commands [][][]any, pipeline int, rng *rand.Rand) callFunc {
	cmds := make([]*redis.Cmd, pipeline)
	return func(ctx context.Context) (int, int, error) {
		pipe := client.Pipeline()
		for i := range cmds {
			for _, cmd := range commands[rng.IntN(len(commands))] {
				cmds[i] = pipe.Do(ctx, cmd...)
			}
		}
		// SET NX answers nil when the count's key is there already.
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
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
