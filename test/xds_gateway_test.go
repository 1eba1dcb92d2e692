package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// gatewayXDS is a server binary that takes its limits from an xDS server
// as Envoy Gateway's node, without TLS (TestXDSFromEnvoyGateway covers
// that), and the listener whose routes the test configures.
type gatewayXDS struct {
	xs       *xdstest.Server
	srv      *serverProcess
	listener string
}

// startGatewayXDS starts an xDS server and a server binary subscribed to
// it, with env on top.
func startGatewayXDS(t *testing.T, env map[string]string) *gatewayXDS {
	t.Helper()
	xs := xdstest.Start(t, nil)
	vars := map[string]string{
		"RLS_CONFIG_SOURCE":                "xds",
		"RLS_XDS_SERVER_URL":               xs.Addr(),
		"RLS_XDS_NODE_ID":                  "envoy-ratelimit",
		"RLS_CONFIG_PATH":                  "/nonexistent/limits/",
		"RLS_XDS_BACKOFF_INITIAL_INTERVAL": "50ms",
		"RLS_XDS_BACKOFF_MAX_INTERVAL":     "500ms",
	}
	for k, v := range env {
		vars[k] = v
	}
	return &gatewayXDS{xs: xs, srv: startServer(t, vars), listener: "default/eg/http"}
}

// serve serves resources as version, and waits until the server has
// accepted them.
func (g *gatewayXDS) serve(t *testing.T, version string, resources ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	before := len(g.xs.Requests())
	g.xs.Set("envoy-ratelimit", version, resources...)
	r, err := g.xs.WaitFrom(before, 20*time.Second, func(r xdstest.Request) bool { return r.ACK(version) || r.NACK() })
	require.NoError(t, err, "%s", g.srv.Output())
	require.False(t, r.NACK(), "version %s refused: %s", version, r.GetErrorDetail().GetMessage())
}

// answer sends what Envoy sends for req on route, on the request path or,
// with streamDone, when the stream is done, and describes the answer as
// holdAnswer reads it: "-" when Envoy sends nothing. The requests must be
// one, in the domain given, with one descriptor.
func (g *gatewayXDS) answer(t *testing.T, route xdstest.Route, domain string, req xdstest.HTTPRequest, streamDone bool) string {
	t.Helper()
	reqs := xdstest.Requests(t, g.listener, route, req)
	if streamDone {
		reqs = xdstest.StreamDoneRequests(t, g.listener, route, req)
	}
	if len(reqs) == 0 {
		return "-"
	}
	require.Len(t, reqs, 1, "one rate limit filter calls")
	require.Equal(t, domain, reqs[0].GetDomain())
	require.Len(t, reqs[0].GetDescriptors(), 1, "the request selects one rule")
	resp, err := g.srv.Client.ShouldRateLimit(context.Background(), reqs[0])
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), 1)
	st := resp.GetStatuses()[0]
	require.Equal(t, resp.GetOverallCode(), st.GetCode(), "one descriptor decides")
	out := st.GetCode().String()
	if l := st.GetCurrentLimit(); l != nil {
		out += fmt.Sprintf(" %d/%s", l.GetRequestsPerUnit(), l.GetUnit())
	}
	if st.GetCurrentLimit() != nil {
		out += fmt.Sprintf(" remaining=%d", st.GetLimitRemaining())
	}
	return out
}

// step is one request of a client and envoyproxy/ratelimit's answer to
// it, as answer describes it: the code, the limit in force, and the hits
// that remain (0 for a denial: limits from xDS count a denied request's
// hits, as envoyproxy/ratelimit does).
type step struct {
	req  xdstest.HTTPRequest
	want string
}

// holdAnswers sends the steps in order and holds each answer to the one
// given.
func (g *gatewayXDS) holdAnswers(t *testing.T, route xdstest.Route, domain string, steps []step) {
	t.Helper()
	for i, s := range steps {
		assert.Equal(t, s.want, g.answer(t, route, domain, s.req, false), "step %d: %+v", i, s.req)
	}
}

