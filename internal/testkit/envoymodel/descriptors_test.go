package envoymodel_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// listener builds an HTTPListener from a route configuration in YAML and a
// rate limit filter of domain "d".
func listener(t *testing.T, routes string) envoymodel.HTTPListener {
	t.Helper()
	rc := &routev3.RouteConfiguration{}
	require.NoError(t, envoymodel.FromYAML([]byte(routes), rc))
	require.NoError(t, envoymodel.Validate(rc))
	return envoymodel.HTTPListener{Routes: rc, RateLimit: &ratelimitfilterv3.RateLimit{Domain: "d"}}
}

func rateLimits(t *testing.T, yaml string) []*routev3.RateLimit {
	t.Helper()
	vh := &routev3.VirtualHost{}
	yaml = strings.ReplaceAll(yaml, "\t", "  ")
	require.NoError(t, envoymodel.FromYAML([]byte("name: v\ndomains: ['*']\nrate_limits: "+yaml), vh))
	require.NoError(t, envoymodel.Validate(vh))
	return vh.GetRateLimits()
}

func TestDescriptorsActions(t *testing.T) {
	addr := netip.MustParseAddr("2001:db8::1")
	req := envoymodel.Request{
		Method: "PUT", Path: "/a/b?x=1", Authority: "api.example.com", RemoteAddress: addr,
		Headers: map[string]string{"x-tenant": "t1", "x-plan": "Gold"}, SourceCluster: "edge",
	}
	for _, tc := range []struct {
		name, limits string
		req          envoymodel.Request
		want         []string
	}{
		{"remote address", `[{actions: [{remote_address: {}}]}]`, req, []string{"remote_address=2001:db8::1"}},
		{"IPv4-mapped remote address", `[{actions: [{remote_address: {}}]}]`,
			envoymodel.Request{RemoteAddress: netip.MustParseAddr("::ffff:192.0.2.1")}, []string{"remote_address=192.0.2.1"}},
		{"no remote address sends nothing", `[{actions: [{remote_address: {}}, {generic_key: {descriptor_value: g}}]}]`,
			envoymodel.Request{}, []string{}},
		{"request header", `[{actions: [{request_headers: {header_name: X-Tenant, descriptor_key: tenant}}]}]`, req, []string{"tenant=t1"}},
		{"pseudo-header", `[{actions: [{request_headers: {header_name: ":method", descriptor_key: m}}]}]`, req, []string{"m=PUT"}},
		{"missing header drops the descriptor", `[{actions: [{generic_key: {descriptor_value: g}}, {request_headers: {header_name: x-none, descriptor_key: n}}]}, {actions: [{generic_key: {descriptor_value: h}}]}]`,
			req, []string{"generic_key=h"}},
		{"skip_if_absent drops only the entry", `[{actions: [{generic_key: {descriptor_value: g}}, {request_headers: {header_name: x-none, descriptor_key: n, skip_if_absent: true}}]}]`,
			req, []string{"generic_key=g"}},
		{"generic key with a key", `[{actions: [{generic_key: {descriptor_key: k, descriptor_value: v}}]}]`, req, []string{"k=v"}},
		{"header value match keys default to header_match", `[{actions: [{header_value_match: {descriptor_value: put, headers: [{name: ":method", string_match: {exact: PUT}}]}}]}]`,
			req, []string{"header_match=put"}},
		{"header value match that fails drops the descriptor", `[{actions: [{header_value_match: {descriptor_value: get, headers: [{name: ":method", string_match: {exact: GET}}]}}]}]`,
			req, []string{}},
		{"expect_match false", `[{actions: [{header_value_match: {descriptor_key: k, descriptor_value: not-get, expect_match: false, headers: [{name: ":method", string_match: {exact: GET}}]}}]}]`,
			req, []string{"k=not-get"}},
		{"every header must match", `[{actions: [{header_value_match: {descriptor_value: v, headers: [{name: x-tenant, present_match: true}, {name: x-none, present_match: true}]}}]}]`,
			req, []string{}},
		{"absent header", `[{actions: [{header_value_match: {descriptor_value: v, headers: [{name: x-none, present_match: false}]}}]}]`,
			req, []string{"header_match=v"}},
		{"string matchers", `[
			{actions: [{header_value_match: {descriptor_value: prefix, headers: [{name: ":path", string_match: {prefix: /a/}}]}}]},
			{actions: [{header_value_match: {descriptor_value: suffix, headers: [{name: ":path", string_match: {suffix: "x=1"}}]}}]},
			{actions: [{header_value_match: {descriptor_value: contains, headers: [{name: ":path", string_match: {contains: "/b?"}}]}}]},
			{actions: [{header_value_match: {descriptor_value: fold, headers: [{name: x-plan, string_match: {exact: gold, ignore_case: true}}]}}]},
			{actions: [{header_value_match: {descriptor_value: case, headers: [{name: x-plan, string_match: {exact: gold}}]}}]},
			{actions: [{header_value_match: {descriptor_value: whole, headers: [{name: ":path", string_match: {safe_regex: {regex: "/a/b\\?.*"}}}]}}]},
			{actions: [{header_value_match: {descriptor_value: part, headers: [{name: ":path", string_match: {safe_regex: {regex: "/a"}}}]}}]}]`,
			req, []string{"header_match=prefix", "header_match=suffix", "header_match=contains", "header_match=fold", "header_match=whole"}},
		{"clusters", `[{actions: [{source_cluster: {}}, {destination_cluster: {}}]}]`, req, []string{"source_cluster=edge,destination_cluster="}},
		{"stage", `[{stage: 1, actions: [{generic_key: {descriptor_value: one}}]}, {actions: [{generic_key: {descriptor_value: zero}}]}]`,
			req, []string{"generic_key=zero"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := envoymodel.Descriptors(rateLimits(t, tc.limits), 0, tc.req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, envoymodel.Describe(ds))
		})
	}
}

