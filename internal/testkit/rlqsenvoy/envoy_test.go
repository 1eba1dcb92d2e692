package rlqsenvoy_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratewarden/ratewarden/internal/testkit/rlqsenvoy"
)

// wait bounds every wait for the fake server or the Envoy.
const wait = 5 * time.Second

// fakeServer is an RLQS server that records the reports it receives and
// sends the responses a test gives it, on the stream the test chooses.
type fakeServer struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	reports chan received

	mu      sync.Mutex
	streams []*serverStream
}

// received is one report, with the stream it came on, counted from 1.
type received struct {
	stream int
	*rlqsv3.RateLimitQuotaUsageReports
}

type serverStream struct {
	out chan *rlqsv3.RateLimitQuotaResponse
	end chan struct{}
}

func (f *fakeServer) StreamRateLimitQuotas(ss rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	st := &serverStream{out: make(chan *rlqsv3.RateLimitQuotaResponse, 16), end: make(chan struct{})}
	f.mu.Lock()
	f.streams = append(f.streams, st)
	n := len(f.streams)
	f.mu.Unlock()
	go func() {
		for {
			r, err := ss.Recv()
			if err != nil {
				return
			}
			f.reports <- received{stream: n, RateLimitQuotaUsageReports: r}
		}
	}()
	for {
		select {
		case r := <-st.out:
			if err := ss.Send(r); err != nil {
				return err
			}
		case <-st.end:
			return status.Error(codes.Unavailable, "the test ends the stream")
		case <-ss.Context().Done():
			return ss.Context().Err()
		}
	}
}

// latest is the stream opened last.
func (f *fakeServer) latest(t *testing.T) *serverStream {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.NotEmpty(t, f.streams, "no stream was opened")
	return f.streams[len(f.streams)-1]
}

// flakyClient is the RLQS client the Envoy uses, which a test can make fail
// to open streams.
type flakyClient struct {
	rlqsv3.RateLimitQuotaServiceClient
	fail atomic.Bool
}

func (c *flakyClient) StreamRateLimitQuotas(ctx context.Context, opts ...grpc.CallOption) (rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, error) {
	if c.fail.Load() {
		return nil, status.Error(codes.Unavailable, "the test refuses the stream")
	}
	return c.RateLimitQuotaServiceClient.StreamRateLimitQuotas(ctx, opts...)
}

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// harness is an Envoy on a fake clock, talking to a fake server over an
// in-memory connection.
type harness struct {
	t      *testing.T
	env    *rlqsenvoy.Envoy
	srv    *fakeServer
	client *flakyClient
	clk    *clock
	start  time.Time
}

func newHarness(t *testing.T, cfg rlqsenvoy.Config) *harness {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := &fakeServer{reports: make(chan received, 1000)}
	gs := grpc.NewServer()
	rlqsv3.RegisterRateLimitQuotaServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///rlqs",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	client := &flakyClient{RateLimitQuotaServiceClient: rlqsv3.NewRateLimitQuotaServiceClient(conn)}
	if cfg.Domain == "" {
		cfg.Domain = "d"
	}
	cfg.Now = clk.now
	env, err := rlqsenvoy.New(client, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		env.Close()
		_ = conn.Close()
		gs.Stop()
	})
	return &harness{t: t, env: env, srv: srv, client: client, clk: clk, start: start}
}

// at moves the clock to d after the start, and runs the Envoy's timers.
func (h *harness) at(d time.Duration) {
	h.t.Helper()
	h.clk.mu.Lock()
	require.False(h.t, h.start.Add(d).Before(h.clk.t), "the clock goes forward")
	h.clk.t = h.start.Add(d)
	h.clk.mu.Unlock()
	h.env.Tick()
}

// report is the next report the server received.
func (h *harness) report() received {
	h.t.Helper()
	select {
	case r := <-h.srv.reports:
		assert.Equal(h.t, "d", r.GetDomain(), "every report carries the domain")
		return r
	case <-time.After(wait):
		h.t.Fatal("no report came")
		return received{}
	}
}

