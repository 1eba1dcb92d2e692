package test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// The files of deploy/monitoring.
const (
	rulesFileName          = "ratewarden.rules.yaml"
	prometheusRuleFileName = "ratewarden-prometheusrule.yaml"
	dashboardFileName      = "ratewarden-dashboard.json"
	// ratelimitDashboardFileName is the dashboard for
	// RLS_METRICS_NAMES=ratelimit, of envoyproxy/ratelimit's names only.
	ratelimitDashboardFileName = "ratewarden-ratelimit-names-dashboard.json"
)

// runbookBase is where the runbooks are: each alert's runbook_url is it,
// then "#" and the alert's name in lower case, the anchor of its heading.
const runbookBase = "https://github.com/ratewarden/ratewarden/blob/main/docs/alerts.md"

// runbooksDoc holds the runbooks, and runbooksHeading opens them in it: one
// heading of level 3 per alert, named as the alert, under it.
const (
	runbooksDoc     = "docs/alerts.md"
	runbooksHeading = "## Runbooks"
)

// prometheusTemplateFuncs are the functions of Prometheus's templates that
// the annotations use, by name: the test only parses the annotations, which
// needs the names, and never runs them.
var prometheusTemplateFuncs = template.FuncMap{
	"humanize": fmt.Sprint, "humanizePercentage": fmt.Sprint, "humanizeDuration": fmt.Sprint,
}

// alertName is how the alerts are named.
var alertName = regexp.MustCompile(`^Ratewarden[A-Z][A-Za-z]+$`)

// TestAlertRules reads the plain rules file and the PrometheusRule: they
// hold the same rules; every expression parses with Prometheus's parser as
// an instant vector; every selector of the Redis exporter's metrics selects
// the job redisExporterJob; every alert has a severity, a summary and a
// description whose templates parse as Prometheus's do, and a runbook_url
// whose anchor is the heading of its runbook in docs/alerts.md, and
// every runbook there is an alert's.
func TestAlertRules(t *testing.T) {
	var plain rulesFile
	readYAMLStrict(t, rulesFileName, &plain)
	var cr prometheusRule
	readYAMLStrict(t, prometheusRuleFileName, &cr)
	assert.Equal(t, "monitoring.coreos.com/v1", cr.APIVersion)
	assert.Equal(t, "PrometheusRule", cr.Kind)
	assert.NotEmpty(t, cr.Metadata.Name)
	assert.Equal(t, plain, cr.Spec, "%s and %s hold the same rules", rulesFileName, prometheusRuleFileName)

	runbooks := alertRunbooks(t)
	var names []string
	for _, g := range plain.Groups {
		assert.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			where := rulesFileName + ": " + r.Alert
			names = append(names, r.Alert)
			assert.Regexp(t, alertName, r.Alert)
			expr, err := promQL.ParseExpr(r.Expr)
			if assert.NoError(t, err, "%s: %s", where, r.Expr) {
				assert.Equal(t, parser.ValueTypeVector, expr.Type(), "%s: an alert's expression is an instant vector", where)
				for _, vs := range exporterSelectors(expr) {
					assert.True(t, slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
						return m.Name == "job" && m.Type == labels.MatchEqual && m.Value == redisExporterJob
					}), "%s: %s selects a Redis other than the one of the counts: it needs job=%q", where, vs, redisExporterJob)
				}
			}
			if r.For != "" {
				_, err := model.ParseDuration(r.For)
				assert.NoError(t, err, "%s: for", where)
			}
			assert.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], "%s: severity", where)
			for _, key := range []string{"summary", "description"} {
				text := r.Annotations[key]
				assert.NotEmpty(t, text, "%s: %s", where, key)
				// Prometheus defines these variables before an annotation.
				_, err := template.New(key).Funcs(prometheusTemplateFuncs).Parse("{{$labels := .Labels}}{{$value := .Value}}" + text)
				assert.NoError(t, err, "%s: %s", where, key)
			}
			anchor := strings.ToLower(r.Alert)
			assert.Equal(t, runbookBase+"#"+anchor, r.Annotations["runbook_url"], "%s: runbook_url", where)
			assert.Len(t, r.Annotations, 3, "%s: summary, description and runbook_url", where)
			assert.Contains(t, runbooks, r.Alert, "%s has no runbook under %q in %s", r.Alert, runbooksHeading, runbooksDoc)
		}
	}
	assert.ElementsMatch(t, runbooks, names, "the runbooks in %s are the alerts'", runbooksDoc)
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(names))), len(names), "alert names are unique")
	for _, want := range []string{
		"RatewardenCircuitBreakerOpen", "RatewardenSheddingSustained", "RatewardenGiveBacksDropped",
		"RatewardenConfigRejected", "RatewardenNoConfig", "RatewardenRedisRefusesWrites",
		"RatewardenBackendErrors", "RatewardenLatencyNearEnvoyTimeout",
		"RatewardenRLQSAdmitsWithoutGrants", "RatewardenRLQSDeniesWithinLimit", "RatewardenRLQSStreamsGone",
		"RatewardenRedisMemoryHigh", "RatewardenRedisMemoryCritical", "RatewardenRedisMemoryFillingUp",
		"RatewardenRedisEvicting", "RatewardenRedisNoMaxmemory", "RatewardenRedisMasterCPUHigh",
		"RatewardenRedisDown", "RatewardenRedisReplicaLinkDown", "RatewardenRedisReplicasLost",
		"RatewardenRedisClusterDown", "RatewardenRedisClusterSlotsUnserved",
	} {
		assert.Contains(t, names, want)
	}
}

