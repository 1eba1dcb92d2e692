package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestParseCharge(t *testing.T) {
	c := mustParse(t, `
domain: llm
descriptors:
  - key: tokens
    charge: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: service
    value: service_2
    quota_mode: true
    charge: false
    rate_limits:
      - {unit: minute, requests_per_unit: 2, algorithm: token_bucket}
      - {unit: hour, requests_per_unit: 20}
  - key: team
    quota_mode: true
    descriptors:
      - key: user
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: internal
    quota_mode: true
    rate_limit: {unlimited: true}
  - key: window
    charge: window
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: owed
    quota_mode: true
    charge: debt
    rate_limit: {unit: minute, requests_per_unit: 1000}
`, testOptions())
	got := map[string]*Rule{}
	for _, r := range c.Rules() {
		got[r.Path] = r
	}
	require.Len(t, got, 7)

	tokens := got["llm.tokens"]
	assert.True(t, tokens.Charge, "charge: true")
	assert.True(t, tokens.Debt, "charge: true owes what it records past the limit")
	assert.Equal(t, algorithms.SlidingWindowCounter, tokens.Limits[0].Limit.Algorithm, "charge alone keeps the default algorithm")

	s1 := got["llm.service_service_1"]
	assert.True(t, s1.Charge, "quota_mode charges by default")
	assert.False(t, s1.Debt, "quota_mode's charges end with their window, as envoyproxy/ratelimit's counts do")
	assert.Equal(t, algorithms.FixedWindow, s1.Limits[0].Limit.Algorithm, "quota_mode counts in fixed windows by default")

	s2 := got["llm.service_service_2"]
	assert.False(t, s2.Charge, "charge: false overrides quota_mode")
	assert.Equal(t, algorithms.TokenBucket, s2.Limits[0].Limit.Algorithm, "a named algorithm is kept")
	assert.Equal(t, algorithms.FixedWindow, s2.Limits[1].Limit.Algorithm)

	// quota_mode applies to its own descriptor's limits, not its children's.
	assert.False(t, got["llm.team.user"].Charge)
	assert.Equal(t, algorithms.SlidingWindowCounter, got["llm.team.user"].Limits[0].Limit.Algorithm)
	assert.False(t, got["llm.internal"].Charge, "an unlimited rule counts nothing to charge")

	assert.True(t, got["llm.window"].Charge)
	assert.False(t, got["llm.window"].Debt, "charge: window")
	assert.Equal(t, algorithms.SlidingWindowCounter, got["llm.window"].Limits[0].Limit.Algorithm)
	assert.True(t, got["llm.owed"].Charge)
	assert.True(t, got["llm.owed"].Debt, "charge: debt")

	dump := c.String()
	assert.Contains(t, dump, "llm.tokens (test.yaml:3) charge=debt\n")
	assert.Contains(t, dump, "llm.service_service_1 (test.yaml:6) quota_mode charge=window\n")
	assert.Contains(t, dump, "llm.service_service_2 (test.yaml:10) quota_mode\n")
}

func TestParseChargeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field, msg string
		line                   int
	}{
		{"not a boolean", `
domain: d
descriptors:
  - key: k
    charge: sometimes
    rate_limit: {unit: second, requests_per_unit: 1}
`, "descriptors[0].charge", "want true, false, window or debt", 4},
		{"no rate limit", `
domain: d
descriptors:
  - key: k
    charge: true
    descriptors:
      - key: k2
        rate_limit: {unit: second, requests_per_unit: 1}
`, "descriptors[0].charge", "charge applies to the hits of a rate limit", 4},
		{"unlimited", `
domain: d
descriptors:
  - key: k
    charge: true
    rate_limit: {unlimited: true}
`, "descriptors[0].charge", "charge applies to the hits of a rate limit", 4},
		{"quota_mode not a boolean", `
domain: d
descriptors:
  - key: k
    quota_mode: 3
    rate_limit: {unit: second, requests_per_unit: 1}
`, "descriptors[0].quota_mode", "want true or false", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parseError(t, []File{{Name: "test.yaml", Data: yml(tc.yaml)}})
			assert.Equal(t, "test.yaml", e.File)
			assert.Equal(t, tc.line, e.Line)
			assert.Equal(t, tc.field, e.Field)
			assert.True(t, strings.Contains(e.Msg, tc.msg), "message %q lacks %q", e.Msg, tc.msg)
		})
	}
}

// TestParseCalendar: a calendar limit counts in fixed windows of the UTC
// calendar, one day, week, month or year long.
func TestParseCalendar(t *testing.T) {
	c := mustParse(t, `
domain: llm
descriptors:
  - key: api_key
    charge: debt
    rate_limits:
      - {unit: month, requests_per_unit: 1000000, calendar: true}
      - {unit: day, requests_per_unit: 100000, calendar: true, algorithm: fixed_window, unit_multiplier: 1}
  - key: team
    rate_limit: {unit: month, requests_per_unit: 10}
`, testOptions())
	rules := c.Rules()
	require.Len(t, rules, 2)
	month := rules[0].Limits[0].Limit
	assert.True(t, month.Calendar)
	assert.Equal(t, algorithms.FixedWindow, month.Algorithm, "a calendar limit is a fixed window")
	assert.Equal(t, "month", month.CalendarUnit())
	assert.True(t, rules[0].Limits[1].Limit.Calendar)
	assert.False(t, rules[1].Limits[0].Limit.Calendar, "a month of 30 days by default, as envoyproxy/ratelimit counts it")
	assert.Contains(t, c.String(), "algorithm=fixed_window requests_per_unit=1000000 unit=month unit_multiplier=1 burst=1000000 shards=1 calendar\n")

	for _, tc := range []struct {
		name, limit, field, msg string
	}{
		{"a minute", `{unit: minute, requests_per_unit: 1, calendar: true}`, "descriptors[0].rate_limit.calendar", "calendar windows are a day, a week, a month or a year, not a minute"},
		{"two months", `{unit: month, unit_multiplier: 2, requests_per_unit: 1, calendar: true}`, "descriptors[0].rate_limit.unit_multiplier", "a calendar window is one month: unit_multiplier must be 1"},
		{"a sliding window", `{unit: month, requests_per_unit: 1, calendar: true, algorithm: sliding_window_counter}`, "descriptors[0].rate_limit.calendar", "calendar windows apply only to fixed_window, not sliding_window_counter"},
		{"not a boolean", `{unit: month, requests_per_unit: 1, calendar: monthly}`, "descriptors[0].rate_limit.calendar", "want true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parseError(t, []File{{Name: "test.yaml", Data: yml("\ndomain: d\ndescriptors:\n  - key: k\n    rate_limit: " + tc.limit + "\n")}})
			assert.Equal(t, "test.yaml", e.File)
			assert.Equal(t, 4, e.Line)
			assert.Equal(t, tc.field, e.Field)
			assert.Contains(t, e.Msg, tc.msg)
		})
	}
}
