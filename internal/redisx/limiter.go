package redisx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Limiter applies rate limit operations to state kept in Redis, each Op as one
// atomic Lua script on its limit's keys (see the lua package), so any number
// of Limiters on any number of hosts share one exact view. It works with a
// standalone server, Sentinel and Redis Cluster alike. It implements
// rate.Limiter and is safe for concurrent use.
type Limiter struct {
	client redis.UniversalClient
	enc    *Encoder
	clock  func() time.Time
	intN   func(n int) int
	co     *coalescer
	// slack is how much longer than their state needs the keys of the ops
	// decided without a script are kept (the scripts' is the Encoder's).
	slack time.Duration
	// server follows Redis's clock, for the ops decided without a script
	// (counter.go) when there is no injected clock.
	server *serverClock
	// outcomes is told what became of the ops of failed calls
	// (WithOutcomes); nil tells no one.
	outcomes *rate.Outcomes
}

// clockSlack is how much longer keys live when the Limiter's clock is not the
// server's.
const clockSlack = 24 * time.Hour

// Option configures a Limiter.
type Option func(*limiterOptions)

type limiterOptions struct {
	prefix   string
	clock    func() time.Time
	intN     func(n int) int
	grace    time.Duration
	outcomes *rate.Outcomes
}

// WithOutcomes reports to o what became of the ops of every call that
// fails (see Limiter.Do).
func WithOutcomes(o *rate.Outcomes) Option {
	return func(lo *limiterOptions) { lo.outcomes = o }
}

// WithGrace sets how long a pipeline keeps waiting for its answers after the
// latest deadline of its callers, so that the Limiter learns what became of
// the ops of callers that gave up (see Limiter.Do). Each read is still
// bounded by the client's read timeout. Without it, or with 0, a pipeline
// waits no longer than its callers.
func WithGrace(d time.Duration) Option {
	return func(o *limiterOptions) { o.grace = d }
}

// WithKeyPrefix starts every key the Limiter writes with prefix; without
// it, keys have no prefix. The prefix must not contain '{' or '}'.
func WithKeyPrefix(prefix string) Option {
	return func(o *limiterOptions) { o.prefix = prefix }
}

// WithClock makes the Limiter decide at now() instead of at the Redis server's
// TIME. It is meant for tests; replicas in production share Redis's clock.
// Redis still expires keys by its own clock, which now() need not follow, so
// every key is then kept clockSlack longer than its state needs; state kept
// past that point behaves exactly as a new one would, so only its memory is
// spent.
func WithClock(now func() time.Time) Option {
	return func(o *limiterOptions) { o.clock = now }
}

// WithRandom sets how the Limiter picks a shard of a split limit: intN(n)
// returns an integer in [0, n). It must be safe for concurrent use. The
// default is math/rand/v2's IntN.
func WithRandom(intN func(n int) int) Option {
	return func(o *limiterOptions) { o.intN = intN }
}

// NewLimiter returns a Limiter that keeps its state in the Redis that client
// reaches: a *redis.Client, *redis.ClusterClient or a failover client. Its
// concurrent Do calls share pipelines: up to pipelines of them, at least 1,
// are in flight at once, each carrying the calls that were waiting when it
// left. It does not contact Redis; scripts are loaded on first use.
func NewLimiter(client redis.UniversalClient, pipelines int, opts ...Option) (*Limiter, error) {
	if client == nil {
		return nil, errors.New("redisx: nil client")
	}
	o := limiterOptions{intN: rand.IntN}
	for _, opt := range opts {
		opt(&o)
	}
	var slack time.Duration
	if o.clock != nil {
		slack = clockSlack
	}
	enc, err := NewEncoder(o.prefix, slack)
	if err != nil {
		return nil, err
	}
	switch {
	case o.intN == nil:
		return nil, errors.New("redisx: nil random source")
	case o.grace < 0:
		return nil, errors.New("redisx: negative grace")
	case pipelines < 1:
		return nil, fmt.Errorf("redisx: coalescing needs at least 1 pipeline in flight, not %d", pipelines)
	}
	l := &Limiter{client: client, enc: enc, clock: o.clock, intN: o.intN, slack: slack, outcomes: o.outcomes}
	if o.clock == nil {
		l.server = newServerClock(client)
		// The ops decided without a script read Redis's clock as the
		// Limiter follows it, which may be off by part of a round trip.
		l.slack = serverClockMargin
	}
	l.co = newCoalescer(client, pipelines, o.grace, l.slack)
	return l, nil
}

