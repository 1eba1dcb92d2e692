package config

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
)

// envoyFile reads one of envoyproxy/ratelimit's files under
// testdata/envoyproxy.
func envoyFile(t testing.TB, name string) File {
	t.Helper()
	path := filepath.Join("testdata", "envoyproxy", name)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return File{Name: path, Data: data}
}

// matchCase is a request descriptor and what it must match.
type matchCase struct {
	request []rate.Entry
	// path is the matched rule's Path; "" means no match.
	path string
	// key is Match.Key's entries; nil means the request's.
	key []rate.Entry
	// metric is Match.MetricKey; "" means the rule's Path.
	metric string
	// rpu is the first limit's requests_per_unit, when not 0.
	rpu uint64
}

func checkMatches(t *testing.T, c *Config, domain string, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		var pairs []string
		for _, e := range tc.request {
			pairs = append(pairs, e.Key+"="+e.Value)
		}
		t.Run(strings.Join(pairs, ","), func(t *testing.T) {
			m, ok := c.Match(domain, tc.request)
			if tc.path == "" {
				assert.False(t, ok, "matched %+v", m.Rule)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.path, m.Rule.Path)
			wantKey := tc.key
			if wantKey == nil {
				wantKey = tc.request
			}
			assert.Equal(t, rate.Key{Domain: domain, Entries: wantKey}, m.Key)
			wantMetric := tc.metric
			if wantMetric == "" {
				wantMetric = tc.path
			}
			assert.Equal(t, wantMetric, m.MetricKey)
			if tc.rpu != 0 {
				assert.Equal(t, tc.rpu, m.Rule.Limits[0].Limit.Requests)
			}
		})
	}
}

// TestMatchWildcardsAnywhere loads envoyproxy/ratelimit's wildcard test file
// and asks what its tests ask: a '*' anywhere in a value, several of them,
// each matching any run of bytes, the empty one too.
func TestMatchWildcardsAnywhere(t *testing.T) {
	c, err := Parse([]File{envoyFile(t, "wildcard.yaml")}, testOptions())
	require.NoError(t, err)
	checkMatches(t, c, "test-domain", []matchCase{
		{request: entries("noVal=foo1"), path: "test-domain.noVal"},
		{request: entries("wild=foo1"), path: "test-domain.wild_foo*"},
		{request: entries("wild=foo"), path: "test-domain.wild_foo*"},
		{request: entries("nestedWild=val1", "wild=goo2"), path: "test-domain.nestedWild_val1.wild_goo*"},
		{request: entries("wild=bar")},
		{request: entries("noWild=foo1")},
		{request: entries("midWild=barab"), path: "test-domain.midWild_bar*b"},
		{request: entries("midWild=bar123b"), path: "test-domain.midWild_bar*b"},
		{request: entries("midWild=barb"), path: "test-domain.midWild_bar*b"},
		{request: entries("midWild=bara")},
		{request: entries("midWild=xbarb")},
		{request: entries("midWild=bar")},
		{request: entries("multiWild=foo123bar456baz"), path: "test-domain.multiWild_foo*bar*baz", rpu: 10},
		{request: entries("multiWild=foobarbaz"), path: "test-domain.multiWild_foo*bar*baz"},
		{request: entries("multiWild=foo123baz")},
		{request: entries("multiWild=bar456baz")},
		{request: entries("multiWild=foobazbar")},
	})
}

// TestWildcardMatchesLikeAGlob compares the matching of patterns with '*'
// against regular expressions in which each '*' is ".*".
func TestWildcardMatchesLikeAGlob(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		pattern := word("ab*", 7)
		if !strings.Contains(pattern, "*") {
			pattern += "*"
		}
		n := &node{value: pattern}
		n.setPattern()
		parts := strings.Split(pattern, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`^(?s)` + strings.Join(parts, ".*") + `$`)
		for range 8 {
			v := word("ab", 8)
			if n.matches(v) != re.MatchString(v) {
				t.Fatalf("pattern %q, value %q: matches says %v", pattern, v, n.matches(v))
			}
		}
	}
}