// fromInside is a request from a client inside 10.0.0.0/8, which
// TestXDSGatewayInvertedCIDR's route alone selects by address.
func fromInside(method, path string, headers map[string]string) xdstest.HTTPRequest {
	return xdstest.HTTPRequest{Method: method, Path: path, Headers: headers, ClientIP: "10.1.2.3"}
}

// TestXDSGatewayMatches serves the server binary the limits Envoy Gateway
// builds from a policy with a method, a path (prefix and regular
// expression) and a query parameter (distinct and by value) match, and
// sends what Envoy sends for requests each rule selects, or none does.
// Every answer is envoyproxy/ratelimit's to the same descriptors: its rules
// are the same descriptor tree (config_impl.go GetLimit), a key without a
// value matches any value, and a rule with no selector for a request is
// never asked.
func TestXDSGatewayMatches(t *testing.T) {
	g := startGatewayXDS(t, nil)
	route := xdstest.Route{Name: "httproute/default/api/rule/0/match/0/*", Rules: []xdstest.Rule{
		{Methods: []xdstest.MethodMatch{{Method: "POST"}, {Method: "PUT"}}, Requests: 2, Unit: rlsconfv3.RateLimitUnit_HOUR},
		{Path: &xdstest.PathMatch{Value: "/admin"}, Requests: 1, Unit: rlsconfv3.RateLimitUnit_HOUR},
		{Path: &xdstest.PathMatch{Type: xdstest.PathRegex, Value: "/v[0-9]+/items"}, Requests: 3, Unit: rlsconfv3.RateLimitUnit_HOUR},
		{QueryParams: []xdstest.QueryMatch{{Name: "key", Distinct: true}}, Requests: 2, Unit: rlsconfv3.RateLimitUnit_DAY},
		{QueryParams: []xdstest.QueryMatch{{Name: "debug", Value: "true"}}, Requests: 1, Unit: rlsconfv3.RateLimitUnit_DAY},
		{Methods: []xdstest.MethodMatch{{Method: "DELETE", Invert: true}}, Path: &xdstest.PathMatch{Type: xdstest.PathExact, Value: "/purge"},
			Requests: 1, Unit: rlsconfv3.RateLimitUnit_HOUR},
	}}
	g.serve(t, "1", xdstest.Configs(g.listener, route)...)
	awayFromBoundary(time.Hour, 30*time.Second)

	g.holdAnswers(t, route, g.listener, []step{
		// Methods: POST and PUT share one limit; GET is not selected.
		{fromInside("POST", "/", nil), "OK 2/HOUR remaining=1"},
		{fromInside("GET", "/", nil), "-"},
		{fromInside("PUT", "/", nil), "OK 2/HOUR remaining=0"},
		{fromInside("POST", "/", nil), "OVER_LIMIT 2/HOUR remaining=0"},
		// A prefix matches whole segments, with or without a query.
		{fromInside("GET", "/admin/users", nil), "OK 1/HOUR remaining=0"},
		{fromInside("GET", "/admin?page=2", nil), "OVER_LIMIT 1/HOUR remaining=0"},
		{fromInside("GET", "/administrator", nil), "-"},
		// A regular expression matches the whole path.
		{fromInside("GET", "/v1/items", nil), "OK 3/HOUR remaining=2"},
		{fromInside("GET", "/v22/items", nil), "OK 3/HOUR remaining=1"},
		{fromInside("GET", "/v1/items/7", nil), "-"},
		{fromInside("GET", "/v3/items", nil), "OK 3/HOUR remaining=0"},
		{fromInside("GET", "/v1/items", nil), "OVER_LIMIT 3/HOUR remaining=0"},
		// Each value of a distinct parameter has a limit of its own.
		{fromInside("GET", "/?key=a", nil), "OK 2/DAY remaining=1"},
		{fromInside("GET", "/?key=b", nil), "OK 2/DAY remaining=1"},
		{fromInside("GET", "/?key=a", nil), "OK 2/DAY remaining=0"},
		{fromInside("GET", "/?key=a", nil), "OVER_LIMIT 2/DAY remaining=0"},
		{fromInside("GET", "/?other=a", nil), "-"},
		// A parameter's value.
		{fromInside("GET", "/?debug=false", nil), "-"},
		{fromInside("GET", "/?debug=true", nil), "OK 1/DAY remaining=0"},
		{fromInside("GET", "/?x=1&debug=true", nil), "OVER_LIMIT 1/DAY remaining=0"},
		// An inverted method and an exact path, both required.
		{fromInside("DELETE", "/purge", nil), "-"},
		{fromInside("PATCH", "/purge?now", nil), "-"},
		{fromInside("PATCH", "/purge", nil), "OK 1/HOUR remaining=0"},
		{fromInside("GET", "/purge", nil), "OVER_LIMIT 1/HOUR remaining=0"},
	})
}

