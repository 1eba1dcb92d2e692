package metrics_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// root is the repository's top folder, seen from this package's.
var root = filepath.Join("..", "..")

// nameConstants returns the constants of the package's source that name a
// metric, by name: every exported string constant whose value starts with
// metrics.Prefix or metrics.RatelimitPrefix, but the prefixes themselves.
func nameConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if len(vs.Values) != len(vs.Names) {
					continue // iota's
				}
				for i, id := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !id.IsExported() || !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					if (strings.HasPrefix(v, metrics.Prefix) || strings.HasPrefix(v, metrics.RatelimitPrefix)) && !strings.HasSuffix(v, "_") {
						consts[v] = id.Name
					}
				}
			}
		}
	}
	require.NotEmpty(t, consts)
	return consts
}

// exported returns the type of every metric of ratewarden's, by name, as a
// Metrics that exports both sets of names and has seen every kind of event
// serves them: the Go runtime's and the process's metrics aside.
func exported(t *testing.T) map[string]string {
	t.Helper()
	m := metrics.New(metrics.WithNames(metrics.NamesBoth))
	m.RegisterDenyCacheHits(func() uint64 { return 1 })
	m.RegisterXDSConnected(func() bool { return true })
	for _, d := range []rls.LimitDecision{
		{Domain: "d", Descriptor: "d.user", Algorithm: algorithms.TokenBucket, Window: time.Minute, Hits: 1, NearLimit: true},
		{Domain: "d", Descriptor: "d.path_/a.user", Algorithm: algorithms.FixedWindow, Window: time.Second, Hits: 1, OverLimit: true, Shadowed: true},
		{Domain: "d", Descriptor: "d.tokens", Algorithm: algorithms.FixedWindow, Window: time.Second, Hits: 5, Charge: true},
	} {
		m.ObserveLimit(d)
	}
	m.ObserveRequest(rls.RequestOutcome{Duration: time.Millisecond})
	m.ObserveConfigLoaded()
	m.ObserveLease(&rate.Op{Key: rate.Key{Domain: "d"}, Tag: "d.user", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket}}, lease.Taken, 8)
	m.ObserveGrant(&rate.Op{Key: rate.Key{Domain: "d"}, Tag: "d.user", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}}, 8)
	m.ObserveUsage(&rate.Op{Key: rate.Key{Domain: "d"}, Tag: "d.user", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}}, 5, 1)
	m.ObserveUngranted(&rate.Op{Key: rate.Key{Domain: "d"}, Tag: "d.user", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}}, 2)
	m.ObserveShort(&rate.Op{Key: rate.Key{Domain: "d"}, Tag: "d.user", Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow}})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	types := map[string]string{}
	for line := range strings.Lines(string(body)) {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && !strings.HasPrefix(f[2], "go_") && !strings.HasPrefix(f[2], "process_") && !strings.HasPrefix(f[2], "promhttp_") {
			types[f[2]] = f[3]
		}
	}
	return types
}

// TestEveryMetricIsANameConstant: every metric that Metrics exports is named
// by a constant of the package, and every such constant names a metric it
// exports.
func TestEveryMetricIsANameConstant(t *testing.T) {
	consts, types := nameConstants(t), exported(t)
	for name := range types {
		assert.Contains(t, consts, name, "%s is exported but is no constant of names.go", name)
	}
	for name, id := range consts {
		assert.Contains(t, types, name, "%s (%s) names no metric that is exported", id, name)
	}
}

// TestOnlyMetricsRegistersMetrics reads the imports of every Go file of the
// repository but tests: none outside internal/metrics imports the
// Prometheus client, so no package registers a metric of its own.
func TestOnlyMetricsRegistersMetrics(t *testing.T) {
	fset := token.NewFileSet()
	read := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") || rel == "internal/metrics" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		read++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			assert.False(t, strings.HasPrefix(p, "github.com/prometheus/client_golang/"),
				"%s imports %s: metrics are registered through internal/metrics", rel, p)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, read, 50, "the walk read the repository's files")
}

