package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
)

// scrape serves m's handler and returns every sample, keyed by its series as
// the text format writes it: name{label="value",...}, labels sorted.
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return parseText(t, string(body))
}

// parseText parses the Prometheus text format into series → value.
func parseText(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples, err := promtext.Parse(text)
	require.NoError(t, err)
	return samples
}

func rule(name, descriptor, limit, algorithm, window string) string {
	return name + `{algorithm="` + algorithm + `",descriptor="` + descriptor +
		`",domain="d",limit="` + limit + `",window="` + window + `"}`
}

// TestOverridesShareOneSeries: limit overrides, whose windows the clients
// choose, are counted under the window "override", so a thousand windows make
// one series.
func TestOverridesShareOneSeries(t *testing.T) {
	m := New()
	for i := range 1000 {
		m.ObserveLimit(rls.LimitDecision{Domain: "d", Descriptor: "d", Algorithm: algorithms.SlidingWindowCounter,
			Window: time.Duration(i+1) * time.Second, Override: true, Hits: 1})
	}
	got := scrape(t, m)
	assert.Equal(t, 1000.0, got[rule(RuleHits, "d", "", "sliding_window_counter", "override")])
	n := 0
	for series := range got {
		if strings.HasPrefix(series, RuleHits+"{") {
			n++
		}
	}
	assert.Equal(t, 1, n)
}

func TestRuleCounters(t *testing.T) {
	m := New()
	base := rls.LimitDecision{Domain: "d", Descriptor: "d.user", Limit: "per_user",
		Algorithm: algorithms.TokenBucket, Window: time.Minute, Hits: 2}
	within := base
	near := base
	near.NearLimit = true
	over := base
	over.OverLimit = true
	shadowed := over
	shadowed.Shadowed = true
	for _, d := range []rls.LimitDecision{within, within, near, over, shadowed} {
		m.ObserveLimit(d)
	}
	other := base
	other.Descriptor, other.Limit, other.Algorithm, other.Window, other.Hits = "d.ip", "", algorithms.FixedWindow, 5*time.Second, 1
	m.ObserveLimit(other)

	got := scrape(t, m)
	for series, want := range map[string]float64{
		rule(RuleHits, "d.user", "per_user", "token_bucket", "1m"):            10,
		rule(RuleWithinLimitHits, "d.user", "per_user", "token_bucket", "1m"): 6,
		rule(RuleNearLimitHits, "d.user", "per_user", "token_bucket", "1m"):   2,
		rule(RuleOverLimitHits, "d.user", "per_user", "token_bucket", "1m"):   4,
		rule(RuleShadowModeHits, "d.user", "per_user", "token_bucket", "1m"):  2,
		rule(RuleHits, "d.ip", "", "fixed_window", "5s"):                      1,
		rule(RuleWithinLimitHits, "d.ip", "", "fixed_window", "5s"):           1,
	} {
		assert.Equal(t, want, got[series], series)
	}
	// No decision of d.ip was near, over or shadowed: no series for them.
	for _, name := range []string{RuleNearLimitHits, RuleOverLimitHits, RuleShadowModeHits} {
		_, ok := got[rule(name, "d.ip", "", "fixed_window", "5s")]
		assert.False(t, ok, name)
	}
}