// TestXDSGatewayInvertedCIDR: a source CIDR match with invert selects the
// clients outside it. Envoy Gateway gives its masked_remote_address the
// value "invert:<cidr>", which the RateLimitConfig matches exactly; with
// distinct, each client's address has its own limit (remote_address
// without a value), else all share one.
func TestXDSGatewayInvertedCIDR(t *testing.T) {
	g := startGatewayXDS(t, nil)
	each := xdstest.Route{Name: "httproute/default/each/rule/0/match/0/*", Rules: []xdstest.Rule{
		{CIDR: "10.0.0.0/8", CIDRInvert: true, CIDRDistinct: true, Requests: 2, Unit: rlsconfv3.RateLimitUnit_HOUR},
	}}
	all := xdstest.Route{Name: "httproute/default/all/rule/0/match/0/*", Rules: []xdstest.Rule{
		{CIDR: "192.0.2.0/24", CIDRInvert: true, Requests: 3, Unit: rlsconfv3.RateLimitUnit_HOUR},
	}}
	cs := xdstest.Configs(g.listener, each, all)
	require.Len(t, cs, 1)
	assert.Contains(t, cs[0].String(), `value:"invert:10.0.0.0/8"`)
	g.serve(t, "1", cs...)
	awayFromBoundary(time.Hour, 30*time.Second)

	from := func(ip string) xdstest.HTTPRequest { return xdstest.HTTPRequest{ClientIP: ip} }
	g.holdAnswers(t, each, g.listener, []step{
		{from("10.9.9.9"), "-"},
		{from("192.0.2.1"), "OK 2/HOUR remaining=1"},
		{from("192.0.2.1"), "OK 2/HOUR remaining=0"},
		{from("192.0.2.1"), "OVER_LIMIT 2/HOUR remaining=0"},
		{from("198.51.100.1"), "OK 2/HOUR remaining=1"},
		{from("2001:db8::1"), "OK 2/HOUR remaining=1"},
	})
	g.holdAnswers(t, all, g.listener, []step{
		{from("192.0.2.1"), "-"},
		{from("10.1.1.1"), "OK 3/HOUR remaining=2"},
		{from("198.51.100.1"), "OK 3/HOUR remaining=1"},
		{from("2001:db8::1"), "OK 3/HOUR remaining=0"},
		{from("10.1.1.2"), "OVER_LIMIT 3/HOUR remaining=0"},
	})
}

