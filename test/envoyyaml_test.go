package test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

func TestEnvoyYAMLIsValidEnvoyConfig(t *testing.T) {
	_, err := envoymodel.LoadBootstrap(envoyFile("envoy.yaml"))
	require.NoError(t, err)
}

// TestEnvoyYAMLCheckCatchesMistakes shows that the check above fails for the
// mistakes it is there to catch, in the file itself and in its typed_config.
func TestEnvoyYAMLCheckCatchesMistakes(t *testing.T) {
	data, err := os.ReadFile(envoyFile("envoy.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelt filter field", "failure_mode_deny: false", "failure_mode_denny: false", "failure_mode_denny"},
		{"misspelt action", "remote_address: {}", "remote_adress: {}", "remote_adress"},
		{"unknown typed_config", "filters.http.router.v3.Router", "filters.http.router.v3.Rooter", "Rooter"},
		{"empty domain", "domain: edge", `domain: ""`, "Domain"},
		{"empty descriptor key", "descriptor_key: api_key", `descriptor_key: ""`, "DescriptorKey"},
		{"endpoint without an address", "address: ratewarden", `address: ""`, "Address"},
		{"negative port", "port_value: 8081", "port_value: -1", "portValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, string(data), tc.old)
			path := filepath.Join(t.TempDir(), "envoy.yaml")
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), tc.old, tc.new, 1)), 0o644))
			_, err := envoymodel.LoadBootstrap(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			t.Log(err)
		})
	}
}

// TestEnvoyYAMLWiring checks what envoy.yaml promises beyond the API's own
// rules: the filter's settings, its place before the router, and clusters
// that exist and speak HTTP/2 to ratewarden.
func TestEnvoyYAMLWiring(t *testing.T) {
	b, err := envoymodel.LoadBootstrap(envoyFile("envoy.yaml"))
	require.NoError(t, err)
	l := frontProxy(t)
	assert.EqualValues(t, 10000, l.Port)

	filters := l.Manager.GetHttpFilters()
	require.GreaterOrEqual(t, len(filters), 2)
	assert.Equal(t, envoymodel.RateLimitFilter, filters[len(filters)-2].GetName(), "the rate limit filter runs just before the router")
	assert.Equal(t, envoymodel.RouterFilter, filters[len(filters)-1].GetName(), "the router is last")
	assert.True(t, l.Manager.GetUseRemoteAddress().GetValue(), "remote_address is the connection's peer")

	rl := l.RateLimit
	require.NotNil(t, rl)
	assert.Equal(t, "edge", rl.GetDomain())
	assert.True(t, exampleLimits(t).HasDomain(rl.GetDomain()), "config/ defines the domain Envoy asks about")
	assert.False(t, rl.GetFailureModeDeny(), "fail open")
	timeout := rl.GetTimeout().AsDuration()
	assert.True(t, timeout >= 20*time.Millisecond && timeout <= 25*time.Millisecond, "timeout %s", timeout)
	assert.Equal(t, ratelimitfilterv3.RateLimit_DRAFT_VERSION_03, rl.GetEnableXRatelimitHeaders())
	assert.True(t, rl.GetRateLimitedAsResourceExhausted())
	assert.Equal(t, corev3.ApiVersion_V3, rl.GetRateLimitService().GetTransportApiVersion())

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	rlsCluster := clusters[rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()]
	require.NotNil(t, rlsCluster, "the rate limit service's cluster exists")
	opts := &httpv3.HttpProtocolOptions{}
	require.NoError(t, rlsCluster.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts))
	assert.NotNil(t, opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions(), "gRPC to ratewarden needs HTTP/2")
	assert.Equal(t, uint32(8081), endpointPort(t, rlsCluster), "ratewarden's gRPC port (RLS_GRPC_ADDR)")

	for _, vh := range l.Routes.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			assert.Contains(t, clusters, r.GetRoute().GetCluster(), "route %s goes to a defined cluster", r.GetMatch())
		}
	}
}

// endpointPort returns the port of a cluster's only endpoint.
func endpointPort(t *testing.T, c *clusterv3.Cluster) uint32 {
	t.Helper()
	eps := c.GetLoadAssignment().GetEndpoints()
	require.Len(t, eps, 1)
	require.Len(t, eps[0].GetLbEndpoints(), 1)
	return eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
}

// endpointHost returns the host of a cluster's only endpoint.
func endpointHost(c *clusterv3.Cluster) string {
	return c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress()
}

// clustersOf returns a bootstrap's static clusters by name.
func clustersOf(b *bootstrapv3.Bootstrap) map[string]*clusterv3.Cluster {
	out := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		out[c.GetName()] = c
	}
	return out
}

// descriptorCase is one request through envoy.yaml: the descriptors Envoy
// sends for it, and the rule of config/edge.yaml each one matches ("" for
// none).
type descriptorCase struct {
	name string
	req  envoymodel.Request
	want []string // "key=value,key=value", one per descriptor
	// rules are the Rule.Path each descriptor matches in config/.
	rules []string
}