const precedenceConfig = `
domain: d
descriptors:
  - key: ip
    value: "10.*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: ip
    value: "10.1.*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: ip
    value: "*.5"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: ip
    value: "10.1.2.5"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 5}
`

// TestMatchWildcardPrecedence: where several wildcards of one key match, the
// first in the file wins, as in envoyproxy/ratelimit, or, when asked, the one
// with the most literal bytes. An exact value beats every wildcard, and any
// wildcard beats the key alone.
func TestMatchWildcardPrecedence(t *testing.T) {
	first := mustParse(t, precedenceConfig, testOptions())
	checkMatches(t, first, "d", []matchCase{
		{request: entries("ip=10.1.2.3"), path: "d.ip_10.*"},
		{request: entries("ip=10.1.9.5"), path: "d.ip_10.*"},
		{request: entries("ip=192.0.2.5"), path: "d.ip_*.5"},
		{request: entries("ip=10.1.2.5"), path: "d.ip_10.1.2.5"},
		{request: entries("ip=192.0.2.1"), path: "d.ip"},
	})
	specific := mustParse(t, precedenceConfig, Options{DefaultAlgorithm: testAlgorithm, WildcardPrecedence: MostSpecificWildcard})
	checkMatches(t, specific, "d", []matchCase{
		{request: entries("ip=10.1.2.3"), path: "d.ip_10.1.*"},
		{request: entries("ip=10.1.9.5"), path: "d.ip_10.1.*"},
		{request: entries("ip=10.2.9.5"), path: "d.ip_10.*"}, // "10." and ".5": three bytes each, the first wins
		{request: entries("ip=192.0.2.5"), path: "d.ip_*.5"},
		{request: entries("ip=10.1.2.5"), path: "d.ip_10.1.2.5"},
		{request: entries("ip=192.0.2.1"), path: "d.ip"},
	})

	_, err := Parse(nil, Options{DefaultAlgorithm: testAlgorithm, WildcardPrecedence: MostSpecificWildcard + 1})
	assert.Error(t, err)
	for _, w := range []WildcardPrecedence{FirstWildcard, MostSpecificWildcard} {
		got, err := ParseWildcardPrecedence(w.String())
		require.NoError(t, err)
		assert.Equal(t, w, got)
	}
	_, err = ParseWildcardPrecedence("longest")
	assert.ErrorContains(t, err, `"longest"`)
}