// TestXDSGatewaySharedPolicy: a shared rule has the domain of its policy,
// whose rate limit filter Envoy calls apart from the listener's, and one
// limit for every route the policy applies to; a rule of the same policy
// that is not shared stays each route's own.
func TestXDSGatewaySharedPolicy(t *testing.T) {
	g := startGatewayXDS(t, nil)
	policy := []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-org", Distinct: true}}, Requests: 3, Unit: rlsconfv3.RateLimitUnit_HOUR, Shared: "default/orgs/rule/0"},
		{Headers: []xdstest.HeaderMatch{{Name: "x-user-id", Distinct: true}}, Requests: 1, Unit: rlsconfv3.RateLimitUnit_HOUR},
	}
	api := xdstest.Route{Name: "httproute/default/api/rule/0/match/0/*", Rules: policy}
	web := xdstest.Route{Name: "httproute/default/web/rule/0/match/0/*", Rules: policy}
	cs := xdstest.Configs(g.listener, api, web)
	require.Len(t, cs, 2)
	assert.Equal(t, []string{"default/eg/http", "default/orgs"}, []string{cs[0].GetDomain(), cs[1].GetDomain()})
	g.serve(t, "1", cs...)
	awayFromBoundary(time.Hour, 30*time.Second)

	org := func(o string) xdstest.HTTPRequest { return xdstest.HTTPRequest{Headers: map[string]string{"x-org": o}} }
	user := func(u string) xdstest.HTTPRequest {
		return xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": u}}
	}
	g.holdAnswers(t, api, "default/orgs", []step{{org("acme"), "OK 3/HOUR remaining=2"}})
	g.holdAnswers(t, web, "default/orgs", []step{{org("acme"), "OK 3/HOUR remaining=1"}, {org("globex"), "OK 3/HOUR remaining=2"}})
	g.holdAnswers(t, api, "default/orgs", []step{{org("acme"), "OK 3/HOUR remaining=0"}})
	g.holdAnswers(t, web, "default/orgs", []step{{org("acme"), "OVER_LIMIT 3/HOUR remaining=0"}})
	g.holdAnswers(t, api, g.listener, []step{{user("alice"), "OK 1/HOUR remaining=0"}, {user("alice"), "OVER_LIMIT 1/HOUR remaining=0"}})
	g.holdAnswers(t, web, g.listener, []step{{user("alice"), "OK 1/HOUR remaining=0"}})
}

