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
	// limiter runs it for a limit no call reaches.
	scriptFixedWindow = "fixed_window"
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
	src, args, err := evalshaScript(p.Script)
	if err != nil {
		return nil, err
	}
	client, err := redisx.NewClient(redisx.Options{Addrs: p.Addrs, Mode: p.Mode})
	if err != nil {
		return nil, fmt.Errorf("loadgen: -redis: %w", err)
	}
	defer client.Close()
	script := redis.NewScript(src)
	if err := loadScript(ctx, client, script); err != nil {
		return nil, err
	}
	keys := make([]string, p.Keys)
	for i := range keys {
		keys[i] = "loadgen:{" + p.RunID + "." + strconv.Itoa(i) + "}"
	}

	calls := make([]callFunc, p.Concurrency)
	for i := range calls {
		rng := rand.New(rand.NewPCG(p.Seed, uint64(i)))
		calls[i] = evalshaCaller(client, script, keys, args, p.Pipeline, rng)
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
	switch name {
	case scriptTrivial:
		return "return 1", nil, nil
	case scriptFixedWindow:
		src, err := lua.Source(lua.FixedWindow)
		if err != nil {
			return "", nil, fmt.Errorf("loadgen: %w", err)
		}
		// take 1 hit at Redis TIME from a limit of 10^9 a day (see lua.go
		// for the arguments).
		l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1_000_000_000, Window: 24 * time.Hour}
		day := strconv.FormatInt(l.WindowMicros(), 10)
		debt := strconv.FormatUint(l.MaxDebt(), 10)
		return src, []any{"take", "", "1000000000", day, "1", "", "", "", "0", debt}, nil
	}
	return "", nil, fmt.Errorf("loadgen: -script %q is not %s or %s", name, scriptTrivial, scriptFixedWindow)
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

// evalshaCaller returns a worker's call: pipeline EVALSHAs on random keys in
// one round trip. A reply whose first element is 0 (a denial) counts as
// denied, any other as admitted.
func evalshaCaller(client redis.UniversalClient, script *redis.Script, keys []string, args []any, pipeline int, rng *rand.Rand) callFunc {
	key := make([]string, 1)
	if pipeline == 1 {
		return func(ctx context.Context) (int, int, error) {
			key[0] = keys[rng.IntN(len(keys))]
			v, err := script.EvalSha(ctx, client, key, args...).Result()
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
			cmds[i] = script.EvalSha(ctx, pipe, []string{keys[rng.IntN(len(keys))]}, args...)
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
