package rls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

const chargeLimits = `
domain: test
descriptors:
  - key: tokens
    charge: true
    allow_negative_hits: true
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: fixed_window}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: fixed_window}
  - key: quota
    quota_mode: true
    allow_negative_hits: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: debt
    quota_mode: true
    charge: debt
    rate_limit: {unit: minute, requests_per_unit: 2}
`

func newChargeFixture(t *testing.T, obs Observer) *fixture {
	t.Helper()
	cfg, err := config.Parse([]config.File{{Name: "charge.yaml", Data: []byte(chargeLimits)}}, rlstest.Config())
	require.NoError(t, err)
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	opts := DefaultOptions()
	opts.Observer = obs
	return &fixture{svc: newService(t, mem, cfg, opts), clock: clock, mem: mem}
}

// hits sets a descriptor's own hits_addend.
func hits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// TestChargeRecordedPastTheLimit: a token budget checked with 0 hits and
// charged with what was spent; the charge that takes it past its limit is
// answered OVER_LIMIT, as envoyproxy/ratelimit answers an INCRBY past the
// limit, and recorded all the same: the next check is denied until the
// window ends.
func TestChargeRecordedPastTheLimit(t *testing.T) {
	f := newChargeFixture(t, nil)
	untilNextMinute := time.Minute - 250*time.Millisecond // t0 is 250ms into its minute

	check := f.call(t, request(hits(desc("tokens", "alice"), 0)))
	require.Equal(t, ok, check.GetOverallCode())
	assert.EqualValues(t, 100, check.GetStatuses()[0].GetLimitRemaining())

	spent := f.call(t, request(hits(desc("tokens", "alice"), 80)))
	require.Equal(t, ok, spent.GetOverallCode())
	assert.EqualValues(t, 20, spent.GetStatuses()[0].GetLimitRemaining())

	past := f.call(t, request(hits(desc("tokens", "alice"), 50)))
	assert.Equal(t, over, past.GetOverallCode(), "a charge past the limit is over it")
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{over}, codesOf(past))
	assert.Zero(t, past.GetStatuses()[0].GetLimitRemaining())
	assert.Equal(t, untilNextMinute, past.GetStatuses()[0].GetDurationUntilReset().AsDuration())

	check = f.call(t, request(hits(desc("tokens", "alice"), 0)))
	assert.Equal(t, over, check.GetOverallCode(), "130 of 100 recorded: checks are denied")
	assert.Equal(t, untilNextMinute, check.GetStatuses()[0].GetDurationUntilReset().AsDuration())

	// The next window starts at the 30 owed.
	f.clock.Set(t0.Add(untilNextMinute))
	check = f.call(t, request(hits(desc("tokens", "alice"), 0)))
	assert.Equal(t, ok, check.GetOverallCode())
	assert.EqualValues(t, 70, check.GetStatuses()[0].GetLimitRemaining())
}

// TestChargeIsNeverRefunded: a request denied by another descriptor gives
// back what its takes consumed, but not its charges, which report usage
// already spent.
func TestChargeIsNeverRefunded(t *testing.T) {
	f := newChargeFixture(t, nil)
	require.Equal(t, ok, f.call(t, request(desc("user", "bob"))).GetOverallCode())

	resp := f.call(t, request(hits(desc("tokens", "bob"), 10), desc("user", "bob")))
	require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, over}, codesOf(resp))
	assert.EqualValues(t, 90, resp.GetStatuses()[0].GetLimitRemaining(), "the charge's status is as it left the limit")

	check := f.call(t, request(hits(desc("tokens", "bob"), 0)))
	assert.EqualValues(t, 90, check.GetStatuses()[0].GetLimitRemaining(), "the charge stayed")
}

// TestIsNegativeHitsGivesChargesBack: an explicit give-back on a charging
// rule is a refund, not a charge.
func TestIsNegativeHitsGivesChargesBack(t *testing.T) {
	f := newChargeFixture(t, nil)
	f.call(t, request(hits(desc("tokens", "carol"), 130)))
	back := hits(desc("tokens", "carol"), 40)
	back.IsNegativeHits = true
	f.call(t, request(back))
	check := f.call(t, request(hits(desc("tokens", "carol"), 0)))
	assert.Equal(t, ok, check.GetOverallCode())
	assert.EqualValues(t, 10, check.GetStatuses()[0].GetLimitRemaining())
}

