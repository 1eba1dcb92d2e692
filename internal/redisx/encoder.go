package redisx

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Unsharded is the shard of a limit that is not split.
const Unsharded = -1

// Encoder encodes the script call that applies an Op to its limit's state:
// the EVALSHA command of the script of the limit's algorithm, with the KEYS
// of the state (of one shard, for a split limit) and the ARGV that the lua
// package lists. It is the one encoder of a script call: the Limiter, its
// tests and the load generator all use it. The table of algorithms
// (algorithms.Spec) says which script and which keys each algorithm takes.
// An Encoder is safe for concurrent use.
type Encoder struct {
	keys keySpace
	// slack is ARGV[9], how long every key is kept past its state's
	// expiry, in milliseconds.
	slack any
	args  argCache
	// scripts holds the script of each algorithm, by Algorithm.
	scripts []*script
}

// NewEncoder returns the Encoder of keys that start with prefix, which must
// not contain '{' or '}'; every key is kept slack longer than its state needs
// (ARGV[9]). It reads the embedded scripts, and does not contact Redis.
func NewEncoder(prefix string, slack time.Duration) (*Encoder, error) {
	keys, err := newKeySpace(prefix)
	if err != nil {
		return nil, err
	}
	if slack < 0 {
		return nil, fmt.Errorf("redisx: negative key slack %s", slack)
	}
	e := &Encoder{keys: keys, slack: strconv.FormatInt(slack.Milliseconds(), 10)}
	e.scripts = make([]*script, len(algorithms.Algorithms)+1)
	for _, a := range algorithms.Algorithms {
		// An algorithm counted with plain commands (counter.go) has a
		// script for its leases' settlements only.
		if e.scripts[a], err = loadScript(a.Spec()); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Command returns the EVALSHA command that applies op at now, in
// microseconds since the Unix epoch or "" for the Redis server's TIME, to
// the given shard of its limit (Unsharded for a limit that is not split):
// "evalsha", the script's digest, the number of keys, the KEYS and the
// ARGV. It fails when op is invalid (rate.Op.Validate; for its limit,
// the error wraps algorithms.ErrInvalidLimit).
func (e *Encoder) Command(op *rate.Op, shard int, now string) ([]any, error) {
	if err := op.Validate(); err != nil {
		return nil, fmt.Errorf("redisx: %w", err)
	}
	if op.Limit.Algorithm.Spec().Counter && op.Kind != rate.Settle {
		return nil, fmt.Errorf("redisx: %s is counted without a script", op.Limit.Algorithm)
	}
	return e.appendCommand(make([]any, 0, maxArgv), op, shard, now), nil
}

// LoadScripts loads the script of every algorithm into the script cache of
// every node that client reaches: the server, or each master and replica of
// a cluster (so that a replica promoted by a failover has them too), so
// that its commands run without falling back to EVAL.
func (e *Encoder) LoadScripts(ctx context.Context, client redis.UniversalClient) error {
	load := func(ctx context.Context, c redis.Scripter) error {
		for _, s := range e.scripts {
			if s == nil {
				continue
			}
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
	if cluster, ok := client.(*redis.ClusterClient); ok {
		return cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			return load(ctx, node)
		})
	}
	return load(ctx, client)
}

// script returns the script of algorithm a, which must be valid.
func (e *Encoder) script(a algorithms.Algorithm) *script { return e.scripts[a] }

// appendCommand is Command, appended to dst, for an op that is valid, with
// now boxed once by the caller for all the calls of a Do. It boxes what it
// must once per limit (argCache), and builds the keys in one string.
func (e *Encoder) appendCommand(dst []any, op *rate.Op, shard int, now any) []any {
	lim := shardLimit(op.Limit, shardCount(op), shard)
	capacity := lim.Capacity()
	hits := op.Hits
	// The op's kind decides the mode (ARGV[1]), the bound of the hits
	// (ARGV[5]), the receipt (ARGV[6], ARGV[7]) and what follows ARGV[10]:
	// tail, or a settlement's leases. The modes are constants, boxed
	// without allocating.
	var mode, at, seq, tail any = "take", "", "", nil
	switch op.Kind {
	case rate.Refund:
		mode, hits = "refund", min(hits, maxGivenBack)
		at, seq = receiptArgs(op.Receipt)
		if op.Receipt.Epoch != 0 {
			// A refund by a lease's receipt: ARGV[11], its epoch.
			tail = strconv.FormatInt(op.Receipt.Epoch, 10)
		}
	case rate.Settle:
		// Its hits and receipt go as a refund's; its leases follow.
		mode, hits = "settle", min(hits, maxGivenBack)
		at, seq = receiptArgs(op.Receipt)
	case rate.Charge:
		mode = "record"
		if op.Debt {
			mode = "charge"
		}
		// A charge records at most capacity + D, and is over the limit
		// whatever it asks beyond that.
		hits = min(hits, capacity+lim.MaxDebt()+1)
	default:
		// Asking for more than the capacity is denied whatever the excess.
		hits = min(hits, capacity+1)
		if hold := op.HoldMicros(); hold > 0 {
			// A lease's take: ARGV[11], only then.
			tail = strconv.FormatInt(hold, 10)
		}
	}
	la := e.args.get(lim)
	s := e.script(lim.Algorithm)
	dst = append(dst, "evalsha", s.shaArg)
	if s.window {
		// A settlement of leases of a counted limit: the count of each
		// window a lease was taken in (a lease taken ahead near a window's
		// end may be of the next one), and the first's end in place of a
		// receipt's time.
		n := len(dst)
		dst = append(dst, 0)
		var seen [2]int64
		windows := seen[:0]
		for _, ls := range op.Leases {
			i := lim.WindowIndex(time.UnixMicro(ls.Receipt.At))
			if !slices.Contains(windows, i) {
				windows = append(windows, i)
				dst = append(dst, e.counterKey(op, shard, i))
			}
		}
		dst[n] = len(windows)
		at = strconv.FormatInt(lim.WindowStart(windows[0]+1).UnixMicro(), 10)
	} else {
		dst = e.keys.appendKeys(dst, op.Identity(), shard, s.keys)
	}
	dst = append(dst, mode, now, la.requests, la.window, hitsArg(hits), at, seq, la.capacity, e.slack, la.debt)
	if mode == "settle" {
		return appendLeases(dst, op.Leases)
	}
	if tail != nil {
		dst = append(dst, tail)
	}
	return dst
}

// maxGivenBack bounds the hits of a refund (ARGV[5]). No state holds more
// than 4·MaxRequests hits (a sliding window counter's two windows of up to
// L + D recorded hits each, a count or a bucket in debt holding less), so
// giving back more gives back everything; the bound keeps the number exact
// in Lua.
const maxGivenBack = 4*algorithms.MaxRequests + 1

// receiptArgs returns ARGV[6] and ARGV[7] of a refund by receipt r: its time
// and sequence number, or "" and "" for the zero receipt.
func receiptArgs(r algorithms.Receipt) (at, seq any) {
	if r.At == 0 && r.Seq == 0 {
		return "", ""
	}
	return strconv.FormatInt(r.At, 10), strconv.FormatUint(r.Seq, 10)
}

// appendLeases appends the leases of a settlement as ARGV[11] on (see
// lua.go): their number, then each lease's eight numbers and its runs.
func appendLeases(dst []any, leases []algorithms.Lease) []any {
	dst = append(dst, strconv.Itoa(len(leases)))
	for i := range leases {
		ls := &leases[i]
		r := ls.Receipt
		closing := "0"
		if ls.Close {
			closing = "1"
		}
		dst = append(dst, strconv.FormatInt(r.At, 10), strconv.FormatUint(r.Seq, 10), strconv.FormatInt(r.Epoch, 10),
			strconv.FormatInt(holdMicros(ls.Hold), 10), strconv.FormatUint(ls.Size, 10), strconv.FormatUint(ls.Reported, 10),
			closing, strconv.Itoa(len(ls.Served)))
		for _, sv := range ls.Served {
			dst = append(dst, strconv.FormatInt(sv.At, 10), strconv.FormatUint(sv.Seq, 10), strconv.FormatUint(sv.N, 10))
		}
	}
	return dst
}

// holdMicros returns d in whole microseconds, cut to [0, MaxHold], as the
// states apply a hold.
func holdMicros(d time.Duration) int64 {
	return min(max(d, 0), algorithms.MaxHold).Microseconds()
}
