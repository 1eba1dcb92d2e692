package redisx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// A limit of an algorithm counted with plain commands (algorithms.Spec.Counter,
// the fixed window) keeps, for each window, the window's count in a key of its
// own, as envoyproxy/ratelimit counts:
//
//	<prefix>{<identity>}:w<index>
//
// under the limit's hash tag, created at 0 with its expiry (the window's end)
// by SET NX PX, and added to by INCRBY in the same pipeline: every op that
// changes a count is those two commands, with no script, and one that only
// reads it (a check, a take of more than the limit can hold) is a GET. A take of n adds n and is admitted when the
// count it reads is at most L; a denied take, or a charge recorded past what a
// count may hold, gives back the part it added beyond, with one more INCRBY
// before the op is answered. A refund subtracts, and adds back what it took
// below zero. So a count can pass L, or drop below zero, only for the moment
// between an op and its give-back: a take that meets a count another op will
// give back is denied (never admitted: admission needs the count before it to
// be at least zero and the count after it at most L), and it is transient.
// Sequentially, every op decides exactly as algorithms.FixedWindowState.
//
// A limit whose state may owe a debt (Op.Debt: its rule charges with debt)
// keeps its whole state in the limit's state key instead, a hash of the
// window, the count, the debt and when it is dropped, as the Go state holds
// them; its ops read it, apply the Go state's maths and write it back in an
// optimistic transaction (WATCH, MULTI, EXEC), which is tried again when
// another op changed the state meanwhile.

// counterCall is the commands of an op on a counted limit's window.
type counterCall struct {
	lim algorithms.Limit // the limit of the op's shard
	key string
	// n is the op's hits after the bound a state may hold, and delta what
	// the INCRBY adds: n, -n or 0. lease reports a lease's take.
	n     uint64
	delta int64
	lease bool
	// at is now, and end the end of the window of the count, in µs.
	at, end int64
	set     *redis.StatusCmd
	incr    *redis.IntCmd // for an op with delta 0, a GET read as a number
	// expiry, for a lease's take, reads the count's expiry (PEXPIRETIME),
	// which names it as the lease's epoch.
	expiry *redis.IntCmd
	// seen is the count the op leaves before its give-back, as if the
	// give-backs of the ops before it in its pipeline were made (see
	// settleCounters).
	seen int64
	// give is what the op gives back once its count is read (see
	// correction); fix its command, when it was sent.
	give int64
	fix  *redis.IntCmd
}

// counterKeySuffix starts the suffix of a window's count key.
const counterKeySuffix = ":w"

// counterCall builds the commands of op, on shard, at now (µs).
func (e *Encoder) counterCall(op *rate.Op, shard int, now int64) *counterCall {
	lim := shardLimit(op.Limit, shardCount(op), shard)
	t := time.UnixMicro(now)
	i := lim.WindowIndex(t)
	c := &counterCall{lim: lim, at: now, end: lim.WindowStart(i + 1).UnixMicro()}
	capacity := lim.Capacity()
	switch op.Kind {
	case rate.Refund:
		c.n = min(op.Hits, 2*algorithms.MaxRequests+1)
		// With a receipt, only a take of this window is given back.
		if noReceipt(op.Receipt) || lim.WindowIndex(time.UnixMicro(op.Receipt.At)) == i {
			c.delta = -int64(c.n)
		}
	case rate.Charge:
		c.n = min(op.Hits, capacity+lim.MaxDebt()+1)
		c.delta = int64(c.n)
	default:
		c.n = min(op.Hits, capacity+1)
		if c.n <= capacity {
			c.delta = int64(c.n)
		}
		c.lease = op.Leasing() && c.delta > 0
	}
	c.key = e.counterKey(op, shard, i)
	return c
}

// counterKey returns the key of the count of window i of op's limit, on
// shard.
func (e *Encoder) counterKey(op *rate.Op, shard int, i int64) string {
	var digits [20]byte
	suffix := string(strconv.AppendInt(append(digits[:0], counterKeySuffix...), i, 10))
	return e.keys.appendKeys(nil, op.Identity(), shard, []string{suffix})[1].(string)
}

// CounterCommands returns the commands that apply op at now to the given
// shard of its limit, for an algorithm counted without a script
// (algorithms.Spec.Counter) and an op that owes nothing and is no settlement
// (settlements are script calls, Command): SET NX PX and INCRBY
// of the window's count, or GET when the op only reads it. The load
// generator sends them as the Limiter does.
func (e *Encoder) CounterCommands(op *rate.Op, shard int, now time.Time) ([][]any, error) {
	if err := op.Validate(); err != nil {
		return nil, fmt.Errorf("redisx: %w", err)
	}
	if !op.Limit.Algorithm.Spec().Counter || op.Debt {
		return nil, fmt.Errorf("redisx: %s is not counted without a script", op.Limit.Algorithm)
	}
	if op.Kind == rate.Settle {
		return nil, errors.New("redisx: a settlement is a script call (Encoder.Command)")
	}
	c := e.counterCall(op, shard, now.UnixMicro())
	pipe := recorder{}
	c.process(context.Background(), &pipe, 0)
	return pipe.args, nil
}

// recorder is a redis.Pipeliner that only keeps the arguments of the
// commands processed through it.
type recorder struct {
	redis.Pipeliner
	args [][]any
}

func (r *recorder) Process(_ context.Context, cmd redis.Cmder) error {
	r.args = append(r.args, cmd.Args())
	return nil
}

// noReceipt reports whether r is the zero receipt, as algorithms does.
func noReceipt(r algorithms.Receipt) bool { return r.At == 0 && r.Seq == 0 }