// metricMention finds a metric's name in prose: ratewarden_… or
// ratelimit_service_…, with a "*" after it when it stands for all the names
// it starts. A name goes on with a letter: ratewarden_0.1.0_checksums.txt
// and ratewarden_${version}_… are a release's files.
var metricMention = regexp.MustCompile(`(?:ratewarden|ratelimit_service)_(?:[a-z][a-z0-9_]*\*?|\*)`)

// metricsDoc is the page that lists every metric, and metricsDocRatelimit
// the heading of its section on envoyproxy/ratelimit's names: ratewarden's
// own are above it.
const (
	metricsDoc          = "docs/metrics.md"
	metricsDocRatelimit = "## envoyproxy/ratelimit's names"
)

// metricsTableRow is a row of metricsDoc's tables of metrics: the name, then
// the type.
var metricsTableRow = regexp.MustCompile("^\\| `([a-z0-9_]+)` \\| ([a-z]+) \\|")

// userDocs returns the Markdown files a reader meets: README.md,
// BENCHMARKS.md, CONTRIBUTING.md and every file under docs/ and
// benchmarks/.
func userDocs(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md", "BENCHMARKS.md", "CONTRIBUTING.md"}
	for _, dir := range []string{"docs", "benchmarks"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
				rel, err := filepath.Rel(root, path)
				docs = append(docs, filepath.ToSlash(rel))
				return err
			}
			return err
		})
		require.NoError(t, err)
	}
	return docs
}

// TestDocsNameOnlyMetricsThatExist reads every user doc: each metric name it
// mentions is a constant of names.go, or the _bucket, _count or _sum series
// of a histogram's, and each prefix it mentions (ratewarden_rule_*) starts
// one.
func TestDocsNameOnlyMetricsThatExist(t *testing.T) {
	consts, types := nameConstants(t), exported(t)
	docs := userDocs(t)
	require.Contains(t, docs, metricsDoc)
	mentions := 0
	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range metricMention.FindAllString(line, -1) {
				mentions++
				if prefix, ok := strings.CutSuffix(m, "*"); ok {
					assert.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(consts)), func(n string) bool { return strings.HasPrefix(n, prefix) }),
						"%s:%d: %s is the start of no metric's name", doc, i+1, m)
					continue
				}
				assert.True(t, isSeriesOf(m, consts, types), "%s:%d: %s is no metric of internal/metrics", doc, i+1, m)
			}
		}
	}
	assert.Greater(t, mentions, len(consts), "the docs were read")
}

// isSeriesOf says whether name is a metric of consts, or a series of one of
// its histograms.
func isSeriesOf(name string, consts, types map[string]string) bool {
	if _, ok := consts[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == "histogram" {
			return true
		}
	}
	return false
}

// TestMetricsDocumentsEveryMetric reads the tables of metricsDoc: each
// metric of names.go has one row, ratewarden's own names above
// metricsDocRatelimit and envoyproxy/ratelimit's under it, with the type
// the metric is exported as, and every row is such a metric's.
func TestMetricsDocumentsEveryMetric(t *testing.T) {
	consts, types := nameConstants(t), exported(t)
	text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(metricsDoc)))
	require.NoError(t, err)

	rows := map[string]string{}     // name → type, as documented
	sections := map[string]string{} // name → the set of names its table is in
	set, sawRatelimit := "ratewarden", false
	for line := range strings.Lines(string(text)) {
		line = strings.TrimRight(line, "\n")
		if line == metricsDocRatelimit {
			set, sawRatelimit = "ratelimit", true
			continue
		}
		m := metricsTableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		assert.NotContains(t, rows, m[1], "%s has two rows", m[1])
		rows[m[1]], sections[m[1]] = m[2], set
	}
	require.True(t, sawRatelimit, "%s has the heading %q", metricsDoc, metricsDocRatelimit)

	for name, id := range consts {
		want := "ratewarden"
		if strings.HasPrefix(name, metrics.RatelimitPrefix) {
			want = "ratelimit"
		}
		if !assert.Contains(t, rows, name, "%s (%s) has no row in %s", id, name, metricsDoc) {
			continue
		}
		assert.Equal(t, want, sections[name], "%s is documented under the other set of names", name)
		assert.Equal(t, types[name], rows[name], "%s's type in %s", name, metricsDoc)
	}
	for name := range rows {
		assert.Contains(t, consts, name, "%s documents %s, which is no metric", metricsDoc, name)
	}
}