// push sends one response on the latest stream and waits for the Envoy to
// apply it.
func (h *harness) push(actions ...*rlqsv3.RateLimitQuotaResponse_BucketAction) {
	h.t.Helper()
	n := h.env.Counters().Responses
	h.srv.latest(h.t).out <- &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(h.t, h.env.WaitResponses(ctx, n+1))
}

// allowed sends n requests of bucket and counts those allowed.
func (h *harness) allowed(bucket map[string]string, n int) int {
	got := 0
	for range n {
		if h.env.Request(bucket) {
			got++
		}
	}
	return got
}

// kinds are the kinds of bucket's events.
func (h *harness) kinds(bucket map[string]string) []rlqsenvoy.EventKind {
	var ks []rlqsenvoy.EventKind
	for _, e := range h.env.History(bucket) {
		ks = append(ks, e.Kind)
	}
	return ks
}

func id(name string) map[string]string { return map[string]string{"name": name} }

// usage is what a report says of one bucket.
type usage struct {
	allowed, denied uint64
	elapsed         int64 // seconds
}

// usages reads a report by bucket name.
func usages(t *testing.T, r received) map[string]usage {
	t.Helper()
	u := make(map[string]usage)
	for _, b := range r.GetBucketQuotaUsages() {
		assert.Zero(t, b.GetTimeElapsed().GetNanos(), "time_elapsed is whole seconds")
		u[b.GetBucketId().GetBucket()["name"]] = usage{b.GetNumRequestsAllowed(), b.GetNumRequestsDenied(), b.GetTimeElapsed().GetSeconds()}
	}
	return u
}

// assign is a quota assignment of s to bucket; a negative ttl leaves
// assignment_time_to_live unset.
func assign(bucket map[string]string, s *typev3.RateLimitStrategy, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	qa := &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{RateLimitStrategy: s}
	if ttl >= 0 {
		qa.AssignmentTimeToLive = durationpb.New(ttl)
	}
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId:     &rlqsv3.BucketId{Bucket: bucket},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: qa},
	}
}

func abandon(bucket map[string]string) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId:     &rlqsv3.BucketId{Bucket: bucket},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}
}

func perTimeUnit() *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{
		RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{RequestsPerTimeUnit: 1, TimeUnit: typev3.RateLimitUnit_SECOND},
	}}
}

// created makes bucket with its first request and reads its report.
func (h *harness) created(bucket map[string]string) {
	h.t.Helper()
	h.env.Request(bucket)
	h.report()
}

func TestFirstRequestIsReportedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noAssignment *typev3.RateLimitStrategy
		allowed      bool
	}{
		{"default allows", nil, true},
		{"ALLOW_ALL", rlqsenvoy.AllowAll(), true},
		{"DENY_ALL denies the first request too", rlqsenvoy.DenyAll(), false},
		{"requests_per_time_unit allows", perTimeUnit(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, rlqsenvoy.Config{Settings: rlqsenvoy.Settings{NoAssignment: tc.noAssignment}})
			assert.False(t, h.env.Connected(), "no stream before the first bucket")
			require.Equal(t, tc.allowed, h.env.Request(id("a")))
			want := usage{allowed: 1}
			if !tc.allowed {
				want = usage{denied: 1}
			}
			r := h.report()
			assert.Equal(t, 1, r.stream)
			assert.Equal(t, map[string]usage{"a": want}, usages(t, r), "the first request, alone, at once")

			h.at(2 * time.Second)
			assert.Equal(t, tc.allowed, h.env.Request(id("a")), "the no-assignment behaviour decides until an assignment")
			assert.Equal(t, 1, h.env.Counters().ReportsSent, "a known bucket is not reported at once")

			h.at(3 * time.Second)
			h.env.Request(id("b"))
			r = h.report()
			assert.Equal(t, 1, r.stream, "a new bucket's report goes on the open stream")
			assert.Equal(t, map[string]usage{"b": want}, usages(t, r), "only the new bucket, with no time elapsed")
			assert.Equal(t, rlqsenvoy.Counters{Streams: 1, ReportsSent: 2}, h.env.Counters())
		})
	}
}

