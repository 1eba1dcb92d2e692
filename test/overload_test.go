package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestOnlyAdmittedAnswersKeepHits stalls Redis for 300ms with DEBUG SLEEP
// while callers with a 50ms deadline ask the server (failure mode error,
// default settings but for a reserve of 25ms, which a loaded test machine
// cannot eat on the answer's way back) to take from one limit. Their takes
// reach Redis and run when it wakes up, long after their callers were
// answered UNAVAILABLE; the server keeps reading those answers and gives
// the admitted hits back. Once it has, the limit holds exactly the hits of
// the answers that said OK.
func TestOnlyAdmittedAnswersKeepHits(t *testing.T) {
	redis := redistest.Standalone(t)
	srv := startServer(t, map[string]string{
		"RLS_CONFIG_PATH":      writeConfig(t, faultLimits),
		"RLS_BACKEND":          "redis",
		"RLS_REDIS_ADDRS":      redis.Addr(),
		"RLS_DEADLINE_RESERVE": "25ms",
	})
	tenant := fmt.Sprintf("stall-%d", rand.Uint64())
	ask := func(hits uint64, timeout time.Duration) (*rlsv3.RateLimitResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req := faultRequest("tenant", tenant)
		req.Descriptors[0].HitsAddend = wrapperspb.UInt64(hits)
		return srv.Client.ShouldRateLimit(ctx, req)
	}
	// held returns the hits the tenant's limit holds, by a peek.
	held := func() uint32 {
		resp, err := ask(0, 5*time.Second)
		require.NoError(t, err)
		st := resp.GetStatuses()[0]
		return st.GetCurrentLimit().GetRequestsPerUnit() - st.GetLimitRemaining()
	}
	require.Eventually(t, func() bool {
		resp, err := ask(0, time.Second)
		return err == nil && resp.GetStatuses()[0].GetDurationUntilReset() != nil
	}, 10*time.Second, 20*time.Millisecond, "the server decides")
	require.Zero(t, held())

	stalled := make(chan struct{})
	client := redis.Client(t)
	go func() {
		defer close(stalled)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, client.Do(ctx, "DEBUG", "SLEEP", "0.3").Err())
	}()
	time.Sleep(30 * time.Millisecond)

	const callers = 40
	var mu sync.Mutex
	ok, unavailable := 0, 0
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			resp, err := ask(1, 50*time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
				ok++
			case status.Code(err) == codes.Unavailable:
				unavailable++
			default:
				t.Errorf("unexpected answer %v, %v", resp, err)
			}
		})
	}
	wg.Wait()
	<-stalled
	t.Logf("%d answers OK, %d UNAVAILABLE", ok, unavailable)
	require.Positive(t, unavailable, "the stall was seen")

	require.Eventually(t, func() bool { return held() == uint32(ok) }, 10*time.Second, 50*time.Millisecond,
		"the limit holds the hits of the OK answers only")
	m := scrapeMetrics(t, srv)
	t.Logf("give-backs: given back %v, dropped %v, uncertain %v",
		m[metrics.GiveBacks+`{result="given_back"}`], m[metrics.GiveBacks+`{result="dropped"}`],
		m[metrics.GiveBacks+`{result="uncertain"}`])
	assert.Positive(t, m[metrics.GiveBacks+`{result="given_back"}`])
}