// TestDescriptorsOfQueriesAndAddresses: the actions Envoy Gateway's
// translator uses for query parameters and source CIDRs.
func TestDescriptorsOfQueriesAndAddresses(t *testing.T) {
	inside := envoymodel.Request{Path: "/p?a=1&tenant=acme%20co&a=2&flag", RemoteAddress: netip.MustParseAddr("10.1.2.3")}
	outside := envoymodel.Request{Path: "/p", RemoteAddress: netip.MustParseAddr("::ffff:192.0.2.9")}
	for _, tc := range []struct {
		name, limits string
		req          envoymodel.Request
		want         []string
	}{
		{"query parameter, decoded, the first of several", `[{actions: [{query_parameters: {query_parameter_name: tenant, descriptor_key: t}}, {query_parameters: {query_parameter_name: a, descriptor_key: a}}]}]`,
			inside, []string{"t=acme co,a=1"}},
		{"a parameter without a value", `[{actions: [{query_parameters: {query_parameter_name: flag, descriptor_key: f}}]}]`, inside, []string{"f="}},
		{"absent parameter drops the descriptor", `[{actions: [{generic_key: {descriptor_value: g}}, {query_parameters: {query_parameter_name: none, descriptor_key: n}}]}]`,
			inside, []string{}},
		{"skip_if_absent drops the entry", `[{actions: [{generic_key: {descriptor_value: g}}, {query_parameters: {query_parameter_name: none, descriptor_key: n, skip_if_absent: true}}]}]`,
			inside, []string{"generic_key=g"}},
		{"query value match", `[
			{actions: [{query_parameter_value_match: {descriptor_key: q, descriptor_value: acme, query_parameters: [{name: tenant, string_match: {exact: acme co}}]}}]},
			{actions: [{query_parameter_value_match: {descriptor_value: re, query_parameters: [{name: tenant, string_match: {safe_regex: {regex: "ac.*"}}}]}}]},
			{actions: [{query_parameter_value_match: {descriptor_value: other, query_parameters: [{name: tenant, string_match: {exact: other}}]}}]},
			{actions: [{query_parameter_value_match: {descriptor_value: not-other, expect_match: false, query_parameters: [{name: tenant, string_match: {exact: other}}]}}]},
			{actions: [{query_parameter_value_match: {descriptor_value: present, query_parameters: [{name: flag, present_match: true}]}}]},
			{actions: [{query_parameter_value_match: {descriptor_value: absent, expect_match: false, query_parameters: [{name: none, present_match: true}]}}]}]`,
			inside, []string{"q=acme", "query_match=re", "query_match=not-other", "query_match=present", "query_match=absent"}},
		{"remote address match", `[
			{actions: [{remote_address_match: {descriptor_key: m, descriptor_value: 10.0.0.0/8, address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}}}]},
			{actions: [{remote_address_match: {descriptor_key: m, descriptor_value: "invert:10.0.0.0/8", address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}], invert_match: true}}}]},
			{actions: [{remote_address_match: {descriptor_key: ip, descriptor_value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", address_matcher: {ranges: [{address_prefix: 0.0.0.0, prefix_len: 0}]}}}]},
			{actions: [{remote_address_match: {descriptor_value: v, default_value: d, address_matcher: {ranges: [{address_prefix: 0.0.0.0, prefix_len: 0}]}}}]}]`,
			inside, []string{"m=10.0.0.0/8", "ip=10.1.2.3", "remote_address_match=v"}},
		{"remote address match outside", `[
			{actions: [{remote_address_match: {descriptor_key: m, descriptor_value: 10.0.0.0/8, address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}}}]},
			{actions: [{remote_address_match: {descriptor_key: m, descriptor_value: "invert:10.0.0.0/8", address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}], invert_match: true}}},
			           {remote_address_match: {descriptor_key: ip, descriptor_value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}], invert_match: true}}}]}]`,
			outside, []string{"m=invert:10.0.0.0/8,ip=192.0.2.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := envoymodel.Descriptors(rateLimits(t, tc.limits), 0, tc.req)
			require.NoError(t, err)
			assert.Equal(t, tc.want, envoymodel.Describe(ds))
		})
	}
}