// Close stops the Limiter's coalescing workers; Do then fails. It does not
// close the client.
func (l *Limiter) Close() {
	l.co.close()
	if l.server != nil {
		l.server.close()
	}
}

// maxBatch bounds the calls of one Do that travel to Redis together. A
// larger Do sends its calls in batches of maxBatch, one batch after the
// other, each once the one before has been answered: the calls of other
// requests queued meanwhile share the next pipeline with its next batch
// instead of waiting behind all of it, and when its caller gives up, the
// batches not yet sent never are. Envoy's requests, of a few descriptors,
// travel whole.
const maxBatch = 64

// run sends calls, coalesced with other Do calls', in batches of at most maxBatch calls (the first of them in b, which may be
// nil). When it fails, what became of each call is reported to out: the
// calls of the batches answered before as applied, those of the batches
// never sent as not applied, and those of the batch that failed by the
// coalescer, after the pipeline of a caller that gave up has ended.
func (l *Limiter) run(ctx context.Context, calls []*scriptCall, b *batch, out *rate.Outcomes) error {
	for _, c := range calls {
		c.ctx = ctx
	}
	for sent := 0; sent < len(calls); sent += maxBatch {
		if sent > 0 {
			b = nil
		}
		if err := l.runBatch(ctx, calls[sent:min(sent+maxBatch, len(calls))], b, out); err != nil {
			if sent > 0 {
				out.Report(outcomesOf(calls[:sent], time.Now()))
			}
			if rest := calls[min(sent+maxBatch, len(calls)):]; len(rest) > 0 {
				out.Report(outcomesOf(rest, time.Now()))
			}
			return err
		}
	}
	return nil
}

// runBatch sends one batch of calls in b (nil: a new batch); the
// coalescer reports what became of them to out when it fails.
func (l *Limiter) runBatch(ctx context.Context, calls []*scriptCall, b *batch, out *rate.Outcomes) error {
	if b == nil {
		b = new(batch)
	}
	return l.co.run(ctx, calls, b, out)
}

// Do applies ops, each atomically on its own limit's state, and returns one
// Result per Op in the same order (see rate.Limiter). All ops travel in one
// pipelined round trip; a cluster client splits it per node.
//
// An Op with Shards = N > 1 splits its limit over N states (fewer when the
// limit is smaller than N, so that every shard can admit) whose limits sum to
// the limit exactly. A take goes to a random shard; when that shard denies, it
// tries exactly one other shard, which costs a second round trip shared by all
// such ops of the call, and the Result is that shard's. Result.Receipt.Shard
// names the shard that decided, and a refund with that receipt goes back to
// it; a refund without a receipt goes to a random shard. A charge goes to a
// random shard and is recorded there, over that shard's limit or not.
//
// Do returns an error wrapping algorithms.ErrInvalidLimit when an Op's limit
// is invalid, an error when an Op is otherwise invalid (rate.Op.Validate),
// and an error wrapping the Redis or context error when Redis
// could not decide. What became of each op of such a call is reported to
// the Limiter's Outcomes (WithOutcomes): at once for the ops that certainly
// did not run and those whose answers are in, and for the ops of a call
// whose caller gave up while its pipeline was under way, once that
// pipeline's answers arrive (see WithGrace) or it fails, from the
// Limiter's goroutine.
// A script is never sent twice once it may have run (see execScripts):
// scripts missing from a node's cache are loaded and run again, and a script
// that certainly did not run is sent again as the client's MaxRetries allow;
// nothing else is retried.
func (l *Limiter) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	debts, err := validate(ops)
	if err != nil {
		return nil, err
	}
	if debts > 0 {
		return l.doWithDebts(ctx, ops)
	}
	// The frame that waits for Redis is kept small (prepare and answer do
	// the work): a request's goroutine then fits the stack it starts with.
	d := l.prepare(ops)
	if err := l.run(ctx, d.calls, d.b, l.outcomes); err != nil {
		return nil, err
	}
	again, err := l.answer(ops, d)
	if err != nil || len(again) == 0 {
		return d.results, err
	}
	return l.retry(ctx, ops, d, again)
}