// TestQuotaModeRecords: a quota_mode descriptor records every hit by
// default, in a fixed window, as envoyproxy/ratelimit counts a quota: past
// the limit for the rest of the window, and nothing owed after it.
func TestQuotaModeRecords(t *testing.T) {
	f := newChargeFixture(t, nil)
	for range 2 {
		require.Equal(t, ok, f.call(t, request(desc("quota", "q"))).GetOverallCode())
	}
	for range 3 {
		assert.Equal(t, over, f.call(t, request(desc("quota", "q"))).GetOverallCode())
	}
	// A give-back of 2 of the 5 recorded leaves 3 of 2: still over, so the
	// denied hits were recorded.
	back := hits(desc("quota", "q"), 2)
	back.IsNegativeHits = true
	f.call(t, request(back))
	assert.Equal(t, over, f.call(t, request(hits(desc("quota", "q"), 0))).GetOverallCode())
	// The next window starts at 0.
	f.clock.Set(t0.Add(time.Minute - 250*time.Millisecond))
	check := f.call(t, request(hits(desc("quota", "q"), 0)))
	assert.Equal(t, ok, check.GetOverallCode())
	assert.EqualValues(t, 2, check.GetStatuses()[0].GetLimitRemaining())
}

// TestChargeDebtCarries: a quota_mode descriptor that asks for charge:
// debt owes what it recorded past the limit to the next windows.
func TestChargeDebtCarries(t *testing.T) {
	f := newChargeFixture(t, nil)
	for range 3 {
		f.call(t, request(desc("debt", "q")))
	}
	// Recorded: 3 of 2, so the next window starts at 1.
	f.clock.Set(t0.Add(time.Minute - 250*time.Millisecond))
	check := f.call(t, request(hits(desc("debt", "q"), 0)))
	assert.Equal(t, ok, check.GetOverallCode())
	assert.EqualValues(t, 1, check.GetStatuses()[0].GetLimitRemaining())
}

func TestObserveCharges(t *testing.T) {
	rec := &recorder{}
	f := newChargeFixture(t, rec)
	f.call(t, request(hits(desc("tokens", "dave"), 60)))
	f.call(t, request(hits(desc("tokens", "dave"), 60)))
	f.call(t, request(hits(desc("user", "dave"), 1)))
	_, limits, _ := rec.take()
	require.Len(t, limits, 3)
	assert.True(t, limits[0].Charge)
	assert.False(t, limits[0].OverLimit, "60 of 100")
	assert.True(t, limits[1].Charge)
	assert.True(t, limits[1].OverLimit, "120 of 100: the charge took the limit past it")
	assert.EqualValues(t, 60, limits[1].Hits)
	assert.False(t, limits[2].Charge, "a take is no charge")
}

// TestCalendarMonthBudget: a token budget billed per calendar month is
// charged past its limit, denies its checks until the month ends, and
// reports the wait to the first of the next month, in current_limit's
// unit MONTH.
func TestCalendarMonthBudget(t *testing.T) {
	f := newConfigFixture(t, nil, config.File{Name: "budget.yaml", Data: []byte(`
domain: test
descriptors:
  - key: tokens
    charge: window
    rate_limit: {unit: month, requests_per_unit: 1000, calendar: true}
`)})
	// t0 is 2026-11-21 10:00:00.25 UTC.
	untilDecember := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Sub(t0)
	charge := f.call(t, request(hits(desc("tokens", "erin"), 1500)))
	assert.Equal(t, over, charge.GetOverallCode())
	check := f.call(t, request(hits(desc("tokens", "erin"), 0)))
	require.Equal(t, over, check.GetOverallCode())
	st := check.GetStatuses()[0]
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_MONTH, st.GetCurrentLimit().GetUnit())
	assert.Equal(t, untilDecember, st.GetDurationUntilReset().AsDuration(), "to the first of December")
	f.clock.Set(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, ok, f.call(t, request(hits(desc("tokens", "erin"), 0))).GetOverallCode(), "December starts afresh")
}