// exporterSelectors returns the selectors of expr that name a metric of
// the Redis exporter.
func exporterSelectors(expr parser.Expr) []*parser.VectorSelector {
	var found []*parser.VectorSelector
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && strings.HasPrefix(vs.Name, redisExporterPrefix) {
			found = append(found, vs)
		}
		return nil
	})
	return found
}

// alertRunbooks returns the headings of the runbooks in runbooksDoc: those
// of level 3 under runbooksHeading, up to the next heading of its level or
// above, and checks that each is a heading the docs' anchors know.
func alertRunbooks(t *testing.T) []string {
	t.Helper()
	doc := readMarkdown(t, runbooksDoc)
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(runbooksDoc)))
	require.NoError(t, err)
	text := string(data)
	var runbooks []string
	in := false
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		switch {
		case line == runbooksHeading:
			in = true
		case in && (strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# ")):
			in = false
		case in && strings.HasPrefix(line, "### "):
			name := strings.TrimPrefix(line, "### ")
			runbooks = append(runbooks, name)
			assert.True(t, doc.Anchors[strings.ToLower(name)], "the runbook %q has the anchor #%s", name, strings.ToLower(name))
		}
	}
	require.NotEmpty(t, runbooks, "%s has runbooks under %q", runbooksDoc, runbooksHeading)
	return runbooks
}

// TestDashboards reads the dashboards: each panel's and each query's data
// source is the dashboard's variable ${datasource}, a Prometheus data
// source; every variable an expression uses is defined; and every
// expression parses with Prometheus's parser.
func TestDashboards(t *testing.T) {
	for _, file := range []string{dashboardFileName, ratelimitDashboardFileName} {
		d := readDashboard(t, file)
		assert.NotEmpty(t, d.Title, file)
		assert.NotEmpty(t, d.UID, file)
		i := slices.IndexFunc(d.Templating.List, func(v grafanaVariable) bool { return v.Type == "datasource" })
		if assert.GreaterOrEqual(t, i, 0, "%s: a data source variable", file) {
			v := d.Templating.List[i]
			assert.Equal(t, "datasource", v.Name, file)
			q, err := v.query()
			require.NoError(t, err)
			assert.Equal(t, "prometheus", q, file)
		}
		want := grafanaDatasource{Type: "prometheus", UID: "${datasource}"}
		for _, v := range d.Templating.List {
			if v.Type == "query" && assert.NotNil(t, v.Datasource, "%s: variable %s: data source", file, v.Name) {
				assert.Equal(t, want, *v.Datasource, "%s: variable %s", file, v.Name)
			}
		}
		targets := 0
		for _, p := range d.panels() {
			if p.Type == "row" {
				assert.Empty(t, p.Targets, "%s: row %q", file, p.Title)
				continue
			}
			if assert.NotNil(t, p.Datasource, "%s: panel %q: data source", file, p.Title) {
				assert.Equal(t, want, *p.Datasource, "%s: panel %q", file, p.Title)
			}
			assert.NotEmpty(t, p.Targets, "%s: panel %q: queries", file, p.Title)
			for _, target := range p.Targets {
				targets++
				if assert.NotNil(t, target.Datasource, "%s: panel %q: query data source", file, p.Title) {
					assert.Equal(t, want, *target.Datasource, "%s: panel %q", file, p.Title)
				}
			}
		}
		exprs, _, err := dashboardExprs(file, d)
		require.NoError(t, err)
		assert.Greater(t, len(exprs), targets, "%s: the queries of the panels and of the variables", file)
		for _, e := range exprs {
			_, err := promQL.ParseExpr(e.expr)
			assert.NoError(t, err, "%s\n%s", e.where, e.expr)
		}
	}
}

