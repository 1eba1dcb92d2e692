// Package metrics exposes ratewarden's Prometheus metrics: it implements
// rls.Observer and the observers of the request path's layers (breaker,
// admission, giveback) over a registry of its own (never the global default one)
// and serves it in the Prometheus text format. Every name it exports is a
// constant of names.go: its own start with ratewarden_ (Prefix); on request
// it also exports envoyproxy/ratelimit's names (ratelimit_service_*,
// RatelimitPrefix), beside or instead of its own. docs/metrics.md lists
// them all, and no other package registers a metric.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/layers/admission"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// LatencyBuckets are the upper bounds, in seconds, of the request and backend
// latency histograms: from 100µs, below a Redis round trip on one host, to
// 50ms, beyond Envoy's default 20ms timeout.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05}

// ruleLabels are the labels of the per-rule counters.
var ruleLabels = []string{"domain", "descriptor", "limit", "algorithm", "window"}

// Metrics holds ratewarden's metrics in a registry of its own. It implements
// rls.Observer, breaker.Observer, admission.Observer and giveback.Observer.
// It is safe for concurrent use; the zero value is not usable, use New.
type Metrics struct {
	registry *prometheus.Registry

	totalHits   *prometheus.CounterVec
	withinLimit *prometheus.CounterVec
	nearLimit   *prometheus.CounterVec
	overLimit   *prometheus.CounterVec
	shadowMode  *prometheus.CounterVec
	charged     *prometheus.CounterVec

	requests        *prometheus.CounterVec
	requestDuration prometheus.Histogram

	backendDuration prometheus.Histogram
	backendErrors   *prometheus.CounterVec
	breakerState    *prometheus.GaugeVec
	breakerOpened   prometheus.Counter
	backendHealth   *prometheus.GaugeVec
	shed            *prometheus.CounterVec
	inflightLimit   prometheus.Gauge
	giveBacks       *prometheus.CounterVec
	deferredCharges *prometheus.CounterVec

	configReloads     *prometheus.CounterVec
	configLastSuccess prometheus.Gauge
	configLoaded      prometheus.Gauge

	leases *leaseMetrics
	rlqs   *rlqsMetrics

	// names says which names are exported; ratelimit holds
	// envoyproxy/ratelimit's metrics, nil unless names asks for them.
	names     Names
	ratelimit *ratelimitMetrics
}

// Option configures New.
type Option func(*Metrics)

// WithNames makes New export the names n asks for; the default is
// NamesRatewarden.
func WithNames(n Names) Option { return func(m *Metrics) { m.names = n } }

var (
	_ rls.Observer       = (*Metrics)(nil)
	_ breaker.Observer   = (*Metrics)(nil)
	_ admission.Observer = (*Metrics)(nil)
	_ giveback.Observer  = (*Metrics)(nil)
)

