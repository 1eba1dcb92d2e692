package rls

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

func withMetadata(o *Options) { o.ResponseDynamicMetadata = true }

func rlRequest(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: descs}
}

func TestResponseDynamicMetadataIsOffByDefault(t *testing.T) {
	f := newConfigFixture(t, nil, readFile(t, envoyExample))
	assert.Nil(t, f.call(t, rlRequest(desc("service", "service_1"))).GetDynamicMetadata())
}

// TestResponseDynamicMetadata checks the dynamic metadata that
// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA returns, with its example
// configuration: the request, and the metadata of the rules of the
// descriptors that were not over their limit.
func TestResponseDynamicMetadata(t *testing.T) {
	f := newConfigFixture(t, withMetadata, readFile(t, envoyExample))

	s2 := desc("service", "service_2")
	s2.HitsAddend = wrapperspb.UInt64(1)
	req := rlRequest(desc("service", "service_1"), s2, desc("foo", "x"), desc("qux", "y"), desc("nothing", "z"))
	req.HitsAddend = 1
	resp := f.call(t, req)
	require.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, map[string]any{
		"domain": "rl",
		"descriptors": []any{
			map[string]any{"entries": []any{"service=service_1"}},
			map[string]any{"entries": []any{"service=service_2"}, "hitsAddend": 1.0},
			map[string]any{"entries": []any{"foo=x"}},
			map[string]any{"entries": []any{"qux=y"}},
			map[string]any{"entries": []any{"nothing=z"}},
		},
		"hitsAddend": 1.0,
		// Both rules say service_with_quota.name: the first wins.
		"metadata": map[string]any{"service_with_quota": map[string]any{"name": "service_1"}},
	}, resp.GetDynamicMetadata().AsMap())

	// service_1 is now spent: only service_2's metadata is returned.
	resp = f.call(t, rlRequest(desc("service", "service_1"), desc("service", "service_2")))
	require.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
	assert.Equal(t, map[string]any{"service_with_quota": map[string]any{"name": "service_2"}},
		resp.GetDynamicMetadata().AsMap()["metadata"])

	// Both spent: no metadata, and the request is still described.
	resp = f.call(t, rlRequest(desc("service", "service_1"), desc("service", "service_2")))
	require.Equal(t, over, resp.GetOverallCode())
	md := resp.GetDynamicMetadata().AsMap()
	assert.NotContains(t, md, "metadata")
	assert.NotContains(t, md, "hitsAddend")
	assert.Equal(t, "rl", md["domain"])
	assert.Len(t, md["descriptors"], 2)
}

func TestResponseDynamicMetadataMergesMappings(t *testing.T) {
	f := newConfigFixture(t, withMetadata, config.File{Name: "m.yaml", Data: []byte(`
domain: rl
descriptors:
  - key: a
    metadata: {team: {name: a, on_call: alice}, tags: [a], only_a: 1}
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    metadata: {team: {name: b, region: eu}, tags: [b], only_b: true}
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: c
    metadata: {c: 1}
    rate_limit: {unit: minute, requests_per_unit: 10}
`)})
	resp := f.call(t, rlRequest(desc("a", "1"), desc("b", "1")))
	assert.Equal(t, map[string]any{
		"team":   map[string]any{"name": "a", "on_call": "alice", "region": "eu"},
		"tags":   []any{"a"},
		"only_a": 1.0,
		"only_b": true,
	}, resp.GetDynamicMetadata().AsMap()["metadata"])

	// The configuration is left as it was.
	m, matched := f.svc.Config().Match("rl", []rate.Entry{{Key: "a", Value: "1"}})
	require.True(t, matched)
	assert.Equal(t, map[string]any{"team": map[string]any{"name": "a", "on_call": "alice"}, "tags": []any{"a"}, "only_a": 1.0},
		m.Rule.Metadata.AsMap())

	// A limit override is no rule's: no metadata, and the override is shown.
	resp = f.call(t, rlRequest(withOverride(desc("c", "1"), 5, typev3.RateLimitUnit_HOUR, 0)))
	md := resp.GetDynamicMetadata().AsMap()
	assert.NotContains(t, md, "metadata")
	limit := md["descriptors"].([]any)[0].(map[string]any)["limit"]
	assert.Contains(t, limit, "requests_per_unit")
	assert.Contains(t, limit, "HOUR")
}
