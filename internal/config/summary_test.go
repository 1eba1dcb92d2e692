package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestSummaries(t *testing.T) {
	opts := testOptions()
	opts.MergeDomains = true
	c, err := Parse([]File{
		{Name: "a.yaml", Data: yml(`
domain: edge
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket}
    rate_limits: [{unit: day, requests_per_unit: 10, algorithm: fixed_window}]
  - {key: free, rate_limit: {unlimited: true}}
  - key: parent
    descriptors: [{key: child, rate_limit: {unit: minute, requests_per_unit: 5}}]
`)},
		{Name: "b.yaml", Data: yml("domain: edge\ndescriptors:\n  - {key: more, rate_limit: {unit: hour, requests_per_unit: 7, algorithm: fixed_window}}\n")},
		{Name: "c.yaml", Data: yml("domain: empty\n")},
	}, opts)
	require.NoError(t, err)
	assert.Equal(t, []DomainSummary{
		{Domain: "edge", Files: []string{"a.yaml", "b.yaml"}, Rules: 4, Unlimited: 1, Limits: 4,
			Algorithms: map[algorithms.Algorithm]int{algorithms.TokenBucket: 1, algorithms.FixedWindow: 2, testAlgorithm: 1}},
		{Domain: "empty", Files: []string{"c.yaml"}, Algorithms: map[algorithms.Algorithm]int{}},
	}, c.Summaries())
}