func TestReportsEveryFiveSecondsWithDeltas(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	h.created(id("a"))
	h.at(1500 * time.Millisecond)
	h.allowed(id("a"), 2)
	h.at(2700 * time.Millisecond)
	h.created(id("b"))

	h.at(4999 * time.Millisecond)
	assert.Equal(t, 2, h.env.Counters().ReportsSent, "nothing before the interval")
	h.at(5 * time.Second)
	r := h.report()
	assert.Equal(t, map[string]usage{
		"a": {allowed: 2, elapsed: 5},
		"b": {allowed: 0, elapsed: 2}, // 2.3 s since its first report, truncated
	}, usages(t, r), "every bucket, the requests since its last report")

	h.at(6 * time.Second)
	h.allowed(id("b"), 3)
	h.at(15500 * time.Millisecond) // two intervals at once: each report at its deadline
	assert.Equal(t, map[string]usage{"a": {elapsed: 5}, "b": {allowed: 3, elapsed: 5}}, usages(t, h.report()))
	assert.Equal(t, map[string]usage{"a": {elapsed: 5}, "b": {elapsed: 5}}, usages(t, h.report()))
	assert.Equal(t, rlqsenvoy.Counters{Streams: 1, ReportsSent: 5}, h.env.Counters())
}

func TestAssignmentTimeToLive(t *testing.T) {
	type check struct {
		at      time.Duration // after the assignment
		allowed bool
	}
	for _, tc := range []struct {
		name     string
		settings rlqsenvoy.Settings
		ttl      time.Duration // negative: unset
		checks   []check
		kinds    []rlqsenvoy.EventKind
	}{
		{
			name:   "unset expires at once",
			ttl:    -1,
			checks: []check{{0, true}},
			kinds:  []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired},
		},
		{
			name:   "under a second expires at once",
			ttl:    900 * time.Millisecond,
			checks: []check{{0, true}},
			kinds:  []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired},
		},
		{
			name:   "whole seconds",
			ttl:    2900 * time.Millisecond,
			checks: []check{{0, false}, {1999 * time.Millisecond, false}, {2 * time.Second, true}},
			kinds:  []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired},
		},
		{
			name:     "to the no-assignment behaviour",
			settings: rlqsenvoy.Settings{NoAssignment: perTimeUnit()},
			ttl:      time.Second,
			checks:   []check{{0, false}, {time.Second, true}},
			kinds:    []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired},
		},
		{
			name:     "to the expired fallback for its whole seconds",
			settings: rlqsenvoy.Settings{ExpiredFallback: rlqsenvoy.TokenBucket(2, 1, time.Hour), ExpiredTimeout: 3500 * time.Millisecond},
			ttl:      time.Second,
			checks: []check{
				{0, false}, {time.Second, true}, {time.Second, true}, {time.Second, false},
				{3999 * time.Millisecond, false}, {4 * time.Second, true},
			},
			kinds: []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired, rlqsenvoy.FallbackEnded},
		},
		{
			name:     "a fallback without a timeout ends at once",
			settings: rlqsenvoy.Settings{ExpiredFallback: rlqsenvoy.AllowAll(), NoAssignment: rlqsenvoy.DenyAll()},
			ttl:      time.Second,
			checks:   []check{{time.Second, false}},
			kinds:    []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Expired, rlqsenvoy.FallbackEnded},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, rlqsenvoy.Config{Settings: tc.settings})
			h.created(id("a"))
			h.push(assign(id("a"), rlqsenvoy.DenyAll(), tc.ttl))
			for _, c := range tc.checks {
				h.at(c.at)
				assert.Equal(t, c.allowed, h.env.Request(id("a")), "%v after the assignment", c.at)
			}
			assert.Equal(t, tc.kinds, h.kinds(id("a")))
		})
	}
}

