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
	"github.com/ratewarden/ratewarden/internal/rls"
)

// scrapeText serves m's handler and returns the text it writes.
func scrapeText(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

func TestRatelimitNames(t *testing.T) {
	m := New(WithNames(NamesRatelimit))
	m.ObserveConfigLoaded()
	base := rls.LimitDecision{Domain: "edge", Descriptor: "edge.path_/login.remote_address", Algorithm: algorithms.FixedWindow, Window: time.Minute, Hits: 1}
	within, near, over, shadowed := base, base, base, base
	near.NearLimit = true
	over.OverLimit = true
	shadowed.OverLimit, shadowed.Shadowed = true, true
	for _, d := range []rls.LimitDecision{within, near, over, shadowed} {
		m.ObserveLimit(d)
	}
	top := base
	top.Descriptor, top.Hits = "edge.api_key", 3
	m.ObserveLimit(top)
	m.ObserveRequest(rls.RequestOutcome{Duration: 3 * time.Millisecond, Code: rlsv3.RateLimitResponse_OK, GRPCCode: codes.OK})
	m.ObserveRequest(rls.RequestOutcome{Duration: time.Millisecond, GRPCCode: codes.Unavailable})
	m.ObserveRequest(rls.RequestOutcome{GRPCCode: codes.InvalidArgument})
	m.ObserveConfigReload(errors.New("broken"))
	m.ObserveConfigReload(nil)

	text := scrapeText(t, m)
	got := parseText(t, text)
	deep := `{domain="edge",key1="path_/login",key2="remote_address"}`
	for series, want := range map[string]float64{
		RatelimitTotalHits + deep:                                                   4,
		RatelimitWithinLimit + deep:                                                 2,
		RatelimitNearLimit + deep:                                                   1,
		RatelimitOverLimit + deep:                                                   2,
		RatelimitShadowMode + deep:                                                  1,
		RatelimitTotalHits + `{domain="edge",key1="api_key"}`:                       3,
		RatelimitOverLimit + `{domain="edge",key1="api_key"}`:                       0,
		RatelimitTotalRequests + `{grpc_method="ShouldRateLimit"}`:                  3,
		RatelimitResponseTime + `_count{grpc_method="ShouldRateLimit"}`:             3,
		RatelimitResponseTime + `_bucket{grpc_method="ShouldRateLimit",le="0.005"}`: 3,
		RatelimitShouldRateLimitError + `{err_type="redis_error"}`:                  1,
		RatelimitShouldRateLimitError + `{err_type="service_error"}`:                1,
		RatelimitConfigLoadSuccess:                                                  2,
		RatelimitConfigLoadError:                                                    1,
	} {
		assert.Equal(t, want, got[series], series)
	}
	// The per-rule counters are counters, as the statsd exporter makes
	// them, with no _total suffix; the response time is a histogram.
	for _, name := range ruleStats {
		assert.Contains(t, text, "# TYPE "+name+" counter\n")
	}
	assert.Contains(t, text, "# TYPE "+RatelimitTotalRequests+" counter\n")
	assert.Contains(t, text, "# TYPE "+RatelimitResponseTime+" histogram\n")
	assert.NotContains(t, text, Prefix, "ratewarden's names are not asked for")
	assert.Contains(t, text, "process_resident_memory_bytes", "the process metrics stay")
}

func TestBothNames(t *testing.T) {
	m := New(WithNames(NamesBoth))
	m.ObserveLimit(rls.LimitDecision{Domain: "d", Descriptor: "d.user", Algorithm: algorithms.TokenBucket, Window: time.Minute, Hits: 2})
	got := scrape(t, m)
	assert.Equal(t, 2.0, got[RatelimitTotalHits+`{domain="d",key1="user"}`])
	assert.Equal(t, 2.0, got[rule(RuleHits, "d.user", "", "token_bucket", "1m")])

	text := scrapeText(t, New())
	assert.NotContains(t, text, "ratelimit_service", "ratewarden's names alone by default")
}

func TestRatelimitLabels(t *testing.T) {
	for descriptor, want := range map[string][]string{
		"edge.api_key":                      {"edge", "api_key"},
		"edge.path_/login.remote_address":   {"edge", "path_/login", "remote_address"},
		"edge.a_1.b_2.c_3":                  {"edge", "a_1", "b_2"},
		"edge.remote_address_10.1.2.3":      {"edge", "remote_address_10_1_2_3"},
		"edge.k_v1:v2|v3.x_y":               {"edge", "k_v1_v2_v3", "x_y"},
		"edge.version_1.2":                  {"edge", "version_1", "2"},
		"edge":                              {"edge", ""},
		"gw.httproute/ns/r/rule/0_x.rule-0": {"gw", "httproute/ns/r/rule/0_x", "rule-0"},
	} {
		assert.Equal(t, want, ratelimitLabels(descriptor), descriptor)
	}
}

func TestParseNames(t *testing.T) {
	for _, n := range []Names{NamesRatewarden, NamesRatelimit, NamesBoth} {
		got, err := ParseNames(n.String())
		require.NoError(t, err)
		assert.Equal(t, n, got)
	}
	_, err := ParseNames("statsd")
	assert.ErrorContains(t, err, `"statsd"`)
	assert.True(t, strings.HasPrefix(err.Error(), "metrics: "))
}
