package metrics

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/ratewarden/ratewarden/internal/rls"
)

// Names says whose metric names Metrics exports.
type Names uint8

// The sets of names.
const (
	// NamesRatewarden exports ratewarden's own metrics, ratewarden_*.
	NamesRatewarden Names = iota
	// NamesRatelimit exports the metrics envoyproxy/ratelimit's Prometheus
	// sink exports with its default mapping, ratelimit_service_*, so that
	// its dashboards and alerts keep working.
	NamesRatelimit
	// NamesBoth exports both.
	NamesBoth
)

// String returns the set's name as RLS_METRICS_NAMES spells it.
func (n Names) String() string {
	switch n {
	case NamesRatewarden:
		return "ratewarden"
	case NamesRatelimit:
		return "ratelimit"
	case NamesBoth:
		return "both"
	}
	return fmt.Sprintf("Names(%d)", uint8(n))
}

// ParseNames returns the Names called ratewarden, ratelimit or both.
func ParseNames(s string) (Names, error) {
	for _, n := range []Names{NamesRatewarden, NamesRatelimit, NamesBoth} {
		if n.String() == s {
			return n, nil
		}
	}
	return 0, fmt.Errorf("metrics: unknown metric names %q (want ratewarden, ratelimit or both)", s)
}

// UnmarshalText sets n to the Names called text, as ParseNames reads them.
func (n *Names) UnmarshalText(text []byte) error {
	v, err := ParseNames(string(text))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

func (n Names) ratewarden() bool { return n != NamesRatelimit }
func (n Names) ratelimit() bool  { return n != NamesRatewarden }

// shouldRateLimitMethod is the grpc_method label of envoyproxy/ratelimit's
// request metrics.
const shouldRateLimitMethod = "ShouldRateLimit"

// ratelimitMetrics are envoyproxy/ratelimit's metrics as its Prometheus sink
// exports them through its default statsd mapping: every counter keeps the
// mapped name (no _total suffix), the per-rule counters are labelled
// domain, key1 and key2 as the mapping cuts the stat name, and the response
// time is a histogram in seconds with the statsd exporter's default buckets.
type ratelimitMetrics struct {
	rules *ruleCounters

	totalRequests *prometheus.CounterVec   // RatelimitTotalRequests{grpc_method}
	responseTime  *prometheus.HistogramVec // RatelimitResponseTime{grpc_method}
	callErrors    *prometheus.CounterVec   // RatelimitShouldRateLimitError{err_type}
	configSuccess prometheus.Counter       // RatelimitConfigLoadSuccess
	configError   prometheus.Counter       // RatelimitConfigLoadError

	requests     prometheus.Counter
	duration     prometheus.Observer
	redisErrors  prometheus.Counter
	serviceError prometheus.Counter
}

func newRatelimitMetrics() *ratelimitMetrics {
	r := &ratelimitMetrics{
		rules: newRuleCounters(),
		totalRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RatelimitTotalRequests, Help: ratelimitTotalRequestsHelp,
		}, []string{"grpc_method"}),
		responseTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: RatelimitResponseTime, Help: ratelimitResponseTimeHelp, Buckets: prometheus.DefBuckets,
		}, []string{"grpc_method"}),
		callErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RatelimitShouldRateLimitError, Help: ratelimitShouldRateLimitErrorHelp,
		}, []string{"err_type"}),
		configSuccess: prometheus.NewCounter(prometheus.CounterOpts{
			Name: RatelimitConfigLoadSuccess, Help: ratelimitConfigLoadSuccessHelp,
		}),
		configError: prometheus.NewCounter(prometheus.CounterOpts{
			Name: RatelimitConfigLoadError, Help: ratelimitConfigLoadErrorHelp,
		}),
	}
	r.requests = r.totalRequests.WithLabelValues(shouldRateLimitMethod)
	r.duration = r.responseTime.WithLabelValues(shouldRateLimitMethod)
	r.redisErrors = r.callErrors.WithLabelValues("redis_error")
	r.serviceError = r.callErrors.WithLabelValues("service_error")
	return r
}

func (r *ratelimitMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.rules, r.totalRequests, r.responseTime, r.callErrors, r.configSuccess, r.configError}
}

func (r *ratelimitMetrics) observeRequest(o rls.RequestOutcome) {
	r.requests.Inc()
	r.duration.Observe(o.Duration.Seconds())
	switch o.GRPCCode {
	case codes.Unavailable:
		r.redisErrors.Inc()
	case codes.InvalidArgument:
		r.serviceError.Inc()
	}
}