// monitoringLimits are limits that make every per-rule series appear, each
// named (an unnamed limit's series have no limit label): one that is denied
// and comes near, one two levels deep (whose envoyproxy/ratelimit series
// have key2), one in shadow mode, one charged, and a large one that the
// redis backend leases.
const monitoringLimits = `
domain: monitoring
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 3}
  - key: path
    descriptors:
      - key: user
        rate_limit: {name: per_path, unit: minute, requests_per_unit: 2, algorithm: sliding_window_log}
  - key: trial
    shadow_mode: true
    rate_limit: {name: trial, unit: minute, requests_per_unit: 1, algorithm: token_bucket}
  - key: tokens
    charge: window
    rate_limit: {name: tokens, unit: minute, requests_per_unit: 100, algorithm: fixed_window}
  - key: hot
    rate_limit: {name: hot, unit: hour, requests_per_unit: 1000000, algorithm: token_bucket}
`

// TestMonitoringNamesServedMetrics checks every expression of the alerting
// rules and of the dashboards against the /metrics of running servers (see
// checkExpr): ratewarden's dashboard and the rules against servers with
// ratewarden's names (the memory backend, Redis, and limits from an xDS
// server), the dashboard of envoyproxy/ratelimit's names against a server
// with RLS_METRICS_NAMES=ratelimit, which serves none of ratewarden's. The
// alerts on Redis itself read the Redis exporter's series, which no server
// of ratewarden's serves: they are checked against what the exporter served
// (redisExporterSeries).
func TestMonitoringNamesServedMetrics(t *testing.T) {
	limits := writeConfig(t, monitoringLimits)
	ours := servedSeries{}

	mem := startServer(t, map[string]string{"RLS_CONFIG_PATH": limits})
	exerciseMonitoring(t, mem, false)
	ours.scrapeSeries(t, "http://"+mem.HTTPAddr+"/metrics")

	redis := redistest.Standalone(t)
	onRedis := startServer(t, map[string]string{
		"RLS_CONFIG_PATH": limits, "RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redis.Addr(),
		"RLS_BACKEND_TIMEOUT": "5s", "RLS_KEY_PREFIX": fmt.Sprintf("monitoring-%d:", rand.Uint64()),
	})
	exerciseMonitoring(t, onRedis, true)
	ours.scrapeSeries(t, "http://"+onRedis.HTTPAddr+"/metrics")

	xs := xdstest.Start(t, nil)
	fromXDS := startServer(t, map[string]string{
		"RLS_CONFIG_SOURCE": "xds", "RLS_XDS_SERVER_URL": xs.Addr(), "RLS_XDS_NODE_ID": "monitoring",
	})
	ours.scrapeSeries(t, "http://"+fromXDS.HTTPAddr+"/metrics")

	theirs := servedSeries{}
	named := startServer(t, map[string]string{"RLS_CONFIG_PATH": limits, "RLS_METRICS_NAMES": "ratelimit"})
	exerciseMonitoring(t, named, false)
	theirs.scrapeSeries(t, "http://"+named.HTTPAddr+"/metrics")
	for _, name := range theirs.names() {
		require.False(t, strings.HasPrefix(name, metrics.Prefix), "RLS_METRICS_NAMES=ratelimit serves %s", name)
	}

	for _, name := range ours.names() {
		require.False(t, strings.HasPrefix(name, redisExporterPrefix), "ratewarden serves %s, a name of the Redis exporter's", name)
	}
	withRedis := ours.with(t, redisExporterSeries(t))

	var plain rulesFile
	readYAMLStrict(t, rulesFileName, &plain)
	var cr prometheusRule
	readYAMLStrict(t, prometheusRuleFileName, &cr)
	for _, tc := range []exprCheck{
		{exprs: rulesExprs(rulesFileName, plain), served: withRedis},
		{exprs: rulesExprs(prometheusRuleFileName, cr.Spec), served: withRedis},
		dashboardCheck(t, dashboardFileName, ours),
		dashboardCheck(t, ratelimitDashboardFileName, theirs),
	} {
		require.NotEmpty(t, tc.exprs)
		for _, e := range tc.exprs {
			for _, problem := range checkExpr(e, tc.served, tc.valueLabels[e.where]) {
				t.Errorf("%s\n%s", problem, e.expr)
			}
		}
	}
	if t.Failed() {
		t.Logf("served with ratewarden's names: %s", strings.Join(ours.names(), " "))
		t.Logf("served with RLS_METRICS_NAMES=ratelimit: %s", strings.Join(theirs.names(), " "))
	}
}