func TestRequestAndBackendMetrics(t *testing.T) {
	m := New()
	got := scrape(t, m)
	for _, kind := range []string{"timeout", "unavailable", "circuit_open", "other"} {
		v, ok := got[BackendErrors+`{kind="`+kind+`"}`]
		assert.True(t, ok, "every error kind is shown from the start: %s", kind)
		assert.Zero(t, v)
	}
	assert.Equal(t, 1.0, got[BreakerState+`{state="closed"}`])
	assert.Equal(t, 0.0, got[BreakerState+`{state="open"}`])

	m.ObserveRequest(rls.RequestOutcome{Duration: 300 * time.Microsecond, Code: rlsv3.RateLimitResponse_OK, GRPCCode: codes.OK})
	m.ObserveRequest(rls.RequestOutcome{Duration: 4 * time.Millisecond, Code: rlsv3.RateLimitResponse_OVER_LIMIT, GRPCCode: codes.OK})
	m.ObserveRequest(rls.RequestOutcome{Duration: 12 * time.Millisecond, Code: rlsv3.RateLimitResponse_UNKNOWN, GRPCCode: codes.Unavailable})
	m.ObserveBackend(breaker.Call{Duration: 200 * time.Microsecond})
	m.ObserveBackend(breaker.Call{Duration: 10 * time.Millisecond, Failure: rate.FailureTimeout})
	m.ObserveBackend(breaker.Call{Duration: time.Millisecond, Failure: rate.FailureUnavailable})
	m.ObserveBackend(breaker.Call{Failure: rate.FailureCircuitOpen})
	m.ObserveBackend(breaker.Call{Failure: rate.FailureCircuitOpen})
	m.ObserveBackend(breaker.Call{Duration: time.Millisecond, Failure: rate.FailureCanceled})
	m.ObserveBreaker(breaker.Open)
	m.ObserveBreaker(breaker.HalfOpen)
	m.ObserveBreaker(breaker.Open)

	got = scrape(t, m)
	for series, want := range map[string]float64{
		Requests + `{code="OK",grpc_code="OK"}`:               1,
		Requests + `{code="OVER_LIMIT",grpc_code="OK"}`:       1,
		Requests + `{code="UNKNOWN",grpc_code="Unavailable"}`: 1,
		RequestDuration + `_count`:                            3,
		RequestDuration + `_bucket{le="0.0005"}`:              1,
		RequestDuration + `_bucket{le="0.005"}`:               2,
		RequestDuration + `_bucket{le="0.015"}`:               3,
		BackendDuration + `_count`:                            4, // not the refused calls
		BackendDuration + `_bucket{le="0.00025"}`:             1,
		BackendErrors + `{kind="timeout"}`:                    1,
		BackendErrors + `{kind="unavailable"}`:                1,
		BackendErrors + `{kind="circuit_open"}`:               2,
		BackendErrors + `{kind="other"}`:                      0,
		BreakerState + `{state="closed"}`:                     0,
		BreakerState + `{state="open"}`:                       1,
		BreakerState + `{state="half_open"}`:                  0,
		BreakerOpened:                                         2,
		ConfigReloads + `{result="success"}`:                  0,
		ConfigLastReloadSuccessful:                            1,
	} {
		assert.Equal(t, want, got[series], series)
	}
	_, canceled := got[BackendErrors+`{kind="canceled"}`]
	assert.False(t, canceled, "a caller going away is no backend error")
	assert.Contains(t, got, "go_goroutines", "the runtime collector is registered")
}

func TestConfigReloads(t *testing.T) {
	m := New()
	m.ObserveConfigReload(nil)
	m.ObserveConfigReload(errors.New("config: bad.yaml:3: unknown field"))
	got := scrape(t, m)
	assert.Equal(t, 1.0, got[ConfigReloads+`{result="success"}`])
	assert.Equal(t, 1.0, got[ConfigReloads+`{result="failure"}`])
	assert.Equal(t, 0.0, got[ConfigLastReloadSuccessful])
	m.ObserveConfigReload(nil)
	got = scrape(t, m)
	assert.Equal(t, 2.0, got[ConfigReloads+`{result="success"}`])
	assert.Equal(t, 1.0, got[ConfigLastReloadSuccessful])
}

// TestConfigLoaded: ConfigLoaded is 0 until limits are in force, whether
// they come at the start or with a later reload, and stays 1 through failed
// reloads, which keep the limits in force.
func TestConfigLoaded(t *testing.T) {
	atStart := New()
	assert.Equal(t, 0.0, scrape(t, atStart)[ConfigLoaded], "nothing loaded yet")
	atStart.ObserveConfigLoaded()
	assert.Equal(t, 1.0, scrape(t, atStart)[ConfigLoaded])
	atStart.ObserveConfigReload(errors.New("config: bad.yaml:3: unknown field"))
	assert.Equal(t, 1.0, scrape(t, atStart)[ConfigLoaded], "a failed reload keeps the limits in force")

	later := New()
	later.ObserveConfigReload(errors.New("config: no configuration files"))
	assert.Equal(t, 0.0, scrape(t, later)[ConfigLoaded], "a failed first load leaves none in force")
	later.ObserveConfigReload(nil)
	assert.Equal(t, 1.0, scrape(t, later)[ConfigLoaded])
}