func (r *ratelimitMetrics) observeConfigLoad(err error) {
	if err != nil {
		r.configError.Inc()
		return
	}
	r.configSuccess.Inc()
}

// ruleStats are the names of envoyproxy/ratelimit's per-rule counters, in
// the order of ruleSeries.counts.
var ruleStats = [...]string{RatelimitTotalHits, RatelimitOverLimit, RatelimitNearLimit, RatelimitWithinLimit, RatelimitShadowMode}

// The indexes of ruleStats.
const (
	statTotalHits = iota
	statOverLimit
	statNearLimit
	statWithinLimit
	statShadowMode
)

// ruleCounters are envoyproxy/ratelimit's per-rule counters, ruleStats. Their series do not all have the same
// labels: a rule of one level has domain and key1, a deeper one domain, key1
// and key2, as the default mapping of envoyproxy/ratelimit's Prometheus sink
// gives them. The registry takes such a family only from an unchecked
// collector, which ruleCounters is: it describes nothing. It is safe for
// concurrent use.
type ruleCounters struct {
	// descs[n][s] describes stat s with n+2 labels.
	descs [2][len(ruleStats)]*prometheus.Desc

	mu     sync.RWMutex
	series map[string]*ruleSeries // by rls.LimitDecision.Descriptor
}

// ruleSeries counts the hits of one rule.
type ruleSeries struct {
	labels []string // domain, key1 and, for a rule below the first level, key2
	counts [len(ruleStats)]atomic.Uint64
}

func newRuleCounters() *ruleCounters {
	c := &ruleCounters{series: make(map[string]*ruleSeries)}
	for n, labels := range [][]string{{"domain", "key1"}, {"domain", "key1", "key2"}} {
		for s, name := range ruleStats {
			c.descs[n][s] = prometheus.NewDesc(name, ratelimitRuleHelp(name), labels, nil)
		}
	}
	return c
}

// Describe describes nothing, which makes the collector unchecked.
func (c *ruleCounters) Describe(chan<- *prometheus.Desc) {}

// Collect sends every series' counters.
func (c *ruleCounters) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	series := make([]*ruleSeries, 0, len(c.series))
	for _, s := range c.series {
		series = append(series, s)
	}
	c.mu.RUnlock()
	for _, s := range series {
		descs := &c.descs[len(s.labels)-2]
		for i := range s.counts {
			ch <- prometheus.MustNewConstMetric(descs[i], prometheus.CounterValue, float64(s.counts[i].Load()), s.labels...)
		}
	}
}

// observe adds one limit's decision, by hits.
func (c *ruleCounters) observe(d rls.LimitDecision) {
	s := c.get(d.Descriptor)
	s.counts[statTotalHits].Add(d.Hits)
	if d.OverLimit {
		s.counts[statOverLimit].Add(d.Hits)
		if d.Shadowed {
			s.counts[statShadowMode].Add(d.Hits)
		}
		return
	}
	s.counts[statWithinLimit].Add(d.Hits)
	if d.NearLimit {
		s.counts[statNearLimit].Add(d.Hits)
	}
}

// get returns the series of a descriptor, creating it when needed.
func (c *ruleCounters) get(descriptor string) *ruleSeries {
	c.mu.RLock()
	s := c.series[descriptor]
	c.mu.RUnlock()
	if s != nil {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s = c.series[descriptor]; s == nil {
		s = &ruleSeries{labels: ratelimitLabels(descriptor)}
		c.series[descriptor] = s
	}
	return s
}

// ipv4 finds dotted IPv4 addresses in a stat name.
var ipv4 = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)

// ratelimitLabels returns the label values envoyproxy/ratelimit's default
// mapping gives the stats of a rule named descriptor ("domain.key_value.key2"):
// the name is first cleaned as its stats are (':' and '|' become '_', and
// so do the dots of an IPv4 address), then cut at its dots: domain and key1
// from the first two parts and, when there are more, key2 from the third;
// any further parts are dropped, as the mapping drops them.
func ratelimitLabels(descriptor string) []string {
	name := strings.NewReplacer(":", "_", "|", "_").Replace(descriptor)
	name = ipv4.ReplaceAllStringFunc(name, func(ip string) string { return strings.ReplaceAll(ip, ".", "_") })
	parts := strings.SplitN(name, ".", 4)
	switch len(parts) {
	case 1:
		return []string{parts[0], ""}
	case 2:
		return parts
	default:
		return parts[:3]
	}
}
