package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
)

// TestParseLeaseCounts: the lease counters of every rule add up, by result;
// other series do not count.
func TestParseLeaseCounts(t *testing.T) {
	samples, err := promtext.Parse(`# HELP ratewarden_lease_taken_total Leases taken.
ratewarden_lease_taken_total{algorithm="fixed_window",descriptor="a",domain="d"} 3
ratewarden_lease_taken_total{algorithm="token_bucket",descriptor="b",domain="d"} 4
ratewarden_lease_hits_total{algorithm="fixed_window",descriptor="a",domain="d",result="leased"} 300
ratewarden_lease_hits_total{algorithm="token_bucket",descriptor="b",domain="d",result="leased"} 400
ratewarden_lease_hits_total{algorithm="fixed_window",descriptor="a",domain="d",result="served"} 250
ratewarden_lease_hits_total{algorithm="fixed_window",descriptor="a",domain="d",result="given_back"} 40
ratewarden_lease_hits_total{algorithm="token_bucket",descriptor="b",domain="d",result="given_back"} 2
ratewarden_lease_taken_total_other 9
ratewarden_requests_total{result="served"} 7
`)
	require.NoError(t, err)
	c := parseLeaseCounts(samples)
	assert.Equal(t, leaseCounts{Taken: 7, Leased: 700, Served: 250, GivenBack: 42}, c)
	assert.Equal(t, leaseCounts{Taken: 6, Leased: 600, Served: 200, GivenBack: 40}, c.since(leaseCounts{Taken: 1, Leased: 100, Served: 50, GivenBack: 2}))
}
