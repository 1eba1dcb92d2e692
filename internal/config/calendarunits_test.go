package config

import (
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestCalendarUnitsText(t *testing.T) {
	for text, want := range map[string]string{
		"":                    "",
		"month":               "month",
		"MONTH":               "month",
		" year , day,month,":  "day,month,year",
		"week,week":           "week",
		"day,week,month,year": "day,week,month,year",
	} {
		var c CalendarUnits
		require.NoError(t, c.UnmarshalText([]byte(text)), "%q", text)
		assert.Equal(t, want, c.String(), "%q", text)
	}
	for _, text := range []string{"hour", "second", "fortnight", "month;year"} {
		var c CalendarUnits
		err := c.UnmarshalText([]byte(text))
		assert.ErrorContains(t, err, "want day, week, month or year", "%q", text)
	}
}

// TestFromRateLimitConfigsCalendar: the limits over xDS whose units are in
// XDSCalendar count in calendar windows, as the same limit in a file with
// calendar: true; the others, and every limit without it, keep windows of
// fixed length from the epoch.
func TestFromRateLimitConfigsCalendar(t *testing.T) {
	resources := []*rlsconfv3.RateLimitConfig{{Name: "llm", Domain: "llm", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "month", RateLimit: policy(5_000_000, rlsconfv3.RateLimitUnit_MONTH)},
		{Key: "hour", RateLimit: policy(100, rlsconfv3.RateLimitUnit_HOUR)},
		{Key: "year", RateLimit: policy(9, rlsconfv3.RateLimitUnit_YEAR)},
		{Key: "free", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
	}}}
	calendar := func(opts Options) map[string]bool {
		t.Helper()
		c, err := FromRateLimitConfigs(resources, opts)
		require.NoError(t, err)
		out := map[string]bool{}
		for _, r := range c.Rules() {
			for _, l := range r.Limits {
				out[strings.TrimPrefix(r.Path, "llm.")] = l.Limit.Calendar
			}
		}
		return out
	}
	opts := Options{DefaultAlgorithm: algorithms.FixedWindow}
	assert.Equal(t, map[string]bool{"month": false, "hour": false, "year": false}, calendar(opts))
	require.NoError(t, opts.XDSCalendar.UnmarshalText([]byte("month")))
	assert.Equal(t, map[string]bool{"month": true, "hour": false, "year": false}, calendar(opts))

	file := mustParse(t, `
domain: llm
descriptors:
  - key: month
    rate_limit: {unit: month, requests_per_unit: 5000000, calendar: true}
`, opts)
	c, err := FromRateLimitConfigs(resources, opts)
	require.NoError(t, err)
	assert.Equal(t, file.Rules()[0].Limits[0].Limit, c.Rules()[0].Limits[0].Limit)

	// As in a file, a calendar limit is a fixed window whatever the
	// default algorithm; the others keep it.
	opts.DefaultAlgorithm = algorithms.SlidingWindowLog
	c, err = FromRateLimitConfigs(resources, opts)
	require.NoError(t, err)
	algs := map[string]algorithms.Algorithm{}
	for _, r := range c.Rules() {
		for _, l := range r.Limits {
			algs[r.Path] = l.Limit.Algorithm
		}
	}
	assert.Equal(t, map[string]algorithms.Algorithm{"llm.month": algorithms.FixedWindow, "llm.hour": algorithms.SlidingWindowLog,
		"llm.year": algorithms.SlidingWindowLog}, algs)
}
