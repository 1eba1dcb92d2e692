package test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// monitoringDir holds the dashboards and the alerting rules.
var monitoringDir = filepath.Join(repoRoot, "deploy", "monitoring")

// targetLabels are the labels Prometheus adds to every series it scrapes,
// which no /metrics serves: expressions may match and group by them.
var targetLabels = []string{"job", "instance"}

// promQL parses PromQL as Prometheus parses it, with its default options.
var promQL = parser.NewParser(parser.Options{})

// monitoringExpr is one PromQL expression of the dashboards or the rules,
// with where it is written.
type monitoringExpr struct {
	where string
	expr  string
}

// alertRule is a rule of a Prometheus rules file; ratewarden ships alerts
// only.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ruleGroup is a group of a rules file.
type ruleGroup struct {
	Name  string      `yaml:"name"`
	Rules []alertRule `yaml:"rules"`
}

// rulesFile is a Prometheus rules file, as rule_files loads it; it is also
// the spec of a PrometheusRule.
type rulesFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

// prometheusRule is a PrometheusRule of the Prometheus Operator.
type prometheusRule struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec rulesFile `yaml:"spec"`
}

// readYAMLStrict decodes the file name of monitoringDir into v, refusing
// fields v does not have.
func readYAMLStrict(t *testing.T, name string, v any) {
	t.Helper()
	f, err := os.Open(filepath.Join(monitoringDir, name))
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), name)
}

// rulesExprs returns the expression of every rule of rules, each named by
// file and alert.
func rulesExprs(file string, rules rulesFile) []monitoringExpr {
	var exprs []monitoringExpr
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, monitoringExpr{where: file + ": " + r.Alert, expr: r.Expr})
		}
	}
	return exprs
}

// grafanaDashboard is what the test reads of a Grafana dashboard.
type grafanaDashboard struct {
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

// grafanaPanel is a panel of a dashboard; a row holds panels of its own.
type grafanaPanel struct {
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// grafanaDatasource is a panel's or a query's data source.
type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// grafanaVariable is a template variable. Its query is a string, or, as
// Grafana writes it now, an object whose "query" is that string.
type grafanaVariable struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Query      json.RawMessage    `json:"query"`
	Definition string             `json:"definition"`
	Datasource *grafanaDatasource `json:"datasource"`
}

// query returns the variable's query.
func (v grafanaVariable) query() (string, error) {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s, nil
	}
	var q struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &q); err != nil {
		return "", fmt.Errorf("variable %s: query: %w", v.Name, err)
	}
	return q.Query, nil
}

// readDashboard reads the dashboard file name of monitoringDir.
func readDashboard(t *testing.T, name string) grafanaDashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(monitoringDir, name))
	require.NoError(t, err)
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(data, &d), name)
	return d
}

// panels returns every panel of d, those in rows included.
func (d grafanaDashboard) panels() []grafanaPanel {
	var all []grafanaPanel
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

// labelValuesQuery is a variable's query label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// grafanaVariableRef is a reference to a template variable: $name,
// ${name}, ${name:format} or [[name]].
var grafanaVariableRef = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// grafanaIntervals are the values Grafana's own interval variables stand
// for in the test.
var grafanaIntervals = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// expand replaces every variable reference of expr as Grafana would before
// sending it to Prometheus: an interval variable by a duration, a variable
// of the dashboard by ".*", the regular expression of all its values. A
// reference to a variable the dashboard does not define is an error.
func expand(expr string, defined map[string]bool) (string, error) {
	var undefined []string
	out := grafanaVariableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := grafanaVariableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if d, ok := grafanaIntervals[name]; ok {
			return d
		}
		if !defined[name] {
			undefined = append(undefined, name)
		}
		return ".*"
	})
	if len(undefined) > 0 {
		return "", fmt.Errorf("variables the dashboard does not define: %s", strings.Join(undefined, ", "))
	}
	return out, nil
}

// dashboardExprs returns every expression of d, with its variables
// expanded: each target of each panel, and the selector of each
// label_values variable, with the label it asks for. A variable the
// dashboard does not define, or a query the test cannot read, is an error.
func dashboardExprs(file string, d grafanaDashboard) (exprs []monitoringExpr, valueLabels map[string]string, err error) {
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	valueLabels = map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := v.query()
		if err != nil {
			return nil, nil, err
		}
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			return nil, nil, fmt.Errorf("%s: variable %s: %q is no label_values(selector, label)", file, v.Name, q)
		}
		if v.Definition != "" && v.Definition != q {
			return nil, nil, fmt.Errorf("%s: variable %s: its definition %q is not its query %q", file, v.Name, v.Definition, q)
		}
		e, err := expand(m[1], defined)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: variable %s: %w", file, v.Name, err)
		}
		where := fmt.Sprintf("%s: variable %s", file, v.Name)
		exprs = append(exprs, monitoringExpr{where: where, expr: e})
		valueLabels[where] = m[2]
	}
	for _, p := range d.panels() {
		for i, target := range p.Targets {
			e, err := expand(target.Expr, defined)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: panel %q: %w", file, p.Title, err)
			}
			exprs = append(exprs, monitoringExpr{where: fmt.Sprintf("%s: panel %q, query %d", file, p.Title, i+1), expr: e})
		}
	}
	return exprs, valueLabels, nil
}

// servedSeries are the series a /metrics serves, by the name an
// expression selects them by: a histogram's under its _bucket (with le),
// _count and _sum series, as Prometheus stores them.
type servedSeries map[string][]labels.Labels