// doing is what one Do sends and reads back.
type doing struct {
	results []algorithms.Result
	calls   []*scriptCall
	b       *batch
}

// prepare builds the calls of ops. One allocation holds what a decision of
// one op needs, the usual request; several ops take one for each slice.
//
//go:noinline
func (l *Limiter) prepare(ops []rate.Op) doing {
	var d doing
	if len(ops) == 1 {
		one := new(oneOp)
		d.results, d.calls, d.b = one.result[:], one.calls[:], &one.batch
		d.calls[0] = &one.call
	} else {
		d.results = make([]algorithms.Result, len(ops))
		d.calls = make([]*scriptCall, len(ops))
		store := make([]scriptCall, len(ops))
		for i := range d.calls {
			d.calls[i] = &store[i]
		}
	}
	var now any = l.now() // boxed once for every call
	micros := l.micros()
	for i := range ops {
		l.call(d.calls[i], &ops[i], l.pickShard(&ops[i]), now, micros)
	}
	return d
}

// answer reads the results of d's calls, and returns the ops denied by the
// shard they went to that may try another.
//
//go:noinline
func (l *Limiter) answer(ops []rate.Op, d doing) ([]int, error) {
	var again []int
	for i, c := range d.calls {
		r, err := c.result()
		if err != nil {
			l.outcomes.Report(outcomesOf(d.calls, time.Now()))
			return nil, err
		}
		d.results[i] = r
		// A charge is recorded wherever it lands, so it tries no other
		// shard.
		if n := shardCount(&ops[i]); ops[i].Kind == rate.Take && !r.Allowed && n > 1 {
			again = append(again, i)
		}
	}
	return again, nil
}

// retry sends again, to another shard each, the ops at indexes again that
// their first shard denied, and answers them with that shard's results.
func (l *Limiter) retry(ctx context.Context, ops []rate.Op, d doing, again []int) ([]algorithms.Result, error) {
	first := d.calls
	calls := make([]*scriptCall, 0, len(again))
	now, micros := any(l.now()), l.micros()
	for _, i := range again {
		// Another shard, uniformly among the other n−1.
		other := l.intN(shardCount(&ops[i]) - 1)
		if other >= first[i].shard {
			other++
		}
		calls = append(calls, l.call(new(scriptCall), &ops[i], other, now, micros))
	}
	err := l.run(ctx, calls, nil, l.outcomes)
	if err == nil {
		for k, c := range calls {
			var r algorithms.Result
			if r, err = c.result(); err != nil {
				break
			}
			d.results[again[k]] = r
		}
	}
	if err != nil {
		// The first round ran: its answers, and those of the second
		// round that could be read, are what became of the ops. (A
		// second round that failed is reported by run.)
		applied := make([]rate.Outcome, len(ops))
		at := time.Now()
		for i := range ops {
			applied[i] = rate.Outcome{Op: ops[i], Fate: rate.Applied, Result: d.results[i], At: at}
		}
		l.outcomes.Report(applied)
		return nil, err
	}
	return d.results, nil
}

