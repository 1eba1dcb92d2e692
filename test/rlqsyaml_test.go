package test

import (
	"testing"

	rlqsfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// TestRLQSYAMLIsValidEnvoyConfig: envoy/rlqs.yaml is valid Envoy config (the
// API's own rules, inside every typed_config), its filter reports to the
// ratewarden cluster over HTTP/2, and it denies what no grant covers:
// no_assignment_behavior and the expired fallback are DENY_ALL, as
// docs/rlqs.md asks for exactness.
func TestRLQSYAMLIsValidEnvoyConfig(t *testing.T) {
	b, err := envoymodel.LoadBootstrap(envoyFile("rlqs.yaml"))
	require.NoError(t, err)
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	var filter rlqsfilterv3.RateLimitQuotaFilterConfig
	require.NoError(t, hcm.GetHttpFilters()[0].GetTypedConfig().UnmarshalTo(&filter))
	assert.Equal(t, "quota", filter.GetDomain())
	assert.Equal(t, "ratewarden", filter.GetRlqsServer().GetEnvoyGrpc().GetClusterName())

	var settings rlqsfilterv3.RateLimitQuotaBucketSettings
	require.NoError(t, filter.GetBucketMatchers().GetOnNoMatch().GetAction().GetTypedConfig().UnmarshalTo(&settings))
	assert.Contains(t, settings.GetBucketIdBuilder().GetBucketIdBuilder(), "tenant")
	deny := typev3.RateLimitStrategy_DENY_ALL
	assert.Equal(t, deny, settings.GetNoAssignmentBehavior().GetFallbackRateLimit().GetBlanketRule())
	assert.Equal(t, deny, settings.GetExpiredAssignmentBehavior().GetFallbackRateLimit().GetBlanketRule())

	var found bool
	for _, c := range b.GetStaticResources().GetClusters() {
		found = found || c.GetName() == "ratewarden" && c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] != nil
	}
	assert.True(t, found, "a ratewarden cluster over HTTP/2")
}
