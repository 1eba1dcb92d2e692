package rlqs

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// decideLimits hold a rule of each kind Decide tells apart.
const decideLimits = `
domain: edge
descriptors:
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: sliding_window_log}
  - key: trial_two
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 60}
    rate_limits: [{unit: hour, requests_per_unit: 600}]
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: fixed_window}
  - key: free
    rate_limit: {unlimited: true}
  - key: none
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: two
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
    rate_limits: [{unit: day, requests_per_unit: 10000, algorithm: fixed_window}]
  - key: hot
    rate_limit: {unit: minute, requests_per_unit: 6000, algorithm: token_bucket, shards: 4}
  - key: tokens
    charge: debt
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: fixed_window}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: second
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: two_seconds
    rate_limit: {unit: second, unit_multiplier: 2, requests_per_unit: 50, algorithm: fixed_window}
  - key: three_seconds
    rate_limit: {unit: second, unit_multiplier: 3, requests_per_unit: 50, algorithm: fixed_window}
  - key: bucket_second
    rate_limit: {unit: second, requests_per_unit: 50, algorithm: token_bucket}
  - key: bucket_deep
    rate_limit: {unit: second, requests_per_unit: 50, algorithm: token_bucket, burst: 500}
  - key: log_second
    rate_limit: {unit: second, requests_per_unit: 50, algorithm: sliding_window_log}
`

// TestDecide: what the quota service does with the buckets of each kind of
// rule, and why it grants none of some.
func TestDecide(t *testing.T) {
	cfg := rlstest.Limits(t, decideLimits)
	decide := func(key string) Decision {
		t.Helper()
		m, ok := cfg.Match("edge", Entries(map[string]string{key: "x"}))
		require.True(t, ok, key)
		return Decide(m.Rule)
	}
	for _, key := range []string{"tenant", "none", "three_seconds", "bucket_deep", "log_second"} {
		d := decide(key)
		assert.Equal(t, Grant, d.Answer, key)
		assert.Empty(t, d.Why, key)
		if assert.NotNil(t, d.Limit, key) {
			m, _ := cfg.Match("edge", Entries(map[string]string{key: "x"}))
			assert.Equal(t, m.Rule.Limits[0], *d.Limit, key)
		}
	}
	assert.Equal(t, Decision{Answer: AllowAll}, decide("free"))
	trial := decide("trial")
	assert.Equal(t, Record, trial.Answer, "a rule in shadow mode never denies")
	assert.EqualValues(t, 60, trial.Limit.Limit.Requests)
	assert.Equal(t, Decision{Answer: AllowAll, Why: []string{"2 limits (a grant is reserved on one)"}}, decide("trial_two"))
	shallow := decide("bucket_second")
	assert.Equal(t, Grant, shallow.Answer)
	assert.Equal(t, []string{"a burst of 1s of its rate (grants admit all it refills only with 10s or more: two of Envoy's report intervals)"}, shallow.Why)
	for key, why := range map[string][]string{
		"two":         {"2 limits (a grant is reserved on one)"},
		"hot":         {"shards: 4 (a grant is reserved on one key)"},
		"tokens":      {"charge: debt (a charge counts hits once spent; a grant reserves them before)"},
		"quota":       {"charge: window, as quota_mode and limits from xDS set it (a charge counts hits once spent; a grant reserves them before)"},
		"second":      {"a sliding_window_counter of 1s (a grant lives whole seconds and ends 1s before its window: it needs a window of 3s or more)"},
		"two_seconds": {"a fixed_window of 2s (a grant lives whole seconds and ends 1s before its window: it needs a window of 3s or more)"},
	} {
		assert.Equal(t, Decision{Answer: NoAssignment, Why: why}, decide(key), key)
	}
	assert.Equal(t, Decision{Why: []string{"no rule matches"}}, Decide(nil))
	for a, name := range map[Answer]string{NoAssignment: "no_assignment", AllowAll: "allow_all", Grant: "grant", Record: "record"} {
		assert.Equal(t, name, a.String())
	}
}

