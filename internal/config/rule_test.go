package config

import (
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRuleLocation: a rule says where its descriptor is as an Error would:
// file, line, column and path; a rule from an xDS server, the resource and
// the path alone.
func TestRuleLocation(t *testing.T) {
	c := mustParse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    descriptors:
      - {key: c, rate_limit: {unit: minute, requests_per_unit: 1}}
`, testOptions())
	type where struct {
		File, Field  string
		Line, Column int
	}
	var got []where
	for _, r := range c.Rules() {
		got = append(got, where{r.File, r.Field, r.Line, r.Column})
	}
	assert.Equal(t, []where{
		{"test.yaml", "descriptors[0]", 3, 5},
		{"test.yaml", "descriptors[1].descriptors[0]", 7, 9},
	}, got)

	x, err := FromRateLimitConfigs([]*rlsconfv3.RateLimitConfig{{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k"}, {Key: "a", RateLimit: policy(1, rlsconfv3.RateLimitUnit_MINUTE)},
	}}}, testOptions())
	require.NoError(t, err)
	require.Len(t, x.Rules(), 1)
	r := x.Rules()[0]
	assert.Equal(t, where{`RateLimitConfig "r"`, "descriptors[1]", 0, 0}, where{r.File, r.Field, r.Line, r.Column})
}
