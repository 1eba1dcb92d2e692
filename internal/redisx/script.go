package redisx

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/lua"
)

// script is one Lua script, run by its SHA-1 digest with EVALSHA so that its
// text crosses the network only when a node does not have it cached.
type script struct {
	name string
	src  string
	sha  string
	// shaArg is sha boxed once, as EVALSHA's argument.
	shaArg any
	// keys are the suffixes of the keys it takes (algorithms.Spec.Keys).
	keys []string
	// window reports that it takes the count of one window of a limit
	// counted without a script (algorithms.Spec.SettleScript), whose key
	// the encoder names.
	window bool
}

// loadScript reads the embedded script of the algorithm that spec describes.
func loadScript(spec algorithms.Spec) (*script, error) {
	name := spec.Script
	if spec.Counter {
		name = spec.SettleScript
	}
	src, err := lua.Source(name)
	if err != nil {
		return nil, fmt.Errorf("redisx: %s: %w", spec.Name, err)
	}
	if len(spec.Keys) == 0 {
		return nil, fmt.Errorf("redisx: %s: the script takes no keys", spec.Name)
	}
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	return &script{name: name, src: src, sha: sha, shaArg: sha, keys: spec.Keys, window: spec.Counter}, nil
}

// scriptCall is one run of a script: its keys and arguments, and once run,
// the command holding its reply.
type scriptCall struct {
	// op is the Op the call runs, on shard (see Limiter.call); ctx is its
	// caller's context.
	op     rate.Op
	shard  int
	ctx    context.Context
	script *script
	// argv is the whole EVALSHA command: "evalsha", the digest, the number
	// of keys, the keys, then the script's ARGV (see lua.go).
	argv []any
	buf  [maxArgv]any       // argv's storage, allocated with the call
	cmd  *redis.IntSliceCmd // nil until sent
	// counter holds the commands of an op of a limit counted without a
	// script (counter.go); script, argv and cmd are then unused.
	counter *counterCall
	// sends counts the times the call was sent again after a failure that
	// proved it had not run; eval is set once a node lacked the script.
	sends int
	eval  bool
}

// maxArgv is the length of the longest argv that a scriptCall holds without
// allocating: the log's, with two keys and eleven ARGV (a lease's). A
// longer one is allocated.
const maxArgv = 3 + 2 + 11

// waiting reports whether the call's caller still waits for its answer.
func (c *scriptCall) waiting() bool { return c.ctx == nil || c.ctx.Err() == nil }

// result decodes the call's reply as its op's Result.
func (c *scriptCall) result() (algorithms.Result, error) {
	if c.counter != nil {
		res := c.counter.result(&c.op, c.counter.seen)
		if res.Receipt.At != 0 && c.shard != Unsharded {
			res.Receipt.Shard = uint32(c.shard)
		}
		return res, nil
	}
	r, err := decodeReply(c.cmd.Val())
	if err == nil {
		var res algorithms.Result
		if res, err = r.result(&c.op, c.shard); err == nil {
			return res, nil
		}
	}
	return algorithms.Result{}, fmt.Errorf("redisx: %s: %w", c.script.name, err)
}

// outcome returns what became of the call, as known at.
func (c *scriptCall) outcome(at time.Time) rate.Outcome {
	o := rate.Outcome{Op: c.op, Fate: rate.Unknown, At: at}
	if !c.sent() {
		o.Fate = rate.NotApplied
		return o
	}
	switch err := c.err(); {
	case err == nil:
		if r, err := c.result(); err == nil {
			o.Fate, o.Result = rate.Applied, r
		}
	case isNoScript(err), didNotRun(err):
		o.Fate = rate.NotApplied
	}
	return o
}

// outcomesOf returns what became of each of calls, as known at.
func outcomesOf(calls []*scriptCall, at time.Time) []rate.Outcome {
	out := make([]rate.Outcome, len(calls))
	for i, c := range calls {
		out[i] = c.outcome(at)
	}
	return out
}

// sent reports whether the call's commands were made to be sent.
func (c *scriptCall) sent() bool {
	if c.counter != nil {
		return c.counter.incr != nil
	}
	return c.cmd != nil
}

// err returns the error of the call's commands, once sent.
func (c *scriptCall) err() error {
	if c.counter != nil {
		return c.counter.err()
	}
	return c.cmd.Err()
}

// name names what the call runs, for errors.
func (c *scriptCall) name() string {
	if c.counter != nil {
		return c.op.Limit.Algorithm.String()
	}
	return c.script.name
}

