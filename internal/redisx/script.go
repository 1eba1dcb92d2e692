package redisx

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/lua"
)

// script is one Lua script, run by its SHA-1 digest with EVALSHA so that its
// text crosses the network only when a node does not have it cached.
type script struct {
	name string
	src  string
	sha  string
}

// loadScript reads the embedded script called name.
func loadScript(name string) (*script, error) {
	src, err := lua.Source(name)
	if err != nil {
		return nil, fmt.Errorf("redisx: %w", err)
	}
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}, nil
}

// scriptCall is one run of a script: its keys and arguments, and once run,
// the command holding its reply.
type scriptCall struct {
	script *script
	keys   []string
	args   []any
	cmd    *redis.Cmd
}

// runScripts runs every call in one pipelined round trip with EVALSHA (a
// cluster client splits the pipeline per node). The calls that a node answers
// with NOSCRIPT, because its script cache was flushed or it restarted or
// failed over, run again in a second pipeline with EVAL, which also caches the
// script there; nothing else is retried. It returns an error wrapping the
// first failure of any call, and nil when every call has a reply.
func runScripts(ctx context.Context, client redis.UniversalClient, calls []*scriptCall) error {
	execScripts(ctx, client, calls)
	return callsError(calls)
}

// execScripts runs calls as runScripts does, leaving each call's outcome in
// its command.
func execScripts(ctx context.Context, client redis.UniversalClient, calls []*scriptCall) {
	if len(calls) == 0 {
		return
	}
	pipe := client.Pipeline()
	for _, c := range calls {
		c.cmd = pipe.EvalSha(ctx, c.script.sha, c.keys, c.args...)
	}
	// Exec's error is the first failed command's; each command is inspected
	// instead.
	settle(pipe.Exec(ctx))

	var missing []*scriptCall
	for _, c := range calls {
		if isNoScript(c.cmd.Err()) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return
	}
	pipe = client.Pipeline()
	for _, c := range missing {
		c.cmd = pipe.Eval(ctx, c.script.src, c.keys, c.args...)
	}
	settle(pipe.Exec(ctx))
}

// settle gives err, the error of a pipeline's Exec, to each of its commands
// that has neither a reply nor an error of its own: when the connection
// cannot be set up (a refused AUTH: NOAUTH, WRONGPASS), go-redis reports it
// from Exec only, and the commands would otherwise look answered with
// nothing.
func settle(cmds []redis.Cmder, err error) {
	if err == nil {
		return
	}
	for _, c := range cmds {
		if cmd, ok := c.(*redis.Cmd); ok && cmd.Err() == nil && cmd.Val() == nil {
			cmd.SetErr(err)
		}
	}
}

// callsError returns the first failure among calls that have run.
func callsError(calls []*scriptCall) error {
	for _, c := range calls {
		if err := c.cmd.Err(); err != nil {
			return runError(c.script.name, err)
		}
	}
	return nil
}

// runError wraps the error of running script name, marking the replies by
// which Redis says it cannot serve for now with algorithms.ErrUnavailable.
func runError(name string, err error) error {
	for _, prefix := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY"} {
		if redis.HasErrorPrefix(err, prefix) {
			return fmt.Errorf("redisx: run %s: %w: %w", name, algorithms.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("redisx: run %s: %w", name, err)
}

// isNoScript reports whether err says that the script is not in the node's
// cache.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// Prepare loads every script into the script cache of every node Redis has:
// the server, or each master and replica of a cluster (so that a replica
// promoted by a failover has them too). It also opens a connection to each.
// Run it when the backend becomes reachable, so that the first decisions do
// not pay for connecting and for sending the scripts' text.
func (l *Limiter) Prepare(ctx context.Context) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, s := range l.scripts[algorithms.FixedWindow:] {
			sha, err := c.ScriptLoad(ctx, s.src).Result()
			if err != nil {
				return fmt.Errorf("redisx: load %s: %w", s.name, err)
			}
			if sha != s.sha {
				return fmt.Errorf("redisx: load %s: server digest %s, want %s", s.name, sha, s.sha)
			}
		}
		return nil
	}
	if cluster, ok := l.client.(*redis.ClusterClient); ok {
		return cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			return load(ctx, node)
		})
	}
	return load(ctx, l.client)
}