// TestABucketOfAWindowTooShortIsNotGranted: a bucket whose rule is a
// sliding window counter of a second is no bucket a grant can count on
// (none would fit in its window): it gets no action, and the server says
// why in its log.
func TestABucketOfAWindowTooShortIsNotGranted(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	var logs bytes.Buffer
	cfg := rlstest.Limits(t, decideLimits)
	opts := DefaultOptions()
	opts.Limiter, opts.Config = mem, func() *config.Config { return cfg }
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := New(opts)
	require.NoError(t, err)
	resp := s.answer(context.Background(), map[string]*holding{}, time.Time{}, reports("edge", map[string]string{"second": "x"}, 0, 5))
	assert.Empty(t, resp.GetBucketAction())
	assert.Contains(t, logs.String(), `msg="rlqs: a bucket's rule is not one a grant can count on" domain=edge rule=edge.second why="[a sliding_window_counter of 1s`)
}

// reports returns the usage reports of one bucket of domain: allowed and
// denied in the last second.
func reports(domain string, bucket map[string]string, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports {
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqsv3.BucketId{Bucket: bucket},
		TimeElapsed:        durationpb.New(time.Second),
		NumRequestsAllowed: allowed,
		NumRequestsDenied:  denied,
	}}}
}

// recorder is an Observer that records what it is told.
type recorder struct {
	nopObserver
	ungranted map[string]uint64 // by rule
	short     map[string]int
}

func (r *recorder) ObserveUngranted(op *rate.Op, allowed uint64) { r.ungranted[op.Tag] += allowed }
func (r *recorder) ObserveShort(op *rate.Op)                     { r.short[op.Tag]++ }

// TestObservesUngrantedAndShort: an Envoy that reports requests allowed
// before its first grant (an ALLOW_ALL no_assignment_behavior) has them
// observed as ungranted, those of its grant not; a grant asked of a limit
// another Envoy's grant used up is observed short, as is one cut to the
// room left.
func TestObservesUngrantedAndShort(t *testing.T) {
	clk := algotest.NewClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	mem := memory.New(memory.WithClock(clk.Now))
	t.Cleanup(mem.Close)
	cfg := rlstest.Limits(t, limits)
	rec := &recorder{ungranted: map[string]uint64{}, short: map[string]int{}}
	opts := DefaultOptions()
	opts.Limiter, opts.Config, opts.Observer, opts.Now = mem, func() *config.Config { return cfg }, rec, clk.Now
	s, err := New(opts)
	require.NoError(t, err)
	ctx := context.Background()
	bucket := map[string]string{"fixed": "acme"}
	opened := clk.Now().Add(-s.life()) // no grant of an earlier stream is served any more

	first := map[string]*holding{}
	resp := s.answer(ctx, first, opened, reports("edge", bucket, 7, 0))
	require.Len(t, resp.GetBucketAction(), 2, "DENY_ALL, then the grant")
	assert.Equal(t, map[string]uint64{"edge.fixed": 7}, rec.ungranted)
	assert.Empty(t, rec.short)
	k := uint64(resp.GetBucketAction()[1].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket().GetMaxTokens())
	require.Positive(t, k)
	s.answer(ctx, first, opened, reports("edge", bucket, k, 0))
	assert.Equal(t, map[string]uint64{"edge.fixed": 7}, rec.ungranted, "what the grant held is not ungranted")

	// A second Envoy asks for more than the limit has room for: its grant
	// is cut to the room left; a third finds none.
	second := map[string]*holding{}
	resp = s.answer(ctx, second, opened, reports("edge", bucket, 0, 10_000))
	require.Len(t, resp.GetBucketAction(), 2)
	assert.Equal(t, map[string]int{"edge.fixed": 1}, rec.short)
	resp = s.answer(ctx, map[string]*holding{}, opened, reports("edge", bucket, 0, 10_000))
	assert.Empty(t, resp.GetBucketAction())
	assert.Equal(t, map[string]int{"edge.fixed": 2}, rec.short)
}