// New returns Metrics registered in a new registry, together with the Go
// runtime and process collectors.
func New(opts ...Option) *Metrics {
	ruleCounter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, ruleLabels)
	}
	m := &Metrics{
		registry: prometheus.NewRegistry(),

		totalHits:   ruleCounter(RuleHits, ruleHitsHelp),
		withinLimit: ruleCounter(RuleWithinLimitHits, ruleWithinLimitHitsHelp),
		nearLimit:   ruleCounter(RuleNearLimitHits, ruleNearLimitHitsHelp),
		overLimit:   ruleCounter(RuleOverLimitHits, ruleOverLimitHitsHelp),
		shadowMode:  ruleCounter(RuleShadowModeHits, ruleShadowModeHitsHelp),
		charged:     ruleCounter(RuleChargedHits, ruleChargedHitsHelp),

		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: Requests, Help: requestsHelp},
			[]string{"code", "grpc_code"}),
		requestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: RequestDuration, Help: requestDurationHelp, Buckets: LatencyBuckets,
		}),

		backendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: BackendDuration, Help: backendDurationHelp, Buckets: LatencyBuckets,
		}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: BackendErrors, Help: backendErrorsHelp},
			[]string{"kind"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BreakerState, Help: breakerStateHelp},
			[]string{"state"}),
		breakerOpened: prometheus.NewCounter(prometheus.CounterOpts{Name: BreakerOpened, Help: breakerOpenedHelp}),
		backendHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BackendHealth, Help: backendHealthHelp},
			[]string{"state"}),

		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsShed, Help: requestsShedHelp},
			[]string{"reason"}),
		inflightLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: InflightLimit, Help: inflightLimitHelp}),
		giveBacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: GiveBacks, Help: giveBacksHelp},
			[]string{"result"}),
		deferredCharges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: DeferredCharges, Help: deferredChargesHelp},
			[]string{"result"}),

		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ConfigReloads, Help: configReloadsHelp},
			[]string{"result"}),
		configLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: ConfigLastReloadSuccessful, Help: configLastReloadSuccessfulHelp,
		}),
		configLoaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: ConfigLoaded, Help: configLoadedHelp}),

		leases: newLeaseMetrics(),
		rlqs:   newRLQSMetrics(),
	}
	for _, opt := range opts {
		opt(m)
	}
	if m.names.ratewarden() {
		m.registry.MustRegister(
			m.totalHits, m.withinLimit, m.nearLimit, m.overLimit, m.shadowMode, m.charged,
			m.requests, m.requestDuration,
			m.backendDuration, m.backendErrors, m.breakerState, m.breakerOpened, m.backendHealth,
			m.shed, m.inflightLimit, m.giveBacks, m.deferredCharges,
			m.configReloads, m.configLastSuccess, m.configLoaded,
		)
		m.registry.MustRegister(m.leases.collectors()...)
		m.registry.MustRegister(m.rlqs.collectors()...)
	}
	if m.names.ratelimit() {
		m.ratelimit = newRatelimitMetrics()
		m.registry.MustRegister(m.ratelimit.collectors()...)
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	// Series whose absence would read as "no data" rather than zero.
	for _, kind := range rate.Failures {
		m.backendErrors.WithLabelValues(kind.String())
	}
	m.ObserveBreaker(breaker.Closed)
	m.ObserveBackendCheck(BackendOK)
	for _, r := range admission.ShedReasons {
		m.shed.WithLabelValues(r.String())
	}
	for _, r := range giveback.Results {
		m.giveBacks.WithLabelValues(r.String())
		m.deferredCharges.WithLabelValues(deferredChargeLabel(r))
	}
	m.configReloads.WithLabelValues("success")
	m.configReloads.WithLabelValues("failure")
	m.configLastSuccess.Set(1)
	return m
}

// Handler returns the HTTP handler that serves the metrics in the
// Prometheus text (or OpenMetrics) format, for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// RegisterDenyCacheHits adds DenyCacheHits, the counter that hits reads:
// the takes the deny cache denied. Call it once, with the deny cache.
func (m *Metrics) RegisterDenyCacheHits(hits func() uint64) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: DenyCacheHits, Help: denyCacheHitsHelp},
		func() float64 { return float64(hits()) }))
}

// RegisterXDSConnected adds XDSConnected, the gauge that connected reads:
// whether the stream to the xDS server is up. Call it once, with the xDS
// client.
func (m *Metrics) RegisterXDSConnected(connected func() bool) {
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: XDSConnected, Help: xdsConnectedHelp},
		func() float64 {
			if connected() {
				return 1
			}
			return 0
		}))
}

// ObserveRequest counts a ShouldRateLimit call and its latency.
func (m *Metrics) ObserveRequest(o rls.RequestOutcome) {
	if m.ratelimit != nil {
		m.ratelimit.observeRequest(o)
		if !m.names.ratewarden() {
			return
		}
	}
	m.requests.WithLabelValues(o.Code.String(), o.GRPCCode.String()).Inc()
	m.requestDuration.Observe(o.Duration.Seconds())
}