// exprCheck is a set of expressions, the label each asks the values of
// (by where it is written; none for most), and the series they must find.
type exprCheck struct {
	exprs       []monitoringExpr
	valueLabels map[string]string
	served      servedSeries
}

// dashboardCheck returns the check of the dashboard file's expressions
// against served.
func dashboardCheck(t *testing.T, file string, served servedSeries) exprCheck {
	t.Helper()
	exprs, valueLabels, err := dashboardExprs(file, readDashboard(t, file))
	require.NoError(t, err)
	return exprCheck{exprs: exprs, valueLabels: valueLabels, served: served}
}

// exerciseMonitoring asks srv what makes every series of monitoringLimits
// appear: admitted, near and denied hits, hits of a rule two levels deep, a
// shadow-mode denial, a charge past its limit and an invalid request; over
// RLQS, a grant and a grant refused; and,
// with Redis, a hot limit asked often enough to be leased, until a lease
// gives back hits it did not use.
func exerciseMonitoring(t *testing.T, srv *serverProcess, redis bool) {
	t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("u%d", rand.Uint64())
	ask := func(hits uint32, entries ...string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i < len(entries); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: entries[i], Value: entries[i+1]})
		}
		resp, err := srv.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "monitoring", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: hits})
		require.NoError(t, err)
		return resp.GetOverallCode()
	}
	for range 4 {
		ask(1, "user", id)
		ask(1, "path", "/a", "user", id)
		ask(1, "trial", id)
	}
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, ask(1, "user", id))
	require.Equal(t, rlsv3.RateLimitResponse_OK, ask(1, "trial", id), "shadow mode lets denials through")
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, ask(150, "tokens", id), "a charge past its limit is recorded and answered OVER_LIMIT")
	_, err := srv.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "monitoring"})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	// A grant over RLQS, for a report of a bucket of the hot limit, which
	// brings its counters of requests allowed without a grant and of
	// grants cut short at 0; then a grant asked of the per_path limit,
	// which the requests above used up, is refused.
	quota, err := rlqsv3.NewRateLimitQuotaServiceClient(srv.conn).StreamRateLimitQuotas(ctx)
	require.NoError(t, err)
	require.NoError(t, quota.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "monitoring",
		BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"hot": id}}, TimeElapsed: durationpb.New(time.Second), NumRequestsDenied: 1,
		}}}))
	granted, err := quota.Recv()
	require.NoError(t, err)
	require.NotEmpty(t, granted.GetBucketAction(), "a grant")
	require.NoError(t, quota.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "monitoring",
		BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"path": "/a", "user": id}}, TimeElapsed: durationpb.New(time.Second), NumRequestsDenied: 1,
		}}}))
	require.NoError(t, quota.CloseSend())
	_, err = quota.Recv()
	require.ErrorIs(t, err, io.EOF, "the refused grant is answered with nothing, and the stream ends once the report is handled")
	if !redis {
		return
	}
	// The hot limit is leased once this replica asks it often; a lease that
	// ends with hits left gives them back.
	require.Eventually(t, func() bool {
		for range 200 {
			ask(1, "hot", id)
		}
		time.Sleep(200 * time.Millisecond) // past RLS_LEASE_TIME, so leases end
		served := servedSeries{}
		served.scrapeSeries(t, "http://"+srv.HTTPAddr+"/metrics")
		return slices.ContainsFunc(served[metrics.LeaseHits], func(ls labels.Labels) bool { return ls.Get("result") == "given_back" })
	}, 20*time.Second, time.Millisecond, "a lease gives back hits it did not use")
}