func TestIdenticalTokenBucketIsKept(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a := id("a")
	h.created(a)
	h.push(assign(a, rlqsenvoy.TokenBucket(3, 1, time.Minute), 10*time.Second))
	require.Equal(t, 3, h.allowed(a, 4), "a full bucket of three")

	h.at(4 * time.Second)
	h.push(assign(a, rlqsenvoy.TokenBucket(3, 1, time.Minute), 10*time.Second))
	tokens, ok := h.env.Tokens(a)
	require.True(t, ok)
	assert.InDelta(t, 4.0/60, tokens, 1e-9, "neither reset nor refilled")
	assert.False(t, h.env.Request(a))

	h.at(12 * time.Second) // past the first time to live, within the second
	assert.False(t, h.env.Request(a), "the time to live restarted")

	// Only the nanos of fill_interval are compared: one token a second is
	// the same bucket as one a minute, and keeps the old rate.
	h.push(assign(a, rlqsenvoy.TokenBucket(3, 1, time.Second), 10*time.Second))
	h.at(14 * time.Second)
	assert.False(t, h.env.Request(a), "still one token a minute")
	assert.Equal(t, []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Kept, rlqsenvoy.Kept}, h.kinds(a))

	// Different nanos make a new bucket, at the new rate: the old one held
	// under one token's share, so the new one starts empty.
	h.push(assign(a, rlqsenvoy.TokenBucket(3, 1, time.Second+time.Nanosecond), 10*time.Second))
	assert.False(t, h.env.Request(a), "a new bucket, empty")
	h.at(15 * time.Second)
	assert.True(t, h.env.Request(a), "refilled at one token a second")

	h.at(24 * time.Second)
	assert.Equal(t, 3, h.allowed(a, 3), "the time to live ran out: everything allowed")
}

func TestChangedTokenBucket(t *testing.T) {
	tb := rlqsenvoy.TokenBucket
	for _, tc := range []struct {
		name    string
		before  func(h *harness) // with bucket a made
		then    *typev3.RateLimitStrategy
		allowed int // in a row before the first denial
	}{
		{
			name:    "the first starts full",
			before:  func(h *harness) {},
			then:    tb(5, 1, time.Hour),
			allowed: 5,
		},
		{
			name: "half left of a smaller one: full, not half",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 2)
			},
			then:    tb(10, 1, time.Hour),
			allowed: 10,
		},
		{
			name: "half left of a larger one: full",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(10, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 5)
			},
			then:    tb(2, 1, time.Hour),
			allowed: 2,
		},
		{
			name: "a share under one token: empty",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 3)
			},
			then:    tb(3, 1, time.Hour),
			allowed: 0,
		},
		{
			name: "none left: empty",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 4)
			},
			then:    tb(100, 1, time.Hour),
			allowed: 0,
		},
		{
			name: "after a blanket rule: full",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 4)
				h.push(assign(id("a"), rlqsenvoy.DenyAll(), time.Hour))
			},
			then:    tb(4, 1, time.Hour),
			allowed: 4,
		},
		{
			name: "after an expiry: full",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), 2*time.Second))
				h.allowed(id("a"), 4)
				h.at(3 * time.Second)
			},
			then:    tb(4, 1, time.Hour),
			allowed: 4,
		},
		{
			name: "after an abandon: full",
			before: func(h *harness) {
				h.push(assign(id("a"), tb(4, 1, time.Hour), time.Hour))
				h.allowed(id("a"), 4)
				h.push(abandon(id("a")))
				h.created(id("a"))
			},
			then:    tb(4, 1, time.Hour),
			allowed: 4,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, rlqsenvoy.Config{})
			h.created(id("a"))
			tc.before(h)
			h.push(assign(id("a"), tc.then, time.Hour))
			assert.Equal(t, tc.allowed, h.allowed(id("a"), tc.allowed+1), "allowed of %d", tc.allowed+1)
		})
	}
}