// TestMatchShareThreshold loads envoyproxy/ratelimit's share_threshold test
// file and checks each of its cases: which value every matching request is
// counted as, and the metric key.
func TestMatchShareThreshold(t *testing.T) {
	c, err := Parse([]File{envoyFile(t, "share_threshold.yaml")}, testOptions())
	require.NoError(t, err)
	var cases []matchCase
	for _, v := range []string{"files/a.pdf", "files/b.csv", "files/c.txt"} {
		cases = append(cases, matchCase{request: entries("files=" + v), path: "test-domain.files_files/*", key: entries("files=files/*"), rpu: 100})
	}
	cases = append(cases,
		// share_threshold wins over value_to_metric and detailed_metric.
		matchCase{request: entries("route=api/v1", "method=GET"), path: "test-domain.route_api/*.method",
			key: entries("route=api/*", "method=GET")},
		matchCase{request: entries("service=svc/user", "endpoint=get"), path: "test-domain.service_svc/*.endpoint",
			key: entries("service=svc/*", "endpoint=get"), metric: "test-domain.service_svc/*.endpoint_get"},
		// Nested.
		matchCase{request: entries("nested=parent", "files=nested/file1.txt"), path: "test-domain.nested_parent.files_nested/*",
			key: entries("nested=parent", "files=nested/*"), rpu: 200},
		matchCase{request: entries("files=top/file1.txt", "files=nested/file1.txt"), path: "test-domain.files_top/*.files_nested/*",
			key: entries("files=top/*", "files=nested/*"), rpu: 300},
		matchCase{request: entries("path=path/foo", "file=file/doc1", "type=pdf"), path: "test-domain.path_path/*.file_file/*.type",
			key: entries("path=path/*", "file=file/doc1", "type=pdf"), rpu: 120},
		matchCase{request: entries("user=user/alice", "resource=res/file1", "action=read"), path: "test-domain.user_user/*.resource_res/*.action",
			key: entries("user=user/*", "resource=res/*", "action=read"), rpu: 150},
		// An exact value is counted on its own.
		matchCase{request: entries("file=test1"), path: "test-domain.file_test1", rpu: 50},
	)
	for _, v := range []string{"test2", "test23", "test123"} {
		cases = append(cases, matchCase{request: entries("file=" + v), path: "test-domain.file_test*", key: entries("file=test*"), rpu: 100})
	}
	for _, v := range []string{"/api/v1", "/api-beta-v1", "/apiXYZv1"} {
		cases = append(cases, matchCase{request: entries("midpath=" + v), path: "test-domain.midpath_/api*v1", key: entries("midpath=/api*v1")})
	}
	cases = append(cases, matchCase{request: entries("midpath=/api/v2")})
	for _, v := range []string{"svcAepBrpc", "svcXXXepYYYrpc", "svceprpc"} {
		cases = append(cases, matchCase{request: entries("multiroute=" + v), path: "test-domain.multiroute_svc*ep*rpc", key: entries("multiroute=svc*ep*rpc"), rpu: 50})
	}
	cases = append(cases,
		matchCase{request: entries("multiroute=svcABCrpc")},
		matchCase{request: entries("midroute=/api/v2"), path: "test-domain.midroute_/api*v2", key: entries("midroute=/api*v2")},
		matchCase{request: entries("midroute=/api-beta-v2"), path: "test-domain.midroute_/api*v2", key: entries("midroute=/api*v2")},
		matchCase{request: entries("tenant=t1prod", "resource=resAv2"), path: "test-domain.tenant_t*prod.resource_res*v2",
			key: entries("tenant=t*prod", "resource=res*v2")},
		matchCase{request: entries("tenant=t99prod", "resource=resBBBv2"), path: "test-domain.tenant_t*prod.resource_res*v2",
			key: entries("tenant=t*prod", "resource=res*v2")},
	)
	checkMatches(t, c, "test-domain", cases)
}