// TestXDSGatewayCostsAndLimitsFromMetadata: a request cost is the
// descriptor's hits_addend, which envoyproxy/ratelimit takes in place of
// one hit (utils.GetHitsAddends); a limit from metadata is the
// descriptor's limit override, which replaces the configured limit for
// that request and counts apart from it (a window of its own unit), as
// there; a response cost is sent when the stream is done, with the hits
// the response's metadata says, and is taken, which the next check of the
// request path (cost 0) shows.
func TestXDSGatewayCostsAndLimitsFromMetadata(t *testing.T) {
	g := startGatewayXDS(t, nil)
	three, zero := uint64(3), uint64(0)
	route := xdstest.Route{Name: "httproute/default/llm/rule/0/match/0/*", Rules: []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-user-id", Distinct: true}}, Requests: 10, Unit: rlsconfv3.RateLimitUnit_HOUR,
			RequestCost: &xdstest.Cost{Number: &three}},
		{Headers: []xdstest.HeaderMatch{{Name: "x-tenant", Distinct: true}}, Requests: 5, Unit: rlsconfv3.RateLimitUnit_DAY,
			LimitFromMetadata: &xdstest.MetadataKey{Namespace: "io.example.tiers", Key: "limit"}},
		{Headers: []xdstest.HeaderMatch{{Name: "x-api-key", Distinct: true}}, Requests: 100, Unit: rlsconfv3.RateLimitUnit_HOUR,
			RequestCost:  &xdstest.Cost{Number: &zero},
			ResponseCost: &xdstest.Cost{Metadata: &xdstest.MetadataKey{Namespace: "io.envoy.ai_gateway", Key: "llm_total_token"}}},
	}}
	g.serve(t, "1", xdstest.Configs(g.listener, route)...)
	awayFromBoundary(time.Hour, 30*time.Second)

	header := func(k, v string) map[string]string { return map[string]string{k: v} }
	tier := func(n int, unit string) map[string]map[string]any {
		return map[string]map[string]any{"io.example.tiers": {"limit": map[string]any{"requests_per_unit": n, "unit": unit}}}
	}
	g.holdAnswers(t, route, g.listener, []step{
		// Three hits a request, ten an hour.
		{xdstest.HTTPRequest{Headers: header("x-user-id", "alice")}, "OK 10/HOUR remaining=7"},
		{xdstest.HTTPRequest{Headers: header("x-user-id", "alice")}, "OK 10/HOUR remaining=4"},
		{xdstest.HTTPRequest{Headers: header("x-user-id", "alice")}, "OK 10/HOUR remaining=1"},
		{xdstest.HTTPRequest{Headers: header("x-user-id", "alice")}, "OVER_LIMIT 10/HOUR remaining=0"},
		{xdstest.HTTPRequest{Headers: header("x-user-id", "bob")}, "OK 10/HOUR remaining=7"},
		// The tenant's limit from metadata, else the rule's.
		{xdstest.HTTPRequest{Headers: header("x-tenant", "t1"), Metadata: tier(2, "HOUR")}, "OK 2/HOUR remaining=1"},
		{xdstest.HTTPRequest{Headers: header("x-tenant", "t1"), Metadata: tier(2, "HOUR")}, "OK 2/HOUR remaining=0"},
		{xdstest.HTTPRequest{Headers: header("x-tenant", "t1"), Metadata: tier(2, "HOUR")}, "OVER_LIMIT 2/HOUR remaining=0"},
		{xdstest.HTTPRequest{Headers: header("x-tenant", "t1")}, "OK 5/DAY remaining=4"},
		{xdstest.HTTPRequest{Headers: header("x-tenant", "t1"), Metadata: tier(2, "hour")}, "OK 5/DAY remaining=3"},
		// The token budget: a check on the way in, the tokens at the end.
		{xdstest.HTTPRequest{Headers: header("x-api-key", "k1")}, "OK 100/HOUR remaining=100"},
	})

	done := xdstest.HTTPRequest{Headers: header("x-api-key", "k1"),
		Metadata: map[string]map[string]any{"io.envoy.ai_gateway": {"llm_total_token": 60}}}
	reqs := xdstest.StreamDoneRequests(t, g.listener, route, done)
	require.Len(t, reqs, 1)
	d := reqs[0].GetDescriptors()
	require.Len(t, d, 1)
	assert.EqualValues(t, 60, d[0].GetHitsAddend().GetValue(), "the response's tokens")
	assert.Equal(t, "OK 100/HOUR remaining=40", g.answer(t, route, g.listener, done, true), "taken when the stream is done")
	assert.Equal(t, "OK 100/HOUR remaining=40", g.answer(t, route, g.listener, done, false), "the next check sees it")
	assert.Equal(t, "-", g.answer(t, route, g.listener, xdstest.HTTPRequest{Headers: header("x-tenant", "t1")}, true),
		"no response cost, nothing at the end")
}

// TestXDSMergeDomains: with envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG, two
// resources of one domain are merged, as there; a descriptor that both give
// is refused back to the xDS server, and the limits in force stay. Without
// it, the second resource of a domain is refused.
func TestXDSMergeDomains(t *testing.T) {
	a := &rlsconfv3.RateLimitConfig{Name: "a", Domain: "merged", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key1", Value: "value1", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1, Unit: rlsconfv3.RateLimitUnit_HOUR}},
	}}
	b := &rlsconfv3.RateLimitConfig{Name: "b", Domain: "merged", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key2", Value: "value2", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 2, Unit: rlsconfv3.RateLimitUnit_HOUR}},
	}}
	again := &rlsconfv3.RateLimitConfig{Name: "c", Domain: "merged", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key2", Value: "value2", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 9, Unit: rlsconfv3.RateLimitUnit_HOUR}},
	}}
	ask := func(t *testing.T, g *gatewayXDS, key, value string) string {
		t.Helper()
		resp, err := g.srv.Client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "merged", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlstest.Descriptor(key, value)}})
		require.NoError(t, err)
		return resp.GetOverallCode().String()
	}
	refusal := func(t *testing.T, g *gatewayXDS, version string) string {
		t.Helper()
		before := len(g.xs.Requests())
		g.xs.Set("envoy-ratelimit", version, a, b, again)
		r, err := g.xs.WaitFrom(before, 20*time.Second, func(r xdstest.Request) bool { return r.NACK() || r.ACK(version) })
		require.NoError(t, err)
		require.True(t, r.NACK(), "version %s is refused", version)
		return r.GetErrorDetail().GetMessage()
	}

	t.Run("MERGE_DOMAIN_CONFIG=true", func(t *testing.T) {
		g := startGatewayXDS(t, map[string]string{"MERGE_DOMAIN_CONFIG": "true"})
		g.serve(t, "1", a, b)
		awayFromBoundary(time.Hour, 30*time.Second)
		assert.Equal(t, []string{"OK", "OVER_LIMIT"}, []string{ask(t, g, "key1", "value1"), ask(t, g, "key1", "value1")})
		assert.Equal(t, "OK", ask(t, g, "key2", "value2"))

		// The xDS server sends the resources in an order of its own.
		msg := refusal(t, g, "2")
		assert.Contains(t, msg, `descriptors[0]: duplicate descriptor: key "key2" and value "value2" are also those of RateLimitConfig `)
		assert.True(t, strings.Contains(msg, `RateLimitConfig "b"`) && strings.Contains(msg, `RateLimitConfig "c"`), msg)
		assert.Equal(t, []string{"OK", "OVER_LIMIT"}, []string{ask(t, g, "key2", "value2"), ask(t, g, "key2", "value2")}, "version 1 stays in force")
	})
	t.Run("without it", func(t *testing.T) {
		g := startGatewayXDS(t, nil)
		msg := refusal(t, g, "1")
		assert.Contains(t, msg, `domain: duplicate domain "merged" (also in RateLimitConfig `)
	})
}

