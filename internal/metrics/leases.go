package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// leaseLabels are the labels of the lease counters: the rule's domain and
// descriptor, and its algorithm. A lease's limit may come from a request's
// override, whose window the client chooses: the window is left out.
var leaseLabels = []string{"domain", "descriptor", "algorithm"}

// leaseMetrics count what the leases of hot limits do, per rule.
type leaseMetrics struct {
	taken *prometheus.CounterVec // leases taken
	hits  *prometheus.CounterVec // hits, by what became of them
}

func newLeaseMetrics() *leaseMetrics {
	return &leaseMetrics{
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{Name: LeaseTaken, Help: leaseTakenHelp}, leaseLabels),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: LeaseHits, Help: leaseHitsHelp},
			append(leaseLabels, "result")),
	}
}

func (lm *leaseMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{lm.taken, lm.hits}
}

var _ lease.Observer = (*Metrics)(nil)

// leaseResults are the result labels of the lease events.
var leaseResults = [...]string{lease.Taken: "leased", lease.Served: "served", lease.GivenBack: "given_back"}

// ObserveLease counts what a lease of op's limit did with hits.
func (m *Metrics) ObserveLease(op *rate.Op, e lease.Event, hits uint64) {
	if !m.names.ratewarden() {
		return
	}
	labels := []string{op.Key.Domain, op.Tag, op.Limit.Algorithm.String()}
	if e == lease.Taken {
		m.leases.taken.WithLabelValues(labels...).Inc()
	}
	m.leases.hits.WithLabelValues(append(labels, leaseResults[e])...).Add(float64(hits))
}