// scrapeSeries reads the series of the /metrics at url into s.
func (s servedSeries) scrapeSeries(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	s.readSeries(t, url, resp.Body)
}

// readSeries reads the series of r, in the Prometheus text format, into s;
// from names where they come from.
func (s servedSeries) readSeries(t *testing.T, from string, r io.Reader) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	require.NoError(t, err, from)
	for name, f := range families {
		for _, m := range f.GetMetric() {
			b := labels.NewBuilder(labels.EmptyLabels())
			for _, l := range m.GetLabel() {
				b.Set(l.GetName(), l.GetValue())
			}
			ls := b.Labels()
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				s[name+"_count"] = append(s[name+"_count"], ls)
				s[name+"_sum"] = append(s[name+"_sum"], ls)
				for _, bucket := range m.GetHistogram().GetBucket() {
					s[name+"_bucket"] = append(s[name+"_bucket"], b.Set("le", model.FloatString(bucket.GetUpperBound()).String()).Labels())
				}
				s[name+"_bucket"] = append(s[name+"_bucket"], b.Set("le", "+Inf").Labels())
			case dto.MetricType_SUMMARY:
				s[name+"_count"] = append(s[name+"_count"], ls)
				s[name+"_sum"] = append(s[name+"_sum"], ls)
				s[name] = append(s[name], ls)
			default:
				s[name] = append(s[name], ls)
			}
		}
	}
}

// redisExporterJob is the job the alerts on Redis select the Redis
// exporter's series of: the exporter of the Redis that holds the counts,
// apart from any other Redis that Prometheus scrapes.
const redisExporterJob = "ratewarden-redis"

// redisExporterPrefix begins the names of the Redis exporter's metrics (its
// default namespace, redis), which no ratewarden server serves.
const redisExporterPrefix = "redis_"

// redisExporterDir holds what the Redis exporter (oliver006/redis_exporter)
// served for a standalone master, its replica, and a master of a Cluster:
// the lines of the metrics the alerts read, copied from its /metrics.
var redisExporterDir = filepath.Join(repoRoot, "test", "testdata", "monitoring", "redis-exporter")

// redisExporterSeries returns the series of the files of redisExporterDir,
// and checks that each is named as the exporter names them, apart from
// ratewarden's.
func redisExporterSeries(t *testing.T) servedSeries {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(redisExporterDir, "*.prom"))
	require.NoError(t, err)
	require.NotEmpty(t, files, redisExporterDir)
	s := servedSeries{}
	for _, file := range files {
		f, err := os.Open(file)
		require.NoError(t, err)
		s.readSeries(t, file, f)
		f.Close()
	}
	for _, name := range s.names() {
		require.True(t, strings.HasPrefix(name, redisExporterPrefix), "%s: %s is not the Redis exporter's", redisExporterDir, name)
	}
	return s
}

// with returns the series of s and of other; they serve no name in common.
func (s servedSeries) with(t *testing.T, other servedSeries) servedSeries {
	t.Helper()
	all := servedSeries{}
	for name, series := range s {
		all[name] = series
	}
	for name, series := range other {
		require.NotContains(t, all, name, "served by both")
		all[name] = series
	}
	return all
}

// names returns the names of s, sorted.
func (s servedSeries) names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// checkExpr parses e.expr and checks it against what the servers serve:
// every selector names a metric served, and a series of it matches all the
// selector's matchers (those on target labels aside); every label an
// aggregation groups by is a target label or a label of a series of a
// selector under it; and valueLabel, when not empty, is a label of a
// series of the expression's selectors. It returns the problems found.
func checkExpr(e monitoringExpr, served servedSeries, valueLabel string) []string {
	expr, err := promQL.ParseExpr(e.expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v\n%s", e.where, err, e.expr)}
	}
	var problems []string
	report := func(format string, args ...any) {
		problems = append(problems, e.where+": "+fmt.Sprintf(format, args...))
	}
	selected := func(node parser.Node) []labels.Labels {
		var all []labels.Labels
		parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				all = append(all, matching(vs, served[vs.Name])...)
			}
			return nil
		})
		return all
	}
	hasLabel := func(series []labels.Labels, name string) bool {
		return slices.Contains(targetLabels, name) || slices.ContainsFunc(series, func(ls labels.Labels) bool { return ls.Has(name) })
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			switch {
			case n.Name == "":
				report("a selector without a metric name: %s", n)
			case len(served[n.Name]) == 0:
				report("%s is not served", n.Name)
			case len(matching(n, served[n.Name])) == 0:
				report("no series of %s served matches %s", n.Name, n)
			}
		case *parser.AggregateExpr:
			if n.Without {
				break
			}
			series := selected(n.Expr)
			for _, l := range n.Grouping {
				if !hasLabel(series, l) {
					report("%s groups by %q, which no series under it has", n.Op, l)
				}
			}
		}
		return nil
	})
	if valueLabel != "" && !hasLabel(selected(expr), valueLabel) {
		report("no series it selects has the label %q", valueLabel)
	}
	return problems
}

// matching returns the series of series that match every matcher of vs
// but those on its name and on target labels.
func matching(vs *parser.VectorSelector, series []labels.Labels) []labels.Labels {
	var out []labels.Labels
	for _, ls := range series {
		ok := true
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel || slices.Contains(targetLabels, m.Name) {
				continue
			}
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, ls)
		}
	}
	return out
}
