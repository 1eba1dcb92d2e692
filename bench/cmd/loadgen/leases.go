package main

import (
	"fmt"
	"strings"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/promtext"
)

// leaseCounts is what the leases of ratewarden's replicas did, summed over
// the replicas and the rules, from their counters ratewarden_lease_taken_total
// and ratewarden_lease_hits_total.
type leaseCounts struct {
	// Taken is the leases taken from Redis.
	Taken float64 `json:"taken"`
	// Leased is the hits they reserved, Served the hits admitted from them
	// without Redis, and GivenBack those not used, which went back.
	Leased    float64 `json:"leased"`
	Served    float64 `json:"served"`
	GivenBack float64 `json:"given_back"`
}

// The result labels of ratewarden_lease_hits_total.
const (
	leaseResultLeased    = `result="leased"`
	leaseResultServed    = `result="served"`
	leaseResultGivenBack = `result="given_back"`
)

// parseLeaseCounts sums the lease counters among the samples of a /metrics
// page.
func parseLeaseCounts(samples map[string]float64) leaseCounts {
	var c leaseCounts
	for series, v := range samples {
		name, labels, _ := strings.Cut(series, "{")
		switch name {
		case metrics.LeaseTaken:
			c.Taken += v
		case metrics.LeaseHits:
			switch {
			case strings.Contains(labels, leaseResultLeased):
				c.Leased += v
			case strings.Contains(labels, leaseResultServed):
				c.Served += v
			case strings.Contains(labels, leaseResultGivenBack):
				c.GivenBack += v
			}
		}
	}
	return c
}

// since returns what was counted between before and c.
func (c leaseCounts) since(before leaseCounts) leaseCounts {
	return leaseCounts{Taken: c.Taken - before.Taken, Leased: c.Leased - before.Leased,
		Served: c.Served - before.Served, GivenBack: c.GivenBack - before.GivenBack}
}

// plus returns the sum of c and o.
func (c leaseCounts) plus(o leaseCounts) leaseCounts {
	return leaseCounts{Taken: c.Taken + o.Taken, Leased: c.Leased + o.Leased,
		Served: c.Served + o.Served, GivenBack: c.GivenBack + o.GivenBack}
}

// leaseReader reads the lease counters of ratewarden's replicas from their
// /metrics. It is safe for concurrent use.
type leaseReader struct {
	urls []string
}

// newLeaseReader returns a reader of the servers whose HTTP listeners are
// at httpAddrs (host:port each).
func newLeaseReader(httpAddrs []string) *leaseReader {
	r := &leaseReader{}
	for _, a := range httpAddrs {
		r.urls = append(r.urls, "http://"+a+"/metrics")
	}
	return r
}

// read returns the lease counters summed over the servers.
func (r *leaseReader) read() (leaseCounts, error) {
	var total leaseCounts
	for _, u := range r.urls {
		samples, err := promtext.Scrape(u)
		if err != nil {
			return leaseCounts{}, fmt.Errorf("loadgen: lease counters: %w", err)
		}
		total = total.plus(parseLeaseCounts(samples))
	}
	return total, nil
}

// readSince returns what the leases did since the counters read before.
func (r *leaseReader) readSince(before leaseCounts) (*leaseCounts, error) {
	after, err := r.read()
	if err != nil {
		return nil, err
	}
	d := after.since(before)
	return &d, nil
}
