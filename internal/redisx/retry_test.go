package redisx

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// stall runs DEBUG SLEEP on every node at once, from connections of their
// own, and returns when all of them have answered again.
func stall(t *testing.T, nodes []*redistest.Server, d time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for _, n := range nodes {
		c := n.Client(t)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, c.Do(ctx, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Err())
		})
	}
	wg.Wait()
}

// stallTarget is a fresh Redis deployment whose nodes a test may stall.
type stallTarget struct {
	name string
	// start returns the client options of a fresh deployment and the nodes
	// that serve its keys.
	start func(t *testing.T) (Options, []*redistest.Server)
}

func stallTargets() []stallTarget {
	return []stallTarget{
		{"standalone", func(t *testing.T) (Options, []*redistest.Server) {
			s := redistest.Standalone(t)
			return Options{Addrs: []string{s.Addr()}}, []*redistest.Server{s}
		}},
		{"cluster", func(t *testing.T) (Options, []*redistest.Server) {
			c := redistest.NewCluster(t)
			return Options{Mode: ModeCluster, Addrs: c.Addrs()}, c.Masters(t)
		}},
	}
}

// consumed returns how many hits each op's limit holds, by peeking at it.
func consumed(t *testing.T, lim *Limiter, ops []rate.Op) []uint64 {
	t.Helper()
	peeks := make([]rate.Op, len(ops))
	for i, op := range ops {
		op.Hits = 0
		peeks[i] = op
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := lim.Do(ctx, peeks)
	require.NoError(t, err)
	n := make([]uint64, len(ops))
	for i, r := range res {
		n[i] = ops[i].Limit.Requests - r.Remaining
	}
	return n
}

// TestScriptsAreNeverSentTwice stalls Redis for 300ms with DEBUG SLEEP while
// takes wait for their replies with a read timeout of 100ms and a deadline of
// a second. go-redis would send a command again after its read timed out, on
// a new connection, and both copies would run once Redis woke up: a take
// counted twice. Every take here is on a limit of its own, so each limit
// must hold at most one hit, and exactly one for every take answered as
// admitted.
func TestScriptsAreNeverSentTwice(t *testing.T) {
	const takes = 24
	for _, target := range stallTargets() {
		t.Run(target.name, func(t *testing.T) {
			o, nodes := target.start(t)
			o.ReadTimeout = 100 * time.Millisecond
			client, err := NewClient(o)
			require.NoError(t, err)
			t.Cleanup(func() { client.Close() })
			lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
			require.NoError(t, err)
			t.Cleanup(lim.Close)
			ctx := context.Background()
			require.NoError(t, lim.Prepare(ctx))

			limit := algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 10, Window: time.Hour}
			ops := make([]rate.Op, takes)
			for i := range ops {
				ops[i] = rate.Op{Key: rate.Key{Domain: "once", Entries: []rate.Entry{{Key: "k", Value: strconv.Itoa(i)}}}, Limit: limit, Hits: 1}
			}
			// Connections to every node, so that the takes need no dialing.
			consumed(t, lim, ops)

			stalled := make(chan struct{})
			go func() {
				defer close(stalled)
				stall(t, nodes, 300*time.Millisecond)
			}()
			time.Sleep(30 * time.Millisecond) // the stall has begun

			admitted := make([]bool, takes)
			var failed int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range ops {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					res, err := lim.Do(ctx, ops[i:i+1])
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed++
						return
					}
					admitted[i] = res[0].Allowed
				})
			}
			wg.Wait()
			<-stalled
			t.Logf("%d takes answered, %d failed", takes-failed, failed)

			for i, n := range consumed(t, lim, ops) {
				assert.LessOrEqual(t, n, uint64(1), "take %d counted %d times", i, n)
				if admitted[i] {
					assert.Equal(t, uint64(1), n, "take %d was admitted", i)
				}
			}
		})
	}
}

// TestRetriesWhatCertainlyDidNotRun checks that a take that the server
// refused without running it is sent again: the first pipeline is answered
// LOADING (by a hook, as a server loading its data set would), the second
// reaches Redis, and the take is decided and counted once.
func TestRetriesWhatCertainlyDidNotRun(t *testing.T) {
	srv := redistest.SharedStandalone(t)
	client, err := NewClient(Options{Addrs: []string{srv.Addr()}})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	var loading refuseFirstPipeline
	client.AddHook(&loading)
	lim, err := NewLimiter(client, testPipelines, WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	t.Cleanup(lim.Close)

	op := rate.Op{Key: rate.Key{Domain: "retry"}, Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowCounter, Requests: 10, Window: time.Hour}, Hits: 1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.NoError(t, lim.Prepare(ctx))
	res, err := lim.Do(ctx, []rate.Op{op})
	require.NoError(t, err)
	assert.True(t, res[0].Allowed)
	assert.Equal(t, []uint64{1}, consumed(t, lim, []rate.Op{op}))
	assert.Equal(t, 3, loading.pipelines(), "refused, sent again, and the peek")
}

// loadingReply is the reply of a server that is loading its data set.
type loadingReply struct{}

func (loadingReply) Error() string { return "LOADING Redis is loading the dataset in memory" }
func (loadingReply) RedisError()   {}

// refuseFirstPipeline answers the first pipeline of scripts of a client with
// LOADING without sending it, and counts the pipelines of scripts.
type refuseFirstPipeline struct {
	mu sync.Mutex
	n  int
}

func (h *refuseFirstPipeline) pipelines() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func (*refuseFirstPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*refuseFirstPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *refuseFirstPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" && cmds[0].Name() != "eval" {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		h.n++
		first := h.n == 1
		h.mu.Unlock()
		if !first {
			return next(ctx, cmds)
		}
		for _, c := range cmds {
			c.SetErr(loadingReply{})
		}
		return loadingReply{}
	}
}