// TestPerRouteDescriptors: the rate_limits of a route's per-filter
// configuration send their descriptors on the request path or when the
// stream is done, with the entry's hits_addend and limit override.
func TestPerRouteDescriptors(t *testing.T) {
	limits := rateLimits(t, `[
		{actions: [{generic_key: {descriptor_value: plain}}]},
		{actions: [{generic_key: {descriptor_value: number}}], hits_addend: {number: 0}},
		{actions: [{generic_key: {descriptor_value: give-back}}], hits_addend: {number: 2, is_negative_hits: true}},
		{actions: [{generic_key: {descriptor_value: cost}}], hits_addend: {format: "%DYNAMIC_METADATA(io.cost:request)%"}},
		{actions: [{generic_key: {descriptor_value: nested}}], hits_addend: {format: "%DYNAMIC_METADATA(io.cost:usage:total)%"}},
		{actions: [{generic_key: {descriptor_value: override}}], limit: {dynamic_metadata: {metadata_key: {key: io.limits, path: [{key: tier}]}}}},
		{actions: [{generic_key: {descriptor_value: response}}], hits_addend: {format: "%DYNAMIC_METADATA(io.cost:response)%"}, apply_on_stream_done: true, x_ratelimit_option: OFF}]`)
	md := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		require.NoError(t, err)
		return s
	}
	type sent struct {
		value string
		hits  *uint64 // nil: no hits_addend
		neg   bool
		limit string // "" : no override
	}
	n := func(v uint64) *uint64 { return &v }
	summary := func(ds []*ratelimitv3.RateLimitDescriptor) []sent {
		out := []sent{}
		for _, d := range ds {
			s := sent{value: d.GetEntries()[0].GetValue(), neg: d.GetIsNegativeHits()}
			if d.GetHitsAddend() != nil {
				s.hits = n(d.GetHitsAddend().GetValue())
			}
			if l := d.GetLimit(); l != nil {
				s.limit = fmt.Sprintf("%d/%s", l.GetRequestsPerUnit(), l.GetUnit())
			}
			out = append(out, s)
		}
		return out
	}

	req := envoymodel.Request{DynamicMetadata: map[string]*structpb.Struct{
		"io.cost":   md(map[string]any{"request": 3, "response": "250", "usage": map[string]any{"total": 7}}),
		"io.limits": md(map[string]any{"tier": map[string]any{"requests_per_unit": 20, "unit": "MINUTE"}}),
	}}
	ds, err := envoymodel.PerRouteDescriptors(limits, req, false)
	require.NoError(t, err)
	assert.Equal(t, []sent{
		{value: "plain"}, {value: "number", hits: n(0)}, {value: "give-back", hits: n(2), neg: true},
		{value: "cost", hits: n(3)}, {value: "nested", hits: n(7)}, {value: "override", limit: "20/MINUTE"},
	}, summary(ds), "the request path")
	ds, err = envoymodel.PerRouteDescriptors(limits, req, true)
	require.NoError(t, err)
	assert.Equal(t, []sent{{value: "response", hits: n(250)}}, summary(ds), "when the stream is done")

	// Metadata that gives no valid number drops the descriptor; none that
	// gives a valid override leaves it without one.
	for _, bad := range []map[string]any{
		{"request": -1, "response": "many", "usage": map[string]any{"total": 1e10}},
		{"request": "x", "response": true},
		{},
	} {
		req := envoymodel.Request{DynamicMetadata: map[string]*structpb.Struct{
			"io.cost":   md(bad),
			"io.limits": md(map[string]any{"tier": map[string]any{"requests_per_unit": "20", "unit": "MINUTE"}}),
		}}
		ds, err := envoymodel.PerRouteDescriptors(limits, req, false)
		require.NoError(t, err)
		assert.Equal(t, []sent{{value: "plain"}, {value: "number", hits: n(0)}, {value: "give-back", hits: n(2), neg: true}, {value: "override"}}, summary(ds), "%v", bad)
		ds, err = envoymodel.PerRouteDescriptors(limits, req, true)
		require.NoError(t, err)
		assert.Empty(t, ds, "%v", bad)
	}

	for _, limits := range []string{
		`[{stage: 1, actions: [{generic_key: {descriptor_value: v}}]}]`,
		`[{actions: [{generic_key: {descriptor_value: v}}], hits_addend: {format: "%BYTES_RECEIVED%"}}]`,
		`[{actions: [{generic_key: {descriptor_value: v}}], limit: {rate_limit: {requests_per_unit: 1, unit: SECOND}}}]`,
	} {
		_, err := envoymodel.PerRouteDescriptors(rateLimits(t, limits), envoymodel.Request{}, false)
		assert.Error(t, err, limits)
	}
}