// command returns a new command that runs c: EVALSHA, or EVAL once a node
// answered NOSCRIPT. Every script replies with an array of integers, which
// the command reads straight into a []int64, boxing none. Any other reply is
// the command's error (a bulk string that holds an integer is read as that
// integer, a nil as 0); since the rest of the connection's replies can no
// longer be told apart then, the pipeline's later commands fail with it.
func (c *scriptCall) command(ctx context.Context) *redis.IntSliceCmd {
	args := c.argv
	if c.eval {
		args = slices.Clone(args)
		args[0], args[1] = "eval", c.script.src
	}
	cmd := redis.NewIntSliceCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// sentOnce is a script's command that go-redis must never send again on its
// own. go-redis sends a command again after a read timeout or a broken
// connection, and a pipeline again after a retryable error reply to its first
// command, although the command may have run: for a script that takes hits,
// that counts them twice. With NoRetry it still follows MOVED and ASK
// redirects and redials a cluster node it could not reach, which never
// re-run anything; execScripts sends again only what certainly did not run.
type sentOnce struct{ redis.Cmder }

// NoRetry tells go-redis not to send the command again.
func (sentOnce) NoRetry() bool { return true }

// execScripts runs calls in one pipeline with EVALSHA (a cluster client
// splits it per node) and leaves each call's outcome in its command. A call is sent again, in a further pipeline of such calls,
// only when its failure proves that it did not run: a node that lacked the
// script (NOSCRIPT: sent again once, with EVAL, which also caches it there),
// and up to retries times a connection that could not be had (a refused or
// failed dial, no free connection in the pool) or a server that refused the
// command before running it (LOADING, READONLY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN), while ctx lasts and its own caller still waits. A call whose
// reply was lost after it was written (a read timeout, a connection broken
// mid-reply) may have run, and is never sent again.
func execScripts(ctx context.Context, client redis.UniversalClient, calls []*scriptCall, retries int, slack time.Duration) {
	pending := calls
	for len(pending) > 0 {
		pipe := client.Pipeline()
		for _, c := range pending {
			if c.counter != nil {
				c.counter.process(ctx, pipe, slack)
				continue
			}
			c.cmd = c.command(ctx)
			_ = pipe.Process(ctx, sentOnce{c.cmd})
		}
		// Exec's error is the first failed command's; each command is
		// inspected instead, except when the connection could not be set up
		// (a refused AUTH: NOAUTH, WRONGPASS): go-redis reports that from
		// Exec only, and the commands would look answered with nothing.
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			// A failure of the connection's setup leaves every command
			// without an error of its own.
			setup := true
			for _, c := range pending {
				if c.counter != nil && (c.counter.incr.Err() != nil || c.counter.set != nil && c.counter.set.Err() != nil) ||
					c.counter == nil && (c.cmd.Err() != nil || c.cmd.Val() != nil) {
					setup = false
				}
			}
			for _, c := range pending {
				switch {
				case c.counter != nil:
					if set := c.counter.set; set != nil && c.counter.incr.Err() == nil && set.Err() != nil && set.Err() != redis.Nil {
						c.counter.incr.SetErr(set.Err())
					} else if setup {
						c.counter.incr.SetErr(err)
					}
				case c.cmd.Err() == nil && c.cmd.Val() == nil:
					c.cmd.SetErr(err)
				}
			}
		}

		again := pending[:0:0]
		for _, c := range pending {
			err := c.err()
			switch {
			case err == nil, !c.waiting():
			case isNoScript(err) && !c.eval:
				c.eval = true
				again = append(again, c)
			case c.sends < retries && ctx.Err() == nil && didNotRun(err):
				c.sends++
				again = append(again, c)
			}
		}
		pending = again
	}
	settleCounters(calls)
	correct(client, calls)
}

// correct sends, in one more pipeline, the give-backs of the counted calls
// that answered (counterCall.correction), and waits for it: an op is
// answered once its count is as it leaves it. Each give-back is sent once;
// one that fails leaves a count too high (so later takes in its window are
// denied, not admitted) or, for a refund, below zero (which denies too),
// until the window ends.
func correct(client redis.UniversalClient, calls []*scriptCall) {
	var pipe redis.Pipeliner
	for _, c := range calls {
		cc := c.counter
		if cc == nil || cc.give == 0 {
			continue
		}
		if pipe == nil {
			pipe = client.Pipeline()
		}
		cc.fix = redis.NewIntCmd(context.Background(), "incrby", cc.key, -cc.give)
		_ = pipe.Process(context.Background(), sentOnce{cc.fix})
	}
	if pipe == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), correctionTimeout)
	defer cancel()
	_, _ = pipe.Exec(ctx)
}

// correctionTimeout bounds the wait for the give-backs of counted calls.
const correctionTimeout = time.Second

// clientRetries returns how often client may send a script again that
// certainly did not run: its MaxRetries, or for a cluster the MaxRedirects
// that bound its attempts.
func clientRetries(client redis.UniversalClient) int {
	switch c := client.(type) {
	case *redis.Client:
		return max(c.Options().MaxRetries, 0)
	case *redis.ClusterClient:
		return max(c.Options().MaxRedirects, 0)
	}
	return 0
}

// notRunPrefixes are the error replies with which Redis refuses a command
// without running it.
var notRunPrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}

// didNotRun reports whether err proves that its command never ran: it was
// never written (no connection could be had), or the server refused it.
func didNotRun(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	for _, prefix := range notRunPrefixes {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return false
}

// callsError returns the first failure among calls that have run.
func callsError(calls []*scriptCall) error {
	for _, c := range calls {
		if err := c.err(); err != nil {
			return runError(c.name(), err)
		}
	}
	return nil
}

// runError wraps the error of running script name, marking the replies by
// which Redis says it cannot serve for now with rate.ErrUnavailable.
func runError(name string, err error) error {
	for _, prefix := range []string{"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY"} {
		if redis.HasErrorPrefix(err, prefix) {
			return fmt.Errorf("redisx: run %s: %w: %w", name, rate.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("redisx: run %s: %w", name, err)
}

// isNoScript reports whether err says that the script is not in the node's
// cache.
func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// Prepare loads every script into the script cache of every node Redis has
// (see Encoder.LoadScripts), and opens a connection to each. Run it when the
// backend becomes reachable, so that the first decisions do not pay for
// connecting and for sending the scripts' text.
func (l *Limiter) Prepare(ctx context.Context) error { return l.enc.LoadScripts(ctx, l.client) }