// frontProxyCases is the mapping from requests to descriptors that
// envoy.yaml promises, written out.
func frontProxyCases() []descriptorCase {
	client := netip.MustParseAddr("192.0.2.10")
	partner := netip.MustParseAddr("10.1.2.3")
	key := func(k string) map[string]string { return map[string]string{"x-api-key": k} }
	return []descriptorCase{
		{
			name: "login with an API key",
			req:  envoymodel.Request{Path: "/login", RemoteAddress: client, Headers: key("k1")},
			want: []string{
				"remote_address=192.0.2.10",
				"api_key=k1",
				"path=/login,remote_address=192.0.2.10",
				"generic_key=upstream",
			},
			rules: []string{"edge.remote_address", "edge.api_key", "edge.path_/login.remote_address", "edge.generic_key_upstream"},
		},
		{
			name: "login with a query string and no API key",
			req:  envoymodel.Request{Method: "POST", Path: "/login?next=%2Fhome", RemoteAddress: client},
			want: []string{
				"remote_address=192.0.2.10",
				"path=/login,remote_address=192.0.2.10",
				"generic_key=upstream",
			},
			rules: []string{"edge.remote_address", "edge.path_/login.remote_address", "edge.generic_key_upstream"},
		},
		{
			name: "search from the partner network",
			req:  envoymodel.Request{Path: "/search?q=envoy", RemoteAddress: partner, Headers: key("k2")},
			want: []string{
				"remote_address=10.1.2.3",
				"api_key=k2",
				"path=/search,remote_address=10.1.2.3",
				"generic_key=upstream",
			},
			rules: []string{"edge.remote_address_10.1.*", "edge.api_key", "edge.path_/search.remote_address", "edge.generic_key_upstream"},
		},
		{
			name:  "a path below /login is not a login",
			req:   envoymodel.Request{Path: "/login/help", RemoteAddress: client},
			want:  []string{"remote_address=192.0.2.10", "generic_key=upstream"},
			rules: []string{"edge.remote_address", "edge.generic_key_upstream"},
		},
		{
			name:  "a path that starts like /login is not a login",
			req:   envoymodel.Request{Path: "/loginx", RemoteAddress: client, Headers: key("k1")},
			want:  []string{"remote_address=192.0.2.10", "api_key=k1", "generic_key=upstream"},
			rules: []string{"edge.remote_address", "edge.api_key", "edge.generic_key_upstream"},
		},
		{
			name:  "any host",
			req:   envoymodel.Request{Authority: "example.com", Path: "/", RemoteAddress: client},
			want:  []string{"remote_address=192.0.2.10", "generic_key=upstream"},
			rules: []string{"edge.remote_address", "edge.generic_key_upstream"},
		},
	}
}

// TestEnvoyYAMLDescriptors computes, from the parsed envoy.yaml, the
// descriptors Envoy sends for concrete requests, compares them with the
// mapping written out above, and checks that each matches the intended rule
// of the example limits.
func TestEnvoyYAMLDescriptors(t *testing.T) {
	l := frontProxy(t)
	limits := exampleLimits(t)
	for _, tc := range frontProxyCases() {
		t.Run(tc.name, func(t *testing.T) {
			req, err := l.RateLimitRequest(tc.req)
			require.NoError(t, err)
			require.NotNil(t, req)
			assert.Equal(t, "edge", req.GetDomain())
			require.Equal(t, tc.want, envoymodel.Describe(req.GetDescriptors()))
			for i, d := range req.GetDescriptors() {
				var entries []rate.Entry
				for _, e := range d.GetEntries() {
					entries = append(entries, rate.Entry{Key: e.GetKey(), Value: e.GetValue()})
				}
				m, ok := limits.Match("edge", entries)
				require.True(t, ok, "descriptor %s matches a rule", tc.want[i])
				assert.Equal(t, tc.rules[i], m.Rule.Path, "descriptor %s", tc.want[i])
				assert.NotEmpty(t, m.Rule.Limits, "descriptor %s is limited", tc.want[i])
			}
		})
	}
}

// TestEnvoyYAMLEveryEntryIsUsed makes sure the cases above exercise every
// rate_limits entry of envoy.yaml, so a new entry cannot go untested.
func TestEnvoyYAMLEveryEntryIsUsed(t *testing.T) {
	l := frontProxy(t)
	seen := map[string]bool{}
	for _, tc := range frontProxyCases() {
		for _, d := range tc.want {
			var keys []string
			for _, e := range strings.Split(d, ",") {
				k, v, _ := strings.Cut(e, "=")
				if k == "path" || k == "generic_key" {
					k += "=" + v
				}
				keys = append(keys, k)
			}
			seen[strings.Join(keys, ",")] = true
		}
	}
	vh := l.Routes.GetVirtualHosts()
	require.Len(t, vh, 1)
	for i, rl := range vh[0].GetRateLimits() {
		var keys []string
		for _, a := range rl.GetActions() {
			switch {
			case a.GetRemoteAddress() != nil:
				keys = append(keys, "remote_address")
			case a.GetRequestHeaders() != nil:
				keys = append(keys, a.GetRequestHeaders().GetDescriptorKey())
			case a.GetGenericKey() != nil:
				keys = append(keys, "generic_key="+a.GetGenericKey().GetDescriptorValue())
			case a.GetHeaderValueMatch() != nil:
				keys = append(keys, a.GetHeaderValueMatch().GetDescriptorKey()+"="+a.GetHeaderValueMatch().GetDescriptorValue())
			default:
				t.Fatalf("rate_limits[%d]: an action the cases do not cover: %v", i, a)
			}
		}
		assert.True(t, seen[strings.Join(keys, ",")], "rate_limits[%d] (%s) is exercised by a case", i, strings.Join(keys, ","))
	}
}
