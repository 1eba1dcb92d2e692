package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rlqs"
)

// rlqsMetrics count what the Rate Limit Quota Service does, per rule, with
// the lease counters' labels.
type rlqsMetrics struct {
	grants    *prometheus.CounterVec
	hits      *prometheus.CounterVec
	reported  *prometheus.CounterVec
	ungranted *prometheus.CounterVec
	short     *prometheus.CounterVec
	streams   prometheus.Gauge
}

func newRLQSMetrics() *rlqsMetrics {
	return &rlqsMetrics{
		grants:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: RLQSGrants, Help: rlqsGrantsHelp}, leaseLabels),
		hits:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: RLQSGrantedHits, Help: rlqsGrantedHitsHelp}, leaseLabels),
		reported:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: RLQSReported, Help: rlqsReportedHelp}, append(leaseLabels, "result")),
		ungranted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RLQSUngranted, Help: rlqsUngrantedHelp}, leaseLabels),
		short:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: RLQSGrantsShort, Help: rlqsGrantsShortHelp}, leaseLabels),
		streams:   prometheus.NewGauge(prometheus.GaugeOpts{Name: RLQSStreams, Help: rlqsStreamsHelp}),
	}
}

func (rm *rlqsMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{rm.grants, rm.hits, rm.reported, rm.ungranted, rm.short, rm.streams}
}

var _ rlqs.Observer = (*Metrics)(nil)

// ObserveGrant counts a grant of hits on op's limit.
func (m *Metrics) ObserveGrant(op *rate.Op, hits uint64) {
	if !m.names.ratewarden() {
		return
	}
	labels := []string{op.Key.Domain, op.Tag, op.Limit.Algorithm.String()}
	m.rlqs.grants.WithLabelValues(labels...).Inc()
	m.rlqs.hits.WithLabelValues(labels...).Add(float64(hits))
}

// ObserveUsage counts what an Envoy reported of a bucket of op's limit.
// The limit's counters of requests allowed without a grant and of grants
// cut short start at 0 with its first report, so that their rates (and
// the alerts on them) exist before the first of either.
func (m *Metrics) ObserveUsage(op *rate.Op, allowed, denied uint64) {
	if !m.names.ratewarden() {
		return
	}
	labels := []string{op.Key.Domain, op.Tag, op.Limit.Algorithm.String()}
	m.rlqs.reported.WithLabelValues(append(labels, "allowed")...).Add(float64(allowed))
	m.rlqs.reported.WithLabelValues(append(labels, "denied")...).Add(float64(denied))
	m.rlqs.ungranted.WithLabelValues(labels...)
	m.rlqs.short.WithLabelValues(labels...)
}

// ObserveUngranted counts the requests an Envoy reported allowed of a
// bucket of op's limit beyond its grants.
func (m *Metrics) ObserveUngranted(op *rate.Op, allowed uint64) {
	if !m.names.ratewarden() {
		return
	}
	m.rlqs.ungranted.WithLabelValues(op.Key.Domain, op.Tag, op.Limit.Algorithm.String()).Add(float64(allowed))
}

// ObserveShort counts a grant asked of op's limit that had less room than
// asked.
func (m *Metrics) ObserveShort(op *rate.Op) {
	if !m.names.ratewarden() {
		return
	}
	m.rlqs.short.WithLabelValues(op.Key.Domain, op.Tag, op.Limit.Algorithm.String()).Inc()
}

// ObserveStreams follows the streams open.
func (m *Metrics) ObserveStreams(delta int) {
	if m.names.ratewarden() {
		m.rlqs.streams.Add(float64(delta))
	}
}