// TestDescriptorsRefuseWhatIsNotModelled: settings that change what Envoy
// sends, and that the model does not follow, are errors.
func TestDescriptorsRefuseWhatIsNotModelled(t *testing.T) {
	for _, limits := range []string{
		`[{actions: [{metadata: {descriptor_key: k, metadata_key: {key: ns, path: [{key: k}]}}}]}]`,
		`[{actions: [{remote_address_match: {descriptor_value: "%REQ(:path)%", address_matcher: {ranges: [{address_prefix: 10.0.0.0, prefix_len: 8}]}}}]}]`,
		`[{hits_addend: {number: 2}, actions: [{remote_address: {}}]}]`,
		`[{actions: [{masked_remote_address: {}}]}]`,
		`[{disable_key: k, actions: [{remote_address: {}}]}]`,
		`[{actions: [{header_value_match: {descriptor_value: v, headers: [{name: a, invert_match: true, present_match: true}]}}]}]`,
		`[{actions: [{header_value_match: {descriptor_value: v, headers: [{name: a, range_match: {start: 1, end: 2}}]}}]}]`,
		`[{actions: [{generic_key: {descriptor_value: v, default_value: d}}]}]`,
	} {
		_, err := envoymodel.Descriptors(rateLimits(t, limits), 0, envoymodel.Request{Headers: map[string]string{"a": "1"}})
		assert.Error(t, err, limits)
	}
}

