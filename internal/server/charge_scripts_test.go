package server

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// The tests below replay envoyproxy/ratelimit's integration scripts for
// quota descriptors (integration-test/scripts/token-quota.sh, quota.sh and
// multiservice-tokenquota.sh) against the rls.Service over real gRPC, as
// Envoy would call it with that project's examples/envoy/proxy.yaml: one
// ShouldRateLimit on the request path, with the route's descriptors and
// their hits_addend, and, for a rate limit with apply_on_stream_done, one
// more when the stream ends. The scripts' sleep of 60 seconds is a step of
// the clock that the limiter decides by.

// scriptEnv is a ShouldRateLimit client over gRPC to an rls.Service whose
// limiter reads clock.
type scriptEnv struct {
	client rlsv3.RateLimitServiceClient
	clock  *algotest.Clock
}

// scriptBackend builds the limiter of a scriptEnv.
type scriptBackend struct {
	name    string
	limiter func(t *testing.T, clock *algotest.Clock) rate.Limiter
}

// scriptBackends are the in-memory backend and a Redis one, on a
// redis-server of the test's own, with the deny cache in front as the
// server puts it.
var scriptBackends = []scriptBackend{
	{"memory", func(t *testing.T, clock *algotest.Clock) rate.Limiter {
		m := memory.New(memory.WithClock(clock.Now))
		t.Cleanup(m.Close)
		return m
	}},
	{"redis", func(t *testing.T, clock *algotest.Clock) rate.Limiter {
		lim, err := redisx.NewLimiter(redistest.Standalone(t).Client(t), 2, redisx.WithClock(clock.Now))
		require.NoError(t, err)
		t.Cleanup(lim.Close)
		cache, err := denycache.New(lim, denycache.Options{MaxEntries: 1000, Now: clock.Now})
		require.NoError(t, err)
		return cache
	}},
}

// scriptStart is where the scripts' clock starts: 250ms into a minute.
var scriptStart = time.Date(2026, 11, 21, 10, 0, 0, 250_000_000, time.UTC)

// newScriptEnv serves limits (one file) over gRPC on a loopback port.
func newScriptEnv(t *testing.T, b scriptBackend, limits []byte) *scriptEnv {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "example.yaml", Data: limits}}, defaultConfigOptions(t))
	require.NoError(t, err)
	clock := algotest.NewClock(scriptStart)
	opts := defaultServiceOptions(t)
	opts.BackendTimeout = 5 * time.Second
	opts.ResponseDynamicMetadata = true // as their Compose file runs it
	svc, err := rls.New(b.limiter(t, clock), cfg, opts)
	require.NoError(t, err)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(GRPCServerOptions()...)
	rlsv3.RegisterRateLimitServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }() // returns when Stop is called
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &scriptEnv{client: rlsv3.NewRateLimitServiceClient(conn), clock: clock}
}

// service is a descriptor of proxy.yaml's quota routes: (service, name),
// with its hits_addend.
func service(name string, hits uint64) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{
		Entries:    []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "service", Value: name}},
		HitsAddend: wrapperspb.UInt64(hits),
	}
}

// call sends one ShouldRateLimit of domain rl, as Envoy's filter does.
func (e *scriptEnv) call(t *testing.T, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: descs})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(descs))
	return resp
}

const (
	codeOK   = rlsv3.RateLimitResponse_OK
	codeOver = rlsv3.RateLimitResponse_OVER_LIMIT
)

// quotaLimits are the quota descriptors of envoyproxy/ratelimit's example
// configuration (examples/ratelimit/config/example.yaml) without their
// metadata, which only quota.sh and multiservice-tokenquota.sh use (see
// testdata/envoyproxy-example.yaml for the whole file).
const quotaLimits = `
domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: service
    value: service_2
    quota_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 2
`

// TestTokenQuotaScript: /tokenquota checks (service, service_2) with
// hits_addend 0 on the request path and charges it 1 on stream done. With 2
// a minute, worked through by hand (count of service_2 after each call):
//
//	request 1: check 0 → OK; done 0→1 OK
//	request 2: check 1 → OK; done 1→2 OK
//	request 3: check 2 → OK; done 2→3 OVER_LIMIT, recorded
//	request 4: check 3 > 2 → OVER_LIMIT, Envoy answers 429
//	60 seconds later, the next window starts at 0, as envoyproxy/ratelimit's
//	request 5: check 0 → OK
//
// Whether Envoy still sends the stream-done charge of the denied request 4
// makes no difference: the count ends with its window.
func TestTokenQuotaScript(t *testing.T) {
	for _, b := range scriptBackends {
		for _, doneWhenDenied := range []bool{false, true} {
			t.Run(b.name+"/stream_done_after_429="+strconv.FormatBool(doneWhenDenied), func(t *testing.T) {
				e := newScriptEnv(t, b, []byte(quotaLimits))
				tokenQuota(t, e, doneWhenDenied)
			})
		}
	}
}

func tokenQuota(t *testing.T, e *scriptEnv, doneWhenDenied bool) {
	for i, want := range []rlsv3.RateLimitResponse_Code{codeOK, codeOK, codeOver} {
		require.Equal(t, codeOK, e.call(t, service("service_2", 0)).GetOverallCode(), "request %d", i+1)
		done := e.call(t, service("service_2", 1))
		require.Equal(t, want, done.GetStatuses()[0].GetCode(), "stream done of request %d", i+1)
	}
	denied := e.call(t, service("service_2", 0))
	require.Equal(t, codeOver, denied.GetOverallCode(), "request 4: the quota was spent on the response path")
	require.Equal(t, time.Minute-250*time.Millisecond, denied.GetStatuses()[0].GetDurationUntilReset().AsDuration(),
		"request 4 waits for the next window")
	if doneWhenDenied {
		e.call(t, service("service_2", 1))
	}

	e.clock.Advance(time.Minute)
	refreshed := e.call(t, service("service_2", 0))
	require.Equal(t, codeOK, refreshed.GetOverallCode(), "request 5: the quota bucket is refreshed")
	require.EqualValues(t, 2, refreshed.GetStatuses()[0].GetLimitRemaining(), "the next window starts at 0: nothing is owed")
}