// ObserveLimit adds one limit's decision to the per-rule counters, by hits.
// The window of a request's limit override is labelled "override": the
// client chooses it, and would make a series per window.
//
// A charge counts in charged_hits_total too, and in over_limit when it took
// the limit past L, in within_limit otherwise.
func (m *Metrics) ObserveLimit(d rls.LimitDecision) {
	if m.ratelimit != nil {
		m.ratelimit.rules.observe(d)
		if !m.names.ratewarden() {
			return
		}
	}
	window := overrideWindow
	if !d.Override {
		window = windowLabel(d.Window)
	}
	labels := []string{d.Domain, d.Descriptor, d.Limit, d.Algorithm.String(), window}
	hits := float64(d.Hits)
	m.totalHits.WithLabelValues(labels...).Add(hits)
	if d.Charge {
		m.charged.WithLabelValues(labels...).Add(hits)
	}
	if d.OverLimit {
		m.overLimit.WithLabelValues(labels...).Add(hits)
		if d.Shadowed {
			m.shadowMode.WithLabelValues(labels...).Add(hits)
		}
		return
	}
	m.withinLimit.WithLabelValues(labels...).Add(hits)
	if d.NearLimit {
		m.nearLimit.WithLabelValues(labels...).Add(hits)
	}
}

// ObserveBackend records a backend call's latency and, when it failed, its
// kind of error. A call abandoned by its caller is no backend error.
func (m *Metrics) ObserveBackend(c breaker.Call) {
	if c.Failure != rate.FailureCircuitOpen {
		m.backendDuration.Observe(c.Duration.Seconds())
	}
	switch c.Failure {
	case rate.FailureNone, rate.FailureCanceled:
	default:
		m.backendErrors.WithLabelValues(c.Failure.String()).Inc()
	}
}

// ObserveBreaker records the circuit breaker's new state.
func (m *Metrics) ObserveBreaker(s breaker.State) {
	for _, st := range breaker.States {
		v := 0.0
		if st == s {
			v = 1
		}
		m.breakerState.WithLabelValues(st.String()).Set(v)
	}
	if s == breaker.Open {
		m.breakerOpened.Inc()
	}
}

// ObserveShed counts a request shed before it reached the backend.
func (m *Metrics) ObserveShed(r admission.ShedReason) { m.shed.WithLabelValues(r.String()).Inc() }

// ObserveInflightLimit records the limit of requests with backend calls
// under way.
func (m *Metrics) ObserveInflightLimit(n int) { m.inflightLimit.Set(float64(n)) }

// ObserveGiveBack counts n ops owed back to the backend by what became of
// them.
func (m *Metrics) ObserveGiveBack(r giveback.Result, n int) {
	m.giveBacks.WithLabelValues(r.String()).Add(float64(n))
}

// ObserveDeferredCharge counts n charges recorded after their request, or
// dropped, or left uncertain.
func (m *Metrics) ObserveDeferredCharge(r giveback.Result, n int) {
	m.deferredCharges.WithLabelValues(deferredChargeLabel(r)).Add(float64(n))
}

// deferredChargeLabel names what became of a deferred charge: "recorded",
// "dropped" or "uncertain".
func deferredChargeLabel(r giveback.Result) string {
	if r == giveback.GivenBack {
		return "recorded"
	}
	return r.String()
}

// ObserveConfigReload records a reload of the limits configuration: err is
// nil when it succeeded.
func (m *Metrics) ObserveConfigReload(err error) {
	if m.ratelimit != nil {
		m.ratelimit.observeConfigLoad(err)
	}
	if err != nil {
		m.configReloads.WithLabelValues("failure").Inc()
		m.configLastSuccess.Set(0)
		return
	}
	m.configReloads.WithLabelValues("success").Inc()
	m.configLastSuccess.Set(1)
	m.configLoaded.Set(1)
}

// overrideWindow is the window label of every limit override.
const overrideWindow = "override"

// ObserveConfigLoaded records the first load of the limits configuration,
// which envoyproxy/ratelimit's config_load_success counts and ConfigReloads
// does not. ConfigLoaded is 1 from then on, or from the first reload that
// succeeds: limits once in force stay in force.
func (m *Metrics) ObserveConfigLoaded() {
	if m.ratelimit != nil {
		m.ratelimit.observeConfigLoad(nil)
	}
	m.configLoaded.Set(1)
}

// windowLabel writes a window in its largest whole unit: "1s", "90s", "5m",
// "1h", "7d".
func windowLabel(w time.Duration) string {
	const day = 24 * time.Hour
	for _, u := range []struct {
		d      time.Duration
		suffix string
	}{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if w >= u.d && w%u.d == 0 {
			return strconv.FormatInt(int64(w/u.d), 10) + u.suffix
		}
	}
	return w.String()
}