// TestXDSGatewayTokenBudget: a token budget as Envoy AI Gateway configures
// it through Envoy Gateway, a rule whose request cost is 0 and whose
// response cost is the tokens the response used, which Envoy sends when
// the stream is done. Neither quota_mode nor any field of ratewarden's is
// set, and the budget holds: the charge that takes the key past its budget
// is recorded, and the next check is denied. Every answer is
// envoyproxy/ratelimit's, whose fixed window adds every charge before it
// compares.
func TestXDSGatewayTokenBudget(t *testing.T) {
	g := startGatewayXDS(t, nil)
	zero := uint64(0)
	route := xdstest.Route{Name: "httproute/default/llm/rule/0/match/0/*", Rules: []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-api-key", Distinct: true}}, Requests: 100, Unit: rlsconfv3.RateLimitUnit_HOUR,
			RequestCost:  &xdstest.Cost{Number: &zero},
			ResponseCost: &xdstest.Cost{Metadata: &xdstest.MetadataKey{Namespace: "io.envoy.ai_gateway", Key: "llm_total_token"}}},
	}}
	g.serve(t, "1", xdstest.Configs(g.listener, route)...)
	awayFromBoundary(time.Hour, 30*time.Second)

	check := xdstest.HTTPRequest{Headers: map[string]string{"x-api-key": "k1"}}
	spent := func(tokens int) xdstest.HTTPRequest {
		return xdstest.HTTPRequest{Headers: check.Headers, Metadata: map[string]map[string]any{"io.envoy.ai_gateway": {"llm_total_token": tokens}}}
	}
	for i, s := range []struct {
		req  xdstest.HTTPRequest
		done bool
		want string
	}{
		{check, false, "OK 100/HOUR remaining=100"},
		{spent(60), true, "OK 100/HOUR remaining=40"},
		{check, false, "OK 100/HOUR remaining=40"},
		// 60 + 70 = 130 of 100: recorded, over.
		{spent(70), true, "OVER_LIMIT 100/HOUR remaining=0"},
		{check, false, "OVER_LIMIT 100/HOUR remaining=0"},
		{check, false, "OVER_LIMIT 100/HOUR remaining=0"},
		// Another key has its own budget.
		{xdstest.HTTPRequest{Headers: map[string]string{"x-api-key": "k2"}}, false, "OK 100/HOUR remaining=100"},
	} {
		assert.Equal(t, s.want, g.answer(t, route, g.listener, s.req, s.done), "step %d (stream done: %t)", i, s.done)
	}
}