func TestTokenBucketRefill(t *testing.T) {
	unsetPerFill := rlqsenvoy.TokenBucket(1, 0, time.Second)
	unsetPerFill.GetTokenBucket().TokensPerFill = nil
	for _, tc := range []struct {
		name     string
		strategy *typev3.RateLimitStrategy
		after    time.Duration // once the first token is taken
		allowed  int           // of 3 requests
	}{
		{"a sub-second fill interval is unlimited", rlqsenvoy.TokenBucket(1, 1, 500*time.Millisecond), 0, 3},
		{"whole seconds of fill interval", rlqsenvoy.TokenBucket(1, 1, 1900*time.Millisecond), time.Second, 1},
		{"not before the whole second", rlqsenvoy.TokenBucket(1, 1, 1900*time.Millisecond), 999 * time.Millisecond, 0},
		{"tokens_per_fill over the seconds", rlqsenvoy.TokenBucket(3, 2, 4*time.Second), 4 * time.Second, 2},
		{"unset tokens_per_fill: not in a day", unsetPerFill, 24 * time.Hour, 0},
		{"unset tokens_per_fill: one a year", unsetPerFill, 365 * 24 * time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, rlqsenvoy.Config{ReportInterval: 1000 * time.Hour})
			h.created(id("a"))
			h.push(assign(id("a"), tc.strategy, 1000*24*time.Hour))
			max := int(tc.strategy.GetTokenBucket().GetMaxTokens())
			if tc.after == 0 {
				assert.Equal(t, 1000, h.allowed(id("a"), 1000))
				return
			}
			require.Equal(t, max, h.allowed(id("a"), max+1))
			h.at(tc.after)
			assert.Equal(t, tc.allowed, h.allowed(id("a"), 3))
		})
	}
}

func TestRequestsPerTimeUnitIsSkipped(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a := id("a")
	h.created(a)
	h.push(assign(a, rlqsenvoy.DenyAll(), 10*time.Second))
	assert.False(t, h.env.Request(a))
	h.at(2 * time.Second)
	h.push(assign(a, perTimeUnit(), time.Minute))
	assert.False(t, h.env.Request(a), "the previous action stays")
	h.at(9999 * time.Millisecond)
	assert.False(t, h.env.Request(a))
	h.at(10 * time.Second)
	assert.True(t, h.env.Request(a), "its expiry too")

	events := h.env.History(a)
	require.Len(t, events, 3)
	assert.Equal(t, rlqsenvoy.Skipped, events[1].Kind)
	assert.True(t, proto.Equal(rlqsenvoy.DenyAll(), events[1].Strategy), "DENY_ALL still decides")
	assert.Equal(t, rlqsenvoy.Expired, events[2].Kind)
}

func TestAbandonLosesUnreportedUsage(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a := id("a")
	h.created(a)
	h.at(time.Second)
	h.push(assign(a, rlqsenvoy.DenyAll(), time.Hour))
	h.allowed(a, 3)
	h.push(abandon(a))

	h.at(2 * time.Second)
	assert.True(t, h.env.Request(a), "a new bucket: the no-assignment behaviour")
	assert.Equal(t, map[string]usage{"a": {allowed: 1}}, usages(t, h.report()), "a new bucket's first report")
	h.at(5 * time.Second)
	assert.Equal(t, map[string]usage{"a": {elapsed: 3}}, usages(t, h.report()), "the three denials are never reported")

	allowed, denied := h.env.Totals(a)
	assert.Equal(t, [2]uint64{2, 3}, [2]uint64{allowed, denied}, "the Envoy's own totals keep them")
	assert.Equal(t, []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Abandoned}, h.kinds(a))
}

func TestActionsForUnknownBucketsAreDropped(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a, b := id("a"), id("b")
	h.created(a)
	h.push(
		assign(b, rlqsenvoy.DenyAll(), time.Hour), // never made
		assign(a, rlqsenvoy.DenyAll(), time.Hour),
		&rlqsv3.RateLimitQuotaResponse_BucketAction{ // no bucket id
			BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{},
		},
	)
	assert.False(t, h.env.Request(a))
	assert.True(t, h.env.Request(b), "made after its action: the no-assignment behaviour")
	assert.Equal(t, []rlqsenvoy.EventKind{rlqsenvoy.Dropped}, h.kinds(b))

	h.push(abandon(a), assign(a, rlqsenvoy.DenyAll(), time.Hour))
	assert.True(t, h.env.Request(a), "the assignment after the abandon was dropped")
	assert.Equal(t, []rlqsenvoy.EventKind{rlqsenvoy.Assigned, rlqsenvoy.Abandoned, rlqsenvoy.Dropped}, h.kinds(a))
}