// TestMatchMetricKeys checks the metric keys of envoyproxy/ratelimit's tests
// of detailed_metric and value_to_metric: detailed_metric is the matched
// rule's alone and shows every level's value; value_to_metric shows the
// value of its own level.
func TestMatchMetricKeys(t *testing.T) {
	c := mustParse(t, `
domain: nested
descriptors:
  - key: key-1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        rate_limit: {unit: minute, requests_per_unit: 5}
      - key: key-3
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
          - key: detailed_id
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: "read*"
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: wild
    value: "foo*bar*"
    descriptors:
      - key: other
        value_to_metric: true
        descriptors:
          - key: limit
            rate_limit: {unit: minute, requests_per_unit: 20}
      - key: deep
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 20}
  - key: vtm
    value: "foo*bar*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 20}
`, testOptions())
	checkMatches(t, c, "nested", []matchCase{
		{request: entries("key-1=value-1"), path: "nested.key-1", metric: "nested.key-1_value-1"},
		// A parent's detailed_metric does not reach its children's rules.
		{request: entries("key-1=value-1", "key-2=value-2"), path: "nested.key-1.key-2"},
		{request: entries("key-1=value-1", "key-3=value-3"), path: "nested.key-1.key-3", metric: "nested.key-1_value-1.key-3_value-3"},
		{request: entries("route=draw", "http_method=PUT", "subject_id=123"), path: "nested.route.http_method.subject_id",
			metric: "nested.route_draw.http_method_PUT.subject_id"},
		{request: entries("route=draw", "http_method=PUT", "detailed_id=123"), path: "nested.route.http_method.detailed_id",
			metric: "nested.route_draw.http_method_PUT.detailed_id_123"},
		{request: entries("route=api", "http_method=GET", "subject_id=user123"), path: "nested.route.http_method_GET.subject_id",
			metric: "nested.route_api.http_method_GET.subject_id"},
		{request: entries("route=", "http_method=PUT", "subject_id=123"), path: "nested.route.http_method.subject_id",
			metric: "nested.route.http_method_PUT.subject_id"},
		{request: entries("route=", "http_method=", "subject_id=123"), path: "nested.route.http_method.subject_id"},
		{request: entries("k1=X", "k2=Y", "k3=Z"), path: "nested.k1.k2.k3", metric: "nested.k1.k2_Y.k3"},
		{request: entries("user=alice", "action=readfile", "resource=documents"), path: "nested.user.action_read*.resource",
			metric: "nested.user_alice.action_readfile.resource"},
		{request: entries("wild=foo1bar2", "other=bar", "limit=X"), path: "nested.wild_foo*bar*.other.limit",
			metric: "nested.wild_foo*bar*.other_bar.limit"},
		// detailed_metric shows a wildcard level's value too.
		{request: entries("wild=foo1bar2", "deep=x"), path: "nested.wild_foo*bar*.deep", metric: "nested.wild_foo1bar2.deep_x"},
		{request: entries("vtm=foo123bar456"), path: "nested.vtm_foo*bar*", metric: "nested.vtm_foo123bar456"},
	})
}

func TestShareThresholdNeedsAWildcard(t *testing.T) {
	e := parseError(t, []File{{Name: "s.yaml", Data: yml(`
domain: d
descriptors:
  - key: k
    value: exact
    share_threshold: true
`)}})
	assert.Equal(t, &Error{File: "s.yaml", Line: 5, Column: 22, Field: "descriptors[0].share_threshold",
		Msg: `share_threshold can only be used with wildcard values (containing '*'), but found "k_exact"`}, e)

	// false is fine anywhere, and a '*' in the key counts, as there.
	mustParse(t, `
domain: d
descriptors:
  - {key: k, share_threshold: false, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: "k*", share_threshold: true, rate_limit: {unit: second, requests_per_unit: 1}}
`, testOptions())
}

// TestMatchAllocations: matching allocates nothing unless the Key or the
// metric key must differ from the request's entries and the rule's Path.
func TestMatchAllocations(t *testing.T) {
	c, err := Parse([]File{envoyFile(t, "wildcard.yaml"), envoyFile(t, "share_threshold.yaml")}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	require.NoError(t, err)
	for _, tc := range []struct {
		request []rate.Entry
		allocs  float64
	}{
		{entries("noWild=foo"), 0},
		{entries("noVal=x"), 0},
		{entries("wild=foo1"), 0},
		{entries("midWild=bar123b"), 0},
		{entries("multiWild=foo123bar456baz"), 0},
		{entries("nestedWild=val1", "wild=goo2"), 0},
		{entries("multiWild=nothing"), 0},
		{entries("multiroute=svcAepBrpc"), 1},                       // the shared Key
		{entries("route=api/v1", "method=GET"), 1},                  // the shared Key
		{entries("service=svc/user", "endpoint=get"), 2},            // and the detailed metric key
		{entries("tenant=t1prod", "resource=resAv2"), 1},            // the shared Key
		{entries("path=path/foo", "file=file/doc1", "type=pdf"), 1}, // the shared Key
	} {
		got := testing.AllocsPerRun(100, func() { c.Match("test-domain", tc.request) })
		assert.Equal(t, tc.allocs, got, "%v", tc.request)
	}
}
