package rls

import (
	"context"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// opsRecorder is a Limiter that keeps the ops it is asked, and asks next.
type opsRecorder struct {
	next rate.Limiter
	mu   sync.Mutex
	ops  [][]rate.Op
}

func (r *opsRecorder) Do(ctx context.Context, ops []rate.Op) ([]algorithms.Result, error) {
	r.mu.Lock()
	r.ops = append(r.ops, append([]rate.Op(nil), ops...))
	r.mu.Unlock()
	return r.next.Do(ctx, ops)
}

func (r *opsRecorder) calls() [][]rate.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ops
}

// explainFixture is a Service over limits and a opsRecorder of its calls.
func explainFixture(t *testing.T, limits string, mutate func(*Options)) (*Service, *opsRecorder) {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(limits)}}, rlstest.Config())
	require.NoError(t, err)
	mem := memory.New()
	t.Cleanup(mem.Close)
	rec := &opsRecorder{next: mem}
	opts := DefaultOptions()
	if mutate != nil {
		mutate(&opts)
	}
	return newService(t, rec, cfg, opts), rec
}

// sentOps returns the ops an explanation says are sent, in order.
func sentOps(x *Explanation) []rate.Op {
	var ops []rate.Op
	for _, d := range x.Descriptors {
		for _, l := range d.Limits {
			if l.ReplacedBy == "" {
				ops = append(ops, l.Op)
			}
		}
	}
	return ops
}

// TestExplainIsThePlan: for requests of every kind, the ops Explain says
// the service sends are the ops ShouldRateLimit sends, and Explain sends
// none.
func TestExplainIsThePlan(t *testing.T) {
	svc, rec := explainFixture(t, testLimits, nil)
	for _, req := range []*ratelimitv3.RateLimitDescriptor{
		desc("two", "a"), desc("fixed", "a"), desc("shadow", "s"), desc("nothing", "here"), desc("free", "f"),
		withOverride(desc("counter", "c"), 5, typev3.RateLimitUnit_HOUR, 2),
		withOverride(desc("nothing", "x"), 5, typev3.RateLimitUnit_SECOND, 0),
		hits(desc("refill", "r"), 2),
	} {
		r := request(req, desc("user", "u", "plan", "basic"), desc("user", "u", "plan", "premium"), desc("vip", "v"))
		x, err := svc.Explain(r)
		require.NoError(t, err)
		require.Empty(t, rec.calls(), "Explain asks the limiter nothing")
		_, err = svc.ShouldRateLimit(context.Background(), r)
		require.NoError(t, err)
		calls := rec.calls()
		require.NotEmpty(t, calls)
		assert.Equal(t, calls[0], sentOps(x), "%v", req)
		rec.ops = nil
	}
}

func TestExplainMatchedRuleAndLimits(t *testing.T) {
	svc, _ := explainFixture(t, testLimits, nil)
	x, err := svc.Explain(request(desc("two", "a"), desc("nothing", "here")))
	require.NoError(t, err)
	assert.Equal(t, "test", x.Domain)
	require.Len(t, x.Descriptors, 2)

	two := x.Descriptors[0]
	require.NotNil(t, two.Trace.Rule)
	assert.Equal(t, "test.two", two.Trace.Rule.Path)
	assert.Equal(t, 12, two.Trace.Rule.Line)
	assert.Equal(t, []rate.Entry{{Key: "two", Value: "a"}}, two.Entries)
	assert.Equal(t, uint64(1), two.Hits)
	require.Len(t, two.Limits, 2)
	assert.Equal(t, algorithms.TokenBucket, two.Limits[0].Op.Limit.Algorithm)
	assert.Equal(t, algorithms.FixedWindow, two.Limits[1].Op.Limit.Algorithm)
	assert.Equal(t, "hourly", two.Limits[1].Limit.Name)
	assert.Equal(t, rate.Key{Domain: "test", Entries: two.Entries}, two.Limits[0].Op.Key)
	assert.False(t, two.Limits[0].Shadow || two.Override || two.Quota || two.Unlimited)

	none := x.Descriptors[1]
	assert.Nil(t, none.Trace.Rule)
	assert.Contains(t, none.Trace.Why, `no descriptor of key "nothing"`)
	assert.Empty(t, none.Limits)
}

func TestExplainOverride(t *testing.T) {
	svc, _ := explainFixture(t, testLimits, nil)
	x, err := svc.Explain(request(withOverride(desc("bucket", "b"), 7, typev3.RateLimitUnit_HOUR, 2), withOverride(desc("nothing", "x"), 5, typev3.RateLimitUnit_SECOND, 0)))
	require.NoError(t, err)
	b := x.Descriptors[0]
	assert.True(t, b.Override)
	require.Len(t, b.Limits, 1)
	assert.Equal(t, algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 7, Window: 2 * 3600e9}, b.Limits[0].Op.Limit, "the override keeps the rule's algorithm")
	u := x.Descriptors[1]
	assert.True(t, u.Override)
	assert.Nil(t, u.Trace.Rule)
	require.Len(t, u.Limits, 1)
	assert.Equal(t, algorithms.SlidingWindowCounter, u.Limits[0].Op.Limit.Algorithm, "an unmatched override counts with the default")
}