// process adds the call's commands to pipe: the count key set to 0 with its
// expiry when it does not exist, then INCRBY.
func (c *counterCall) process(ctx context.Context, pipe redis.Pipeliner, slack time.Duration) {
	if c.delta == 0 {
		c.set = nil
		c.incr = redis.NewIntCmd(ctx, "get", c.key)
		_ = pipe.Process(ctx, sentOnce{c.incr})
		return
	}
	ttl := (c.end-c.at+999)/1000 + slack.Milliseconds() + countJitter()
	c.set = redis.NewStatusCmd(ctx, "set", c.key, "0", "px", max(ttl, 1), "nx")
	c.incr = redis.NewIntCmd(ctx, "incrby", c.key, c.delta)
	_ = pipe.Process(ctx, sentOnce{c.set})
	_ = pipe.Process(ctx, sentOnce{c.incr})
	if c.lease {
		c.expiry = redis.NewIntCmd(ctx, "pexpiretime", c.key)
		_ = pipe.Process(ctx, sentOnce{c.expiry})
	}
}

// countJitter returns the milliseconds, up to a second, a new count's key
// lives beyond its window's end and the slack: drawn for each count, so
// that its expiry tells it from another count of the same window made
// after it was lost (a lease's epoch, fixed_window_settle.lua).
func countJitter() int64 { return rand.Int64N(1000) }

// answered reports whether the call's count was read; a GET of a key that
// is not there reads 0.
func (c *counterCall) answered() bool {
	if c.incr == nil {
		return false
	}
	if c.incr.Err() == redis.Nil {
		c.incr.SetErr(nil)
		c.incr.SetVal(0)
	}
	return c.incr.Err() == nil
}

// err returns the error of the call's commands.
func (c *counterCall) err() error {
	if c.set != nil {
		if err := c.set.Err(); err != nil && err != redis.Nil {
			return err
		}
	}
	if c.answered() {
		return nil
	}
	return c.incr.Err()
}

// settleCounters works out, in the order of the pipeline that carried them,
// the count each counted call that answered leaves before its give-back,
// and the give-back: an op is decided on its INCRBY's count less the
// give-backs of the ops before it on the same key in the pipeline, as if
// those had been made before it, so that the ops of one pipeline decide as
// they would one after the other.
func settleCounters(calls []*scriptCall) {
	var pending map[string]int64
	for _, c := range calls {
		cc := c.counter
		if cc == nil || !cc.answered() {
			continue
		}
		cc.seen = cc.incr.Val() - pending[cc.key]
		if give := cc.correction(&c.op, cc.seen); give != 0 {
			if pending == nil {
				pending = make(map[string]int64)
			}
			pending[cc.key] += give
		}
	}
}

// correction sets give to what the op gives back, given the count v its
// INCRBY returned, and returns it: a denied take what it added; a charge
// what it added beyond L + D, the most a count holds; a refund what it took
// below zero (as a negative give-back).
func (c *counterCall) correction(op *rate.Op, v int64) int64 {
	L, most := int64(c.lim.Requests), int64(c.lim.Requests+c.lim.MaxDebt())
	switch {
	case op.Kind == rate.Refund:
		if v < 0 {
			c.give = max(v, c.delta)
		}
	case op.Kind == rate.Charge:
		if v > most {
			c.give = min(c.delta, v-most)
		}
	case c.delta > 0 && (v > L || v-c.delta < 0):
		c.give = c.delta
	}
	return c.give
}

// result returns what op decided, given the count v its INCRBY returned, as
// algorithms.FixedWindowState decides it with no debt.
func (c *counterCall) result(op *rate.Op, v int64) algorithms.Result {
	L := c.lim.Requests
	untilEnd := time.Duration(c.end-c.at) * time.Microsecond
	remaining := func(count int64) uint64 {
		if count <= 0 {
			return L
		}
		return L - min(uint64(count), L)
	}
	admitted := func(count int64, r algorithms.Receipt) algorithms.Result {
		res := algorithms.Result{Allowed: true, Remaining: remaining(count), Receipt: r}
		if count > 0 {
			res.ResetAfter = untilEnd
		}
		return res
	}
	switch {
	case op.Kind == rate.Refund:
		return admitted(max(v, 0), algorithms.Receipt{})
	case op.Kind == rate.Charge:
		before := v - c.delta
		within := op.Hits <= L && before >= 0 && uint64(before)+op.Hits <= L
		// Up to L + D, the most a count holds; one already above it (under
		// a limit since lowered) keeps what it holds.
		count, most := v, int64(L+c.lim.MaxDebt())
		if v > most {
			count = max(before, most)
		}
		res := algorithms.Result{ResetAfter: untilEnd}
		if count <= int64(L) {
			res = admitted(count, algorithms.Receipt{})
		}
		res.Allowed = within
		return res
	case c.n > c.lim.Capacity():
		return algorithms.Result{Remaining: remaining(v), ResetAfter: c.lim.Window}
	}
	before := v - c.delta
	if before >= 0 && v <= int64(L) {
		res := admitted(v, algorithms.Receipt{At: c.at})
		if c.lease && c.expiry != nil && c.expiry.Err() == nil && c.expiry.Val() > 0 {
			// A lease's receipt names the count by its expiry; the state
			// is the count, of this window.
			res.Receipt.Epoch = c.expiry.Val()
			res.State = algorithms.FixedWindowStateOf(c.lim.WindowIndex(time.UnixMicro(c.at)), uint64(v), 0, 0).WithEpoch(res.Receipt.Epoch)
		}
		return res
	}
	// A count outside [0, L] holds what another op adds or takes for the
	// moment before its give-back, or was counted under a limit since
	// lowered: a take denied on it may be admitted once the give-back is
	// made, and is marked so that no denial of it is remembered.
	return algorithms.Result{Remaining: remaining(before), ResetAfter: untilEnd,
		Transient: before < 0 || before > int64(L)}
}