func TestActionsApplyInOrder(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a := id("a")
	h.created(a)
	h.push(
		assign(a, rlqsenvoy.TokenBucket(2, 1, time.Hour), time.Hour),
		assign(a, rlqsenvoy.TokenBucket(2, 1, time.Hour), time.Hour),
		assign(a, rlqsenvoy.DenyAll(), time.Hour),
		assign(a, rlqsenvoy.TokenBucket(5, 1, time.Hour), time.Hour),
		assign(a, perTimeUnit(), time.Hour),
	)
	assert.Equal(t, []rlqsenvoy.EventKind{
		rlqsenvoy.Assigned, rlqsenvoy.Kept, rlqsenvoy.Assigned, rlqsenvoy.Assigned, rlqsenvoy.Skipped,
	}, h.kinds(a))
	assert.Equal(t, 5, h.allowed(a, 6), "the last token bucket decides, full")
}

func TestStreamLoss(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	a, b, c := id("a"), id("b"), id("c")
	h.created(a)
	h.push(assign(a, rlqsenvoy.DenyAll(), 12*time.Second))

	close(h.srv.latest(t).end)
	require.Eventually(t, func() bool { return !h.env.Connected() }, wait, time.Millisecond, "the Envoy sees the stream end")
	h.at(time.Second)
	assert.False(t, h.env.Request(a), "the cached action outlives the stream")
	h.at(2 * time.Second)
	assert.True(t, h.env.Request(b))
	assert.Equal(t, rlqsenvoy.Counters{Streams: 1, ReportsSent: 1, ReportsLost: 1, Responses: 1}, h.env.Counters(),
		"a new bucket does not reopen the stream: its first report is lost")

	h.at(5 * time.Second)
	r := h.report()
	assert.Equal(t, 2, r.stream, "the report timer reopens the stream")
	assert.Equal(t, map[string]usage{"a": {denied: 1, elapsed: 5}, "b": {elapsed: 3}}, usages(t, r),
		"b's first request went with the lost report")

	h.at(6 * time.Second)
	h.env.Disconnect()
	assert.False(t, h.env.Connected())
	assert.False(t, h.env.Request(a))
	h.env.Request(c)
	h.at(10 * time.Second)
	r = h.report()
	assert.Equal(t, 3, r.stream)
	assert.Equal(t, map[string]usage{"a": {denied: 1, elapsed: 5}, "b": {elapsed: 5}, "c": {elapsed: 4}}, usages(t, r))

	h.client.fail.Store(true)
	h.env.Disconnect()
	h.at(11 * time.Second)
	assert.False(t, h.env.Request(a))
	h.at(12 * time.Second)
	assert.True(t, h.env.Request(a), "expired on time without a stream")
	h.at(15 * time.Second)
	assert.False(t, h.env.Connected(), "the stream could not be reopened")
	h.client.fail.Store(false)
	h.env.Request(a)
	h.at(20 * time.Second)
	r = h.report()
	assert.Equal(t, 4, r.stream)
	assert.Equal(t, map[string]usage{"a": {allowed: 1, elapsed: 5}, "b": {elapsed: 5}, "c": {elapsed: 5}}, usages(t, r),
		"the usage of the report that could not go out is never sent")
	assert.Equal(t, rlqsenvoy.Counters{Streams: 4, ReportsSent: 4, ReportsLost: 3, Responses: 1}, h.env.Counters())
}

func TestNoAssignmentTokenBucketIsRefused(t *testing.T) {
	_, err := rlqsenvoy.New(nil, rlqsenvoy.Config{Settings: rlqsenvoy.Settings{NoAssignment: rlqsenvoy.TokenBucket(1, 1, time.Second)}})
	require.Error(t, err)

	h := newHarness(t, rlqsenvoy.Config{SettingsFor: func(bucket map[string]string) rlqsenvoy.Settings {
		if bucket["name"] == "tb" {
			return rlqsenvoy.Settings{NoAssignment: rlqsenvoy.TokenBucket(1, 1, time.Second)}
		}
		return rlqsenvoy.Settings{NoAssignment: rlqsenvoy.DenyAll()}
	}})
	assert.False(t, h.env.Request(id("a")), "per-bucket settings")
	assert.Panics(t, func() { h.env.Request(id("tb")) })
}

func TestWaitResponsesGivesUp(t *testing.T) {
	h := newHarness(t, rlqsenvoy.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	assert.True(t, errors.Is(h.env.WaitResponses(ctx, 1), context.DeadlineExceeded))
}