// TestBackendHealth: BackendHealth shows one state at a time, ok from the
// start.
func TestBackendHealth(t *testing.T) {
	m := New()
	series := func(state string) string { return BackendHealth + `{state="` + state + `"}` }
	got := scrape(t, m)
	assert.Equal(t, map[string]float64{"ok": 1, "unreachable": 0, "refuses_writes": 0},
		map[string]float64{"ok": got[series("ok")], "unreachable": got[series("unreachable")], "refuses_writes": got[series("refuses_writes")]})
	for _, c := range []BackendCheck{BackendRefusesWrites, BackendUnreachable, BackendOK} {
		m.ObserveBackendCheck(c)
		got := scrape(t, m)
		for _, other := range []BackendCheck{BackendOK, BackendUnreachable, BackendRefusesWrites} {
			want := 0.0
			if other == c {
				want = 1
			}
			require.Contains(t, got, series(other.String()))
			assert.Equal(t, want, got[series(other.String())], "after %s: %s", c, other)
		}
	}
	assert.Equal(t, "BackendCheck(9)", BackendCheck(9).String())
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := New(), New()
	a.ObserveConfigReload(nil)
	assert.Equal(t, 1.0, scrape(t, a)[ConfigReloads+`{result="success"}`])
	assert.Equal(t, 0.0, scrape(t, b)[ConfigReloads+`{result="success"}`])
}

func TestWindowLabel(t *testing.T) {
	for w, want := range map[time.Duration]string{
		time.Second:         "1s",
		90 * time.Second:    "90s",
		5 * time.Minute:     "5m",
		time.Hour:           "1h",
		36 * time.Hour:      "36h",
		7 * 24 * time.Hour:  "7d",
		30 * 24 * time.Hour: "30d",
		0:                   "0s",
	} {
		assert.Equal(t, want, windowLabel(w), w.String())
	}
}

// TestLeaseCounters counts what leases do per rule: one lease taken of 100
// hits, 60 of them served, 40 given back.
func TestLeaseCounters(t *testing.T) {
	m := New()
	op := &rate.Op{Key: rate.Key{Domain: "edge"}, Tag: "edge.api_key", Limit: algorithms.Limit{Algorithm: algorithms.SlidingWindowLog}}
	m.ObserveLease(op, lease.Taken, 100)
	for range 60 {
		m.ObserveLease(op, lease.Served, 1)
	}
	m.ObserveLease(op, lease.GivenBack, 40)
	got := scrape(t, m)
	labels := `{algorithm="sliding_window_log",descriptor="edge.api_key",domain="edge"`
	assert.Equal(t, 1.0, got[LeaseTaken+labels+`}`])
	assert.Equal(t, 100.0, got[LeaseHits+labels+`,result="leased"}`])
	assert.Equal(t, 60.0, got[LeaseHits+labels+`,result="served"}`])
	assert.Equal(t, 40.0, got[LeaseHits+labels+`,result="given_back"}`])

	rl := New(WithNames(NamesRatelimit))
	rl.ObserveLease(op, lease.Taken, 100)
	assert.NotContains(t, scrape(t, rl), LeaseTaken+labels+`}`, "envoyproxy/ratelimit's names have no leases")
}

// TestRLQSCounters counts what the quota service does per rule: two grants
// of 30 hits, an Envoy's report of 40 allowed and 2 denied, 7 of the
// allowed beyond its grants, a grant cut short, and a stream open.
func TestRLQSCounters(t *testing.T) {
	m := New()
	op := &rate.Op{Key: rate.Key{Domain: "edge"}, Tag: "edge.tenant", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}}
	m.ObserveGrant(op, 30)
	m.ObserveGrant(op, 30)
	m.ObserveUsage(op, 40, 2)
	m.ObserveUngranted(op, 7)
	m.ObserveShort(op)
	m.ObserveStreams(1)
	m.ObserveStreams(1)
	m.ObserveStreams(-1)
	got := scrape(t, m)
	labels := `{algorithm="fixed_window",descriptor="edge.tenant",domain="edge"`
	assert.Equal(t, 2.0, got[RLQSGrants+labels+`}`])
	assert.Equal(t, 60.0, got[RLQSGrantedHits+labels+`}`])
	assert.Equal(t, 40.0, got[RLQSReported+labels+`,result="allowed"}`])
	assert.Equal(t, 2.0, got[RLQSReported+labels+`,result="denied"}`])
	assert.Equal(t, 7.0, got[RLQSUngranted+labels+`}`])
	assert.Equal(t, 1.0, got[RLQSGrantsShort+labels+`}`])
	assert.Equal(t, 1.0, got[RLQSStreams])

	// A rule's first report brings its counters at 0.
	other := &rate.Op{Key: rate.Key{Domain: "edge"}, Tag: "edge.user", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket}}
	m.ObserveUsage(other, 3, 0)
	got = scrape(t, m)
	labels = `{algorithm="token_bucket",descriptor="edge.user",domain="edge"`
	for _, name := range []string{RLQSUngranted, RLQSGrantsShort} {
		v, ok := got[name+labels+`}`]
		assert.True(t, ok && v == 0, "%s at 0", name)
	}
}