func TestRateLimitRequestRoutes(t *testing.T) {
	l := listener(t, `
virtual_hosts:
  - name: api
    domains: [api.example.com, "*.api.example.com"]
    rate_limits: [{actions: [{generic_key: {descriptor_value: api-vh}}]}]
    routes:
      - match: {path: /own}
        route: {cluster: c1, rate_limits: [{actions: [{generic_key: {descriptor_value: own}}]}]}
      - match: {prefix: /both}
        route:
          cluster: c2
          include_vh_rate_limits: true
          rate_limits: [{actions: [{generic_key: {descriptor_value: both}}]}]
      - match: {prefix: /hdr, headers: [{name: x-beta, present_match: true}]}
        route: {cluster: beta, rate_limits: [{actions: [{destination_cluster: {}}]}]}
      - match: {prefix: /Redirect, case_sensitive: false}
        redirect: {path_redirect: /}
      - match: {prefix: /}
        route: {cluster: c3}
  - name: rest
    domains: ["*"]
    rate_limits: [{actions: [{generic_key: {descriptor_value: rest-vh}}]}]
    routes:
      - match: {prefix: /}
        route: {cluster: c4}
`)
	for _, tc := range []struct {
		name string
		req  envoymodel.Request
		want []string // nil: no request to the service
	}{
		{"route limits replace the virtual host's", envoymodel.Request{Authority: "api.example.com", Path: "/own?q"}, []string{"generic_key=own"}},
		{"include_vh_rate_limits adds them after", envoymodel.Request{Authority: "api.example.com", Path: "/both/x"}, []string{"generic_key=both", "generic_key=api-vh"}},
		{"no route limits: the virtual host's", envoymodel.Request{Authority: "api.example.com", Path: "/other"}, []string{"generic_key=api-vh"}},
		{"wildcard domain", envoymodel.Request{Authority: "eu.api.example.com", Path: "/own"}, []string{"generic_key=own"}},
		{"route by header", envoymodel.Request{Authority: "api.example.com", Path: "/hdr", Headers: map[string]string{"x-beta": "1"}}, []string{"destination_cluster=beta"}},
		{"route by header, header absent", envoymodel.Request{Authority: "api.example.com", Path: "/hdr"}, []string{"generic_key=api-vh"}},
		{"redirects are not rate limited", envoymodel.Request{Authority: "api.example.com", Path: "/redirect"}, nil},
		{"catch-all domain", envoymodel.Request{Authority: "other.example.com", Path: "/own"}, []string{"generic_key=rest-vh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr, err := l.RateLimitRequest(tc.req)
			require.NoError(t, err)
			if tc.want == nil {
				assert.Nil(t, rr)
				return
			}
			require.NotNil(t, rr)
			assert.Equal(t, "d", rr.GetDomain())
			assert.Equal(t, tc.want, envoymodel.Describe(rr.GetDescriptors()))
		})
	}

	t.Run("per-route filter configuration is not modelled", func(t *testing.T) {
		l := listener(t, `
virtual_hosts:
  - name: v
    domains: ["*"]
    routes:
      - match: {prefix: /}
        route: {cluster: c}
        typed_per_filter_config:
          envoy.filters.http.ratelimit:
            "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitPerRoute
            vh_rate_limits: INCLUDE
`)
		_, err := l.RateLimitRequest(envoymodel.Request{})
		assert.ErrorContains(t, err, "not modelled")
	})

	t.Run("no rate limit filter, no request", func(t *testing.T) {
		l := listener(t, `{virtual_hosts: [{name: v, domains: ["*"], rate_limits: [{actions: [{remote_address: {}}]}], routes: [{match: {prefix: /}, route: {cluster: c}}]}]}`)
		l.RateLimit = nil
		rr, err := l.RateLimitRequest(envoymodel.Request{RemoteAddress: netip.MustParseAddr("192.0.2.1")})
		require.NoError(t, err)
		assert.Nil(t, rr)
	})
}