// validate checks the limits of ops, and returns how many of them go to
// the whole state of a limit that may owe (owes). It is a function of its
// own so that Do's frame, which waits for Redis, stays small.
//
//go:noinline
func validate(ops []rate.Op) (int, error) {
	debts := 0
	for i := range ops {
		if err := ops[i].Validate(); err != nil {
			return 0, fmt.Errorf("redisx: op %d: %w", i, err)
		}
		if owes(&ops[i]) {
			debts++
		}
	}
	return debts, nil
}

// doWithDebts is Do for ops among which some go to the whole state of a
// limit that may owe (see doDebt): those, one transaction each, in order,
// and then the others together, as Do sends them. When one fails, what
// became of each op is reported to the Limiter's Outcomes: the ops before it applied,
// it unknown (its transaction may have run), the others not applied.
func (l *Limiter) doWithDebts(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	results := make([]algorithms.Result, len(ops))
	var rest []rate.Op
	var index []int
	for i := range ops {
		if !owes(&ops[i]) {
			rest = append(rest, ops[i])
			index = append(index, i)
			continue
		}
		r, err := l.doDebt(ctx, &ops[i], l.pickShard(&ops[i]))
		if err != nil {
			at := time.Now()
			fates := make([]rate.Outcome, len(ops))
			for j := range ops {
				fates[j] = rate.Outcome{Op: ops[j], Fate: rate.NotApplied, At: at}
				switch {
				case j == i:
					fates[j].Fate = rate.Unknown
				case j < i && owes(&ops[j]):
					fates[j].Fate, fates[j].Result = rate.Applied, results[j]
				}
			}
			l.outcomes.Report(fates)
			return nil, err
		}
		results[i] = r
	}
	if len(rest) > 0 {
		got, err := l.Do(ctx, rest)
		if err != nil {
			return nil, err
		}
		for k, i := range index {
			results[i] = got[k]
		}
	}
	return results, nil
}

// now returns the injected clock's time as a script argument, or "" for the
// server's TIME.
func (l *Limiter) now() string {
	if l.clock == nil {
		return ""
	}
	return strconv.FormatInt(l.clock().UnixMicro(), 10)
}

// pickShard returns the shard op goes to first: Unsharded when its limit is
// not split, the receipt's shard for a refund that has one, and a random
// shard otherwise.
func (l *Limiter) pickShard(op *rate.Op) int {
	n := shardCount(op)
	if n <= 1 {
		return Unsharded
	}
	if op.Loosens() && op.Receipt != (algorithms.Receipt{}) && int(op.Receipt.Shard) < n {
		return int(op.Receipt.Shard)
	}
	return l.intN(n)
}

// shardCount returns how many states op's limit is split over: Op.Shards, but
// no more than the limit (and the burst of a token bucket), so that every
// shard's share is at least one; 1 means not split.
func shardCount(op *rate.Op) int {
	n := uint64(op.Shards)
	n = min(n, op.Limit.Requests, op.Limit.Capacity())
	if n <= 1 {
		return 1
	}
	return int(n)
}

// shardLimit returns shard i's share of l when l is split over n shards:
// ⌊L/n⌋, plus one for the first L mod n shards, so the shares sum to L; the
// same for the burst of a token bucket.
func shardLimit(l algorithms.Limit, n, i int) algorithms.Limit {
	if i == Unsharded {
		return l
	}
	share := func(v uint64) uint64 {
		s := v / uint64(n)
		if uint64(i) < v%uint64(n) {
			s++
		}
		return s
	}
	burst := l.Capacity()
	l.Requests = share(l.Requests)
	if l.Algorithm.Spec().Burst {
		l.Burst = share(burst)
	}
	return l
}

// oneOp is what Do allocates for a request of one op.
type oneOp struct {
	result [1]algorithms.Result
	calls  [1]*scriptCall
	call   scriptCall
	batch  batch
}

