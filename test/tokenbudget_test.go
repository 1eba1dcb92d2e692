package test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// TestTokenBudgetYAML checks token-budget.yaml, the example of a budget
// charged on stream done: valid for Envoy's v3 API, and one route whose two
// rate_limits send the same descriptor, a check (hits_addend 0) on the
// request path and a charge of the tokens used when the stream ends.
func TestTokenBudgetYAML(t *testing.T) {
	b, err := envoymodel.LoadBootstrap(envoyFile("token-budget.yaml"))
	require.NoError(t, err)
	ls, err := envoymodel.HTTPListeners(b)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	l := ls[0]
	require.NotNil(t, l.RateLimit)
	assert.Equal(t, "llm", l.RateLimit.GetDomain())

	vhs := l.Manager.GetRouteConfig().GetVirtualHosts()
	require.Len(t, vhs, 1)
	require.Len(t, vhs[0].GetRoutes(), 1)
	limits := vhs[0].GetRoutes()[0].GetRoute().GetRateLimits()
	require.Len(t, limits, 2)
	check, charge := limits[0], limits[1]

	require.Len(t, check.GetActions(), 1)
	assert.Equal(t, "api_key", check.GetActions()[0].GetRequestHeaders().GetDescriptorKey())
	assert.True(t, proto.Equal(check.GetActions()[0], charge.GetActions()[0]), "both send the same descriptor")

	assert.False(t, check.GetApplyOnStreamDone(), "the check is on the request path")
	require.NotNil(t, check.GetHitsAddend().GetNumber(), "the check sets hits_addend")
	assert.Zero(t, check.GetHitsAddend().GetNumber().GetValue(), "the check takes nothing")

	assert.True(t, charge.GetApplyOnStreamDone(), "the charge is sent when the stream ends")
	assert.Equal(t, "%DYNAMIC_METADATA(io.envoy.ai_gateway:llm_total_token)%", charge.GetHitsAddend().GetFormat())
}
