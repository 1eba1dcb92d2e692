package test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// TestTokenBudgetGatewayMonths holds "Calendar months" in
// docs/token-budgets-gateway.md to the limit the server loads from what
// Envoy Gateway builds of token-budget-policy.yaml. As the Deployment runs
// it (RLS_XDS_CALENDAR=month), the budget is the UTC calendar month, as the
// same budget in a limits file with calendar: true: the 2nd and the 3rd of
// December share a window, which starts on the 1st and ends on 1 January.
// Without that variable a Month over xDS is a window of 30 days counted
// from the epoch, as envoyproxy/ratelimit counts it, since nothing in the
// resource can ask for the calendar: its windows start on the days the page
// gives, 5 days earlier each year (6 across a 29 February), 13 of them in
// 2027; two windows meet inside a calendar month, so a key may spend two
// budgets in one; and 365.25 / 30 windows pass in an average year.
func TestTokenBudgetGatewayMonths(t *testing.T) {
	dec2, dec3 := time.Date(2026, 12, 2, 23, 59, 59, 0, time.UTC), time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	opts := deploymentXDSOptions(t)
	resources := xdstest.Configs(gatewayListener, tokenBudgetRoute(t))
	c, err := config.FromRateLimitConfigs(resources, opts)
	require.NoError(t, err)
	rule := budgetRule(t, c, "k1")
	require.Len(t, rule.Limits, 1)
	cal := rule.Limits[0].Limit
	assert.True(t, cal.Calendar, "the Deployment's RLS_XDS_CALENDAR=month")
	assert.Equal(t, "month", cal.CalendarUnit())
	assert.Equal(t, cal.WindowIndex(dec2), cal.WindowIndex(dec3))
	assert.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), cal.WindowStart(cal.WindowIndex(dec3)).UTC())
	assert.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), cal.WindowStart(cal.WindowIndex(dec3)+1).UTC())

	// The same budget in a limits file with calendar: true is the same limit.
	fileOpts, err := serverConfigOptions()
	require.NoError(t, err)
	file, err := config.Parse([]config.File{{Name: "llm.yaml", Data: []byte(`
domain: llm
descriptors:
  - key: api_key
    charge: window
    rate_limit: {unit: month, requests_per_unit: 5000000, calendar: true}
`)}}, fileOpts)
	require.NoError(t, err)
	rules := file.Rules()
	require.Len(t, rules, 1)
	assert.Equal(t, rules[0].Limits[0].Limit, cal)

	// Without RLS_XDS_CALENDAR: 30 days from the epoch.
	opts.XDSCalendar = 0
	c, err = config.FromRateLimitConfigs(resources, opts)
	require.NoError(t, err)
	l := budgetRule(t, c, "k1").Limits[0].Limit
	assert.Equal(t, 30*24*time.Hour, l.Window)
	assert.False(t, l.Calendar, "a RateLimitConfig has no field to ask for the calendar")

	// starts lists the days of the year y on which a window starts.
	starts := func(l algorithms.Limit, y int) []string {
		from, to := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(y+1, 1, 1, 0, 0, 0, 0, time.UTC)
		var out []string
		for i := l.WindowIndex(from); ; i++ {
			s := l.WindowStart(i).UTC()
			if !s.Before(to) {
				return out
			}
			if !s.Before(from) {
				out = append(out, s.Format("2 Jan"))
			}
		}
	}
	assert.Equal(t, []string{"7 Jan", "6 Feb", "8 Mar", "7 Apr", "7 May", "6 Jun", "6 Jul", "5 Aug", "4 Sep", "4 Oct", "3 Nov", "3 Dec"}, starts(l, 2026))
	in2027 := starts(l, 2027)
	assert.Len(t, in2027, 13, "13 windows start in 2027")
	assert.Equal(t, "2 Jan", in2027[0], "5 days earlier than in 2026")
	assert.Equal(t, "27 Jan", starts(l, 2028)[0])
	assert.Equal(t, "21 Jan", starts(l, 2029)[0], "6 days earlier across 29 February 2028")
	assert.InDelta(t, 12.175, (365.25*24*time.Hour).Hours()/l.Window.Hours(), 0.001, "windows in an average year")

	// A window ends inside December 2026, on the 3rd: a key may spend a
	// budget on the 1st and 2nd, and another from the 3rd.
	assert.Equal(t, l.WindowIndex(dec2)+1, l.WindowIndex(dec3))
	assert.Equal(t, dec3, l.WindowStart(l.WindowIndex(dec3)).UTC())
	// Never more than two in one: windows of 30 days start at most once
	// inside a month of at most 31.
	for m := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); m.Year() < 2030; m = m.AddDate(0, 1, 0) {
		last := m.AddDate(0, 1, 0).Add(-time.Microsecond)
		assert.LessOrEqual(t, l.WindowIndex(last)-l.WindowIndex(m), int64(1), "%s", m.Format("January 2006"))
	}
}