// call builds the run of op on shard in c, and returns c: its script at now
// (the script's argument), or the commands of a counted limit at micros.
// c must be a zero scriptCall: its fields are set one by one, so that no
// scriptCall is built on the stack.
func (l *Limiter) call(c *scriptCall, op *rate.Op, shard int, now any, micros int64) *scriptCall {
	c.op, c.shard = *op, shard
	if op.Limit.Algorithm.Spec().Counter && op.Kind != rate.Settle {
		c.counter = l.enc.counterCall(op, shard, micros)
		return c
	}
	c.script = l.enc.script(op.Limit.Algorithm)
	c.argv = l.enc.appendCommand(c.buf[:0], op, shard, now)
	return c
}

// micros returns now in µs: the injected clock's, or Redis's as the
// Limiter follows it.
func (l *Limiter) micros() int64 {
	if l.clock != nil {
		return l.clock().UnixMicro()
	}
	return l.server.now().UnixMicro()
}

// reply is a script's answer.
type reply struct {
	allowed   bool
	remaining uint64
	reset     int64 // µs
	at        int64 // the receipt's time, µs since the Unix epoch
	seq       uint64
	epoch     int64
	// state is what follows the six numbers: after a lease's take, the
	// state (algorithms.StateOf).
	state []int64
}

// maxResetMicros is the longest reset a Result can carry.
const maxResetMicros = math.MaxInt64 / int64(time.Microsecond)

// result returns r as the Result of op decided on shard. Only an admitted
// take has a receipt; an admitted lease's take has the state too; a
// settlement's says only that it ran.
func (r reply) result(op *rate.Op, shard int) (algorithms.Result, error) {
	if op.Kind == rate.Settle {
		// A settlement's answer says only that it ran.
		return algorithms.Result{Allowed: r.allowed}, nil
	}
	res := algorithms.Result{
		Allowed:    r.allowed,
		Remaining:  r.remaining,
		ResetAfter: time.Duration(min(r.reset, maxResetMicros)) * time.Microsecond,
	}
	if r.allowed && op.Kind == rate.Take {
		res.Receipt = algorithms.Receipt{At: r.at, Seq: r.seq, Epoch: r.epoch}
		if shard != Unsharded {
			res.Receipt.Shard = uint32(shard)
		}
		if op.Leasing() && len(r.state) > 0 {
			st, until, err := algorithms.StateOf(op.Limit.Algorithm, r.state)
			if err != nil {
				return algorithms.Result{}, err
			}
			res.State, res.StateUntil = st, until
			return res, nil
		}
	}
	if len(r.state) > 0 {
		return algorithms.Result{}, fmt.Errorf("unexpected reply of %d values to an op that is no lease's take", replyLen+len(r.state))
	}
	return res, nil
}

// replyLen is the length of every script's reply but a lease's take's, which
// the state follows.
const replyLen = 6

// decodeReply checks and decodes a script's reply: an array of at least
// replyLen integers {allowed (0 or 1), remaining ≥ 0, reset ≥ 0, at, seq ≥
// 0, epoch}, then a lease's state. The command that read it already failed
// on a reply that is not an array of integers (see scriptCall.command).
func decodeReply(ints []int64) (reply, error) {
	if len(ints) < replyLen {
		return reply{}, fmt.Errorf("unexpected reply of %d values, want %d", len(ints), replyLen)
	}
	switch {
	case ints[0] != 0 && ints[0] != 1:
		return reply{}, fmt.Errorf("unexpected allowed %d, want 0 or 1", ints[0])
	case ints[1] < 0:
		return reply{}, fmt.Errorf("unexpected remaining %d", ints[1])
	case ints[2] < 0:
		return reply{}, fmt.Errorf("unexpected reset %d", ints[2])
	case ints[4] < 0:
		return reply{}, fmt.Errorf("unexpected seq %d", ints[4])
	}
	return reply{
		allowed:   ints[0] == 1,
		remaining: uint64(ints[1]),
		reset:     ints[2],
		at:        ints[3],
		seq:       uint64(ints[4]),
		epoch:     ints[5],
		state:     ints[replyLen:],
	}, nil
}
