package rlstest

import (
	"context"
	"errors"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
)

func TestDescriptorPairsKeysWithValues(t *testing.T) {
	d := Descriptor("user", "alice", "path", "/login", "dangling")
	require.Len(t, d.GetEntries(), 2, "a key without a value is left out")
	assert.Equal(t, "user", d.GetEntries()[0].GetKey())
	assert.Equal(t, "alice", d.GetEntries()[0].GetValue())
	assert.Equal(t, "path", d.GetEntries()[1].GetKey())
	assert.Equal(t, "/login", d.GetEntries()[1].GetValue())

	req := Request("edge", d)
	assert.Equal(t, "edge", req.GetDomain())
	assert.Equal(t, d, req.GetDescriptors()[0])
}

func TestDecidedNeedsAReset(t *testing.T) {
	assert.False(t, Decided(&rlsv3.RateLimitResponse{}))
	assert.False(t, Decided(&rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{}}}))
	assert.True(t, Decided(&rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		{DurationUntilReset: durationpb.New(time.Second)},
	}}))
}

func TestCodesInOrder(t *testing.T) {
	resp := &rlsv3.RateLimitResponse{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
		{Code: rlsv3.RateLimitResponse_OVER_LIMIT}, {Code: rlsv3.RateLimitResponse_OK},
	}}
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OK}, Codes(resp))
	assert.Nil(t, Codes(&rlsv3.RateLimitResponse{}))
}

func TestLimitsParsesOneFile(t *testing.T) {
	cfg := Limits(t, "domain: test\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	assert.NotNil(t, cfg)
}

// TestDelayLimiterAnswersLate: a call is answered by Inner no sooner than
// Delay, and one whose context ends first gets the context's error without
// reaching Inner; both deadlines are recorded.
func TestDelayLimiterAnswersLate(t *testing.T) {
	mem := memory.New()
	t.Cleanup(mem.Close)
	lim := &DelayLimiter{Inner: mem, Delay: 30 * time.Millisecond}
	op := rate.Op{
		Key:   rate.Key{Domain: "test", Entries: []rate.Entry{{Key: "k", Value: "v"}}},
		Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Window: time.Minute},
		Hits:  1,
	}

	start := time.Now()
	res, err := lim.Do(context.Background(), []rate.Op{op})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.EqualValues(t, 2, res[0].Remaining)
	assert.True(t, lim.LastDeadline(t).IsZero(), "no deadline")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err = lim.Do(ctx, []rate.Op{op})
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Equal(t, want, lim.LastDeadline(t))
	assert.Len(t, lim.Deadlines(), 2)

	res, err = mem.Do(context.Background(), []rate.Op{{Key: op.Key, Limit: op.Limit}})
	require.NoError(t, err)
	assert.EqualValues(t, 2, res[0].Remaining, "the call that ran out of time took nothing")
}