func TestExplainShards(t *testing.T) {
	svc, _ := explainFixture(t, `
domain: test
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 100, shards: 4}
`, nil)
	x, err := svc.Explain(request(desc("hot", "h")))
	require.NoError(t, err)
	assert.Equal(t, uint32(4), x.Descriptors[0].Limits[0].Op.Shards)
	assert.Equal(t, uint32(4), x.Descriptors[0].Limits[0].Limit.Shards)
}

func TestExplainShadowMode(t *testing.T) {
	svc, _ := explainFixture(t, testLimits, nil)
	x, err := svc.Explain(request(desc("shadow", "s"), desc("fixed", "f")))
	require.NoError(t, err)
	assert.True(t, x.Descriptors[0].Limits[0].Shadow)
	assert.True(t, x.Descriptors[0].Limits[0].RuleShadow)
	assert.False(t, x.Descriptors[1].Limits[0].Shadow)
	assert.False(t, x.ShadowMode)

	svc, _ = explainFixture(t, testLimits, func(o *Options) { o.ShadowMode = true })
	x, err = svc.Explain(request(desc("fixed", "f")))
	require.NoError(t, err)
	assert.True(t, x.ShadowMode)
	assert.True(t, x.Descriptors[0].Limits[0].Shadow, "the service's shadow mode lets it through")
	assert.False(t, x.Descriptors[0].Limits[0].RuleShadow, "and leaves its status OVER_LIMIT")
}

func TestExplainChargeAndQuota(t *testing.T) {
	svc, _ := explainFixture(t, chargeLimits, nil)
	x, err := svc.Explain(request(hits(desc("tokens", "t"), 30), desc("debt", "d"), desc("user", "u")))
	require.NoError(t, err)
	tokens := x.Descriptors[0]
	assert.Equal(t, uint64(30), tokens.Hits)
	assert.Equal(t, rate.Charge, tokens.Limits[0].Op.Kind)
	assert.True(t, tokens.Limits[0].Op.Debt, "charge: true owes what it records past the limit")
	assert.Equal(t, uint64(30), tokens.Limits[0].Op.Hits)
	assert.False(t, tokens.Quota)
	debt := x.Descriptors[1]
	assert.True(t, debt.Quota)
	assert.Equal(t, rate.Charge, debt.Limits[0].Op.Kind)
	assert.True(t, debt.Limits[0].Op.Debt)
	assert.Equal(t, algorithms.FixedWindow, debt.Limits[0].Op.Limit.Algorithm, "quota_mode counts in fixed windows")
	assert.Equal(t, rate.Take, x.Descriptors[2].Limits[0].Op.Kind)

	// is_negative_hits, where allowed, gives back instead.
	back := hits(desc("tokens", "t"), 5)
	back.IsNegativeHits = true
	x, err = svc.Explain(request(back))
	require.NoError(t, err)
	assert.True(t, x.Descriptors[0].Refund)
	assert.Equal(t, rate.Refund, x.Descriptors[0].Limits[0].Op.Kind)
}

func TestExplainReplaces(t *testing.T) {
	svc, _ := explainFixture(t, testLimits, nil)
	x, err := svc.Explain(request(desc("user", "u", "plan", "basic"), desc("user", "u", "plan", "premium"), desc("vip", "v"), desc("staff", "s"), desc("fixed", "f")))
	require.NoError(t, err)
	assert.Equal(t, "limit of descriptors[1]", x.Descriptors[0].Limits[0].ReplacedBy)
	assert.Empty(t, x.Descriptors[1].Limits[0].ReplacedBy)
	assert.False(t, x.Descriptors[2].Unlimited)
	assert.Equal(t, "limit of descriptors[3]", x.Descriptors[2].UnlimitedReplacedBy)
	assert.Equal(t, `the unlimited rule "vip" of descriptors[2]`, x.Descriptors[4].Limits[0].ReplacedBy,
		"vip replaces fixed_limit even though staff replaces vip, as the service decides")

	x, err = svc.Explain(request(desc("free", "f")))
	require.NoError(t, err)
	assert.True(t, x.Descriptors[0].Unlimited)
	assert.Empty(t, x.Descriptors[0].Limits)
}

func TestExplainRefusesWhatShouldRateLimitRefuses(t *testing.T) {
	svc, _ := explainFixture(t, testLimits, func(o *Options) { o.Bounds.MaxDescriptors = 2 })
	for _, req := range []*ratelimitv3.RateLimitDescriptor{desc(), withOverride(desc("log", "a"), 1_000_000, typev3.RateLimitUnit_SECOND, 0)} {
		r := request(req)
		_, want := svc.ShouldRateLimit(context.Background(), r)
		_, got := svc.Explain(r)
		require.Error(t, got)
		assert.Equal(t, codes.InvalidArgument, status.Code(got))
		assert.Equal(t, want.Error(), got.Error())
	}
	_, err := svc.Explain(request(desc("a", "b"), desc("a", "b"), desc("a", "b")))
	assert.Contains(t, status.Convert(err).Message(), "RLS_MAX_DESCRIPTORS")

	svc.SetConfig(nil)
	_, err = svc.Explain(request(desc("fixed", "a")))
	assert.ErrorIs(t, err, ErrNoConfig)

	_, err = Explain(nil, request(desc("fixed", "a")), Options{})
	assert.ErrorContains(t, err, "DefaultAlgorithm")
}
