package test

// envoyproxy/ratelimit's configuration tests (test/config/config_test.go in
// that project) against the server binary: every file of test/config and
// examples/ratelimit/config that they load, loads here with the same
// meaning, which requests find out (the limit, the stats key, whether two
// values share a count); every file that they refuse, stops the server
// here, naming the file and the fault.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/metrics"
)

// rlConfigDir returns a RUNTIME_ROOT whose ratelimit/config directory holds
// copies of their files: each name is a path under
// testdata/envoyproxy/test/config (or, starting with examples/, under
// testdata/envoyproxy), copied to its base name or, for name=copy, to copy.
func rlConfigDir(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ratelimit", "config")
	for _, name := range names {
		from, to, ok := strings.Cut(name, "=")
		if !ok {
			to = filepath.Base(from)
		}
		src := filepath.Join("testdata", "envoyproxy", "test", "config", from)
		if strings.HasPrefix(from, "examples/") {
			src = filepath.Join("testdata", "envoyproxy", from)
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, to)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, to), data, 0o644))
	}
	return root
}

// rlConfigEnv is their environment for limits under root, with the
// in-memory backend: what is under test is how the files read, and
// without REDIS_URL ratewarden counts in memory.
func rlConfigEnv(root string) map[string]string {
	return map[string]string{
		"USE_STATSD":           "false",
		"RUNTIME_ROOT":         root,
		"RUNTIME_SUBDIRECTORY": "ratelimit",
		"USE_PROMETHEUS":       "true",
		"PROMETHEUS_ADDR":      "127.0.0.1:0",
	}
}

// TestRLConfigFilesThatFail: each file (or set of files) that their
// config tests refuse, with the message they expect, stops the server at
// start with the file's name and ratewarden's message for the same fault.
func TestRLConfigFilesThatFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files  []string
		env    []string
		theirs string   // their message, after the file's name
		ours   []string // what ratewarden's message says, after the file's name
	}{
		{files: []string{"empty_domain.yaml"}, theirs: "config file cannot have empty domain",
			ours: []string{"empty_domain.yaml:1:1: domain: config file cannot have empty domain"}},
		{files: []string{"basic_config.yaml", "duplicate_domain.yaml"}, theirs: "duplicate domain 'test-domain' in config file",
			ours: []string{"duplicate_domain.yaml", "basic_config.yaml", `"test-domain"`}},
		{files: []string{"empty_key.yaml"}, theirs: "descriptor has empty key",
			ours: []string{"empty_key.yaml:3:5: descriptors[0].key: descriptor has empty key"}},
		{files: []string{"duplicate_key.yaml"}, theirs: "duplicate descriptor composite key 'test-domain.key1_value1'",
			ours: []string{`duplicate_key.yaml:6:5: descriptors[1]: duplicate descriptor "test-domain.key1_value1"`}},
		{files: []string{"merge_domain_key1.yaml", "merge_domain_key1.yaml=again/merge_domain_key1.yaml"}, env: rlMergeDomains,
			theirs: "duplicate descriptor composite key 'test-domain.key1_value1'",
			ours:   []string{"merge_domain_key1.yaml", `duplicate descriptor "test-domain.key1_value1"`}},
		{files: []string{"bad_limit_unit.yaml"}, theirs: "invalid rate limit unit 'foo'",
			ours: []string{`bad_limit_unit.yaml:6:13: descriptors[0].rate_limit.unit: invalid rate limit unit "foo"`}},
		{files: []string{"replaces_self.yaml"}, theirs: "replaces should not contain name of same descriptor",
			ours: []string{"replaces_self.yaml:10:21: descriptors[0].descriptors[0].rate_limit.replaces[0].name: replaces should not contain name of same descriptor"}},
		{files: []string{"replaces_empty.yaml"}, theirs: "should not have an empty replaces entry",
			ours: []string{"replaces_empty.yaml:10:20: descriptors[0].descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry"}},
		{files: []string{"bad_yaml.yaml"}, theirs: "error loading config file: yaml: line 2: found unexpected end of stream",
			ours: []string{"bad_yaml.yaml:2: invalid YAML: found unexpected end of stream"}},
		{files: []string{"misspelled_key.yaml"}, theirs: "config error, unknown key 'ratelimit'",
			ours: []string{"misspelled_key.yaml:5:5: descriptors[0].ratelimit: unknown field"}},
		{files: []string{"misspelled_key2.yaml"}, theirs: "config error, unknown key 'requestsperunit'",
			ours: []string{"misspelled_key2.yaml:7:7: descriptors[0].rate_limit.requestsperunit: unknown field"}},
		{files: []string{"non_string_key.yaml"}, theirs: "config error, key is not of type string: 0.25",
			ours: []string{"non_string_key.yaml:1:1: 0.25: unknown field"}},
		{files: []string{"non_map_list.yaml"}, theirs: "config error, yaml file contains list of type other than map: a",
			ours: []string{`non_map_list.yaml:3:5: descriptors[0]: want a mapping, got "a"`}},
		{files: []string{"unlimited_with_unit.yaml"}, theirs: "should not specify rate limit unit when unlimited",
			ours: []string{"unlimited_with_unit.yaml:6:13: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited"}},
	} {
		t.Run(strings.Join(tc.files, "+"), func(t *testing.T) {
			t.Parallel()
			p, exited := runUntilExit(t, with(rlConfigEnv(rlConfigDir(t, tc.files...)), tc.env...), 20*time.Second, 0)
			require.True(t, exited && p.ExitCode() != 0, "the server refuses the files (theirs: %s); it said:\n%s", tc.theirs, p.Output())
			for _, want := range tc.ours {
				assert.Contains(t, p.Output(), want, "theirs: %s", tc.theirs)
			}
		})
	}
}

// rlMergeDomains is their MERGE_DOMAIN_CONFIG=true.
var rlMergeDomains = []string{"MERGE_DOMAIN_CONFIG", "true"}

// rlProbe is one of their GetLimit checks as a request of hits (1 unless
// set) for one descriptor, and what the answer says of the rule it
// matched.
type rlProbe struct {
	domain   string // test-domain unless set
	entries  [][2]string
	override *ratelimitv3.RateLimitDescriptor_RateLimitOverride
	hits     uint64

	// limit is the rule's limit, nil for no rule. With unlimited, the rule
	// is unlimited.
	limit     *rlsv3.RateLimitResponse_RateLimit
	unlimited bool
	// code (OK unless set) and remaining are the status's; remaining shows
	// which probes share a count.
	code      rlsv3.RateLimitResponse_Code
	remaining uint32
	// stats is their Stats.Key of the rule, which ratewarden's per-rule
	// metrics carry in their descriptor label; empty for none.
	stats string
}

// limit is a RateLimit of their units, named or not.
func limit(rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, name ...string) *rlsv3.RateLimitResponse_RateLimit {
	l := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit}
	if len(name) > 0 {
		l.Name = name[0]
	}
	return l
}

// entries is a descriptor's entries as key, value pairs.
func entries(kv ...string) [][2]string {
	var out [][2]string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, [2]string{kv[i], kv[i+1]})
	}
	return out
}

// runProbes starts the server with the files and env and sends the
// probes, in order, each in a request of its own, then checks each rule's
// hits against its stats key.
func runProbes(t *testing.T, env map[string]string, probes []rlProbe) rlServer {
	t.Helper()
	s := startRLServer(t, env)
	hits := make(map[string]float64)
	for i, p := range probes {
		domain := p.domain
		if domain == "" {
			domain = "test-domain"
		}
		n := p.hits
		if n == 0 {
			n = 1
		}
		desc := &ratelimitv3.RateLimitDescriptor{Limit: p.override}
		for _, e := range p.entries {
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		req := &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc}, HitsAddend: uint32(n)}
		c := s.call(t, req)
		require.Len(t, c.resp.GetStatuses(), 1)
		st := c.resp.GetStatuses()[0]
		what := fmt.Sprintf("probe %d: %s %v", i, domain, p.entries)
		switch {
		case p.unlimited:
			assert.Equal(t, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlOK, LimitRemaining: 1<<32 - 1}, st, "%s: unlimited", what)
		case p.limit == nil:
			assert.Equal(t, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlOK}, st, "%s: no rule", what)
		default:
			assert.Equal(t, p.limit.String(), st.GetCurrentLimit().String(), "%s: the rule's limit", what)
			code := p.code
			if code == rlsv3.RateLimitResponse_UNKNOWN {
				code = rlOK
			}
			assert.Equal(t, code, st.GetCode(), "%s", what)
			assert.Equal(t, p.remaining, st.GetLimitRemaining(), "%s: remaining", what)
		}
		if p.stats != "" {
			hits[p.stats] += float64(n)
		}
	}
	m := s.rlMetrics(t)
	for stats, want := range hits {
		var got float64
		for series, v := range m {
			if strings.HasPrefix(series, metrics.RuleHits+"{") && strings.Contains(series, `descriptor="`+stats+`"`) {
				got += v
			}
		}
		assert.Equal(t, want, got, "the hits of the rule whose stats key is %s", stats)
	}
	return s
}

// TestRLConfigFilesThatLoad: each file that their config tests load, with
// each of their checks of it as a request.
func TestRLConfigFilesThatLoad(t *testing.T) {
	t.Parallel()
	t.Run("basic_config.yaml", func(t *testing.T) {
		t.Parallel()
		s := runProbes(t, rlConfigEnv(rlConfigDir(t, "basic_config.yaml")), []rlProbe{
			{domain: "foo_domain", entries: entries("key1", "value1")},
			{entries: entries("key1", "something")},
			{entries: entries("key1", "value1")},
			{entries: entries("key2", "value2", "subkey", "subvalue")},
			{entries: entries("key5", "value5", "subkey5", "subvalue")},
			{entries: entries("key1", "value1", "subkey1", "something"), limit: limit(5, rlSecond), remaining: 4, stats: "test-domain.key1_value1.subkey1"},
			{entries: entries("key1", "value1", "subkey1", "subvalue1"), limit: limit(10, rlSecond), remaining: 9, stats: "test-domain.key1_value1.subkey1_subvalue1"},
			{entries: entries("key2", "something"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.key2"},
			{entries: entries("key2", "value2"), limit: limit(30, rlMinute), remaining: 29, stats: "test-domain.key2_value2"},
			{entries: entries("key2", "value3")},
			{entries: entries("key3", "foo"), limit: limit(1, rlHour), remaining: 0, stats: "test-domain.key3"},
			{entries: entries("key4", "foo"), limit: limit(1, rlDay, "key4_rate_limit"), remaining: 0, stats: "test-domain.key4"},
			{entries: entries("key6", "foo"), unlimited: true},
			{entries: entries("key7", "unspecified_value"), limit: limit(70, rlMinute), remaining: 69, stats: "test-domain.key7_unspecified_value"},
			{entries: entries("key7", "another_value"), limit: limit(70, rlMinute), remaining: 69, stats: "test-domain.key7_another_value"},
		})
		// They also look up a descriptor with no entries, which matches
		// no rule. Envoy never sends one; ratewarden refuses it.
		for _, domain := range []string{"foo_domain", "test-domain"} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := s.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}})
			cancel()
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", domain, err)
			assert.ErrorContains(t, err, "descriptors[0] has no entries")
		}
	})
	t.Run("basic_config.yaml/overrides", func(t *testing.T) { // their TestConfigLimitOverride
		t.Parallel()
		override := func(rpu uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor_RateLimitOverride {
			return &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
		}
		runProbes(t, rlConfigEnv(rlConfigDir(t, "basic_config.yaml")), []rlProbe{
			{domain: "foo_domain", entries: entries("key1", "value1"), override: override(10, typev3.RateLimitUnit_DAY)},
			{entries: entries("key1", "value1", "subkey1", "something"), override: override(10, typev3.RateLimitUnit_DAY),
				limit: limit(10, rlDay), remaining: 9, stats: rlDiffersOverrideStats("test-domain.key1_value1.subkey1_something")},
			{entries: entries("key1", "value1", "subkey1", "something"), override: override(42, typev3.RateLimitUnit_HOUR),
				limit: limit(42, rlHour), remaining: 41, stats: rlDiffersOverrideStats("test-domain.key1_value1.subkey1_something")},
			{entries: entries("key1", "value1", "subkey1", "something_else"), override: override(42, typev3.RateLimitUnit_HOUR),
				limit: limit(42, rlHour), remaining: 41, stats: rlDiffersOverrideStats("test-domain.key1_value1.subkey1_something_else")},
		})
	})
	t.Run("shadowmode_config.yaml", func(t *testing.T) {
		t.Parallel()
		// Over each limit at once: a rule in shadow mode answers OK.
		s := runProbes(t, rlConfigEnv(rlConfigDir(t, "shadowmode_config.yaml")), []rlProbe{
			{entries: entries("key1", "value1", "subkey1", "something"), hits: 6, limit: limit(5, rlSecond), code: rlOver, remaining: 5, stats: "test-domain.key1_value1.subkey1"},
			{entries: entries("key1", "value1", "subkey1", "subvalue1"), hits: 11, limit: limit(10, rlSecond), code: rlOK, remaining: 10, stats: "test-domain.key1_value1.subkey1_subvalue1"},
			{entries: entries("key2", "something"), hits: 21, limit: limit(20, rlMinute), code: rlOK, remaining: 20, stats: "test-domain.key2"},
			{entries: entries("key2", "value2"), hits: 31, limit: limit(30, rlMinute), code: rlOver, remaining: 30, stats: "test-domain.key2_value2"},
		})
		m := s.rlMetrics(t)
		assert.Zero(t, m.of(metrics.RatelimitShadowMode, `domain="test-domain",key1="key1_value1",key2="subkey1"`))
		assert.Positive(t, m.of(metrics.RatelimitShadowMode, `domain="test-domain",key1="key1_value1",key2="subkey1_subvalue1"`))
		assert.Positive(t, m.of(metrics.RatelimitShadowMode, `domain="test-domain",key1="key2"`))
		assert.Zero(t, m.of(metrics.RatelimitShadowMode, `domain="test-domain",key1="key2_value2"`))
	})
	t.Run("wildcard.yaml", func(t *testing.T) {
		t.Parallel()
		// A wildcard (or a key without a value) matches many values; each
		// value counts apart, under the stats key of the pattern.
		runProbes(t, rlConfigEnv(rlConfigDir(t, "wildcard.yaml")), []rlProbe{
			{entries: entries("noVal", "foo1"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.noVal"},
			{entries: entries("noVal", "foo2"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.noVal"},
			{entries: entries("wild", "foo1"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.wild_foo*"},
			{entries: entries("wild", "foo2"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.wild_foo*"},
			{entries: entries("nestedWild", "val1", "wild", "goo2"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.nestedWild_val1.wild_goo*"},
			{entries: entries("wild", "bar")},
			{entries: entries("noWild", "foo1")},
			{entries: entries("midWild", "barab"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.midWild_bar*b"},
			{entries: entries("midWild", "bar123b"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.midWild_bar*b"},
			{entries: entries("midWild", "barb"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.midWild_bar*b"},
			{entries: entries("midWild", "bara")},
			{entries: entries("midWild", "xbarb")},
			{entries: entries("multiWild", "foo123bar456baz"), limit: limit(10, rlMinute), remaining: 9, stats: "test-domain.multiWild_foo*bar*baz"},
			{entries: entries("multiWild", "foobarbaz"), limit: limit(10, rlMinute), remaining: 9, stats: "test-domain.multiWild_foo*bar*baz"},
			{entries: entries("multiWild", "foo123baz")},
			{entries: entries("multiWild", "bar456baz")},
		})
	})
	t.Run("share_threshold.yaml", func(t *testing.T) {
		t.Parallel()
		// With share_threshold, the values a wildcard matches share one count.
		runProbes(t, rlConfigEnv(rlConfigDir(t, "share_threshold.yaml")), []rlProbe{
			{entries: entries("files", "files/a.pdf"), limit: limit(100, rlMinute), remaining: 99, stats: "test-domain.files_files/*"},
			{entries: entries("files", "files/b.csv"), limit: limit(100, rlMinute), remaining: 98, stats: "test-domain.files_files/*"},
			{entries: entries("files", "files/c.txt"), limit: limit(100, rlMinute), remaining: 97, stats: "test-domain.files_files/*"},
			{entries: entries("route", "api/v1", "method", "GET"), limit: limit(60, rlMinute), remaining: 59, stats: "test-domain.route_api/*.method"},
			{entries: entries("service", "svc/user", "endpoint", "get"), limit: limit(80, rlMinute), remaining: 79, stats: "test-domain.service_svc/*.endpoint_get"},
			{entries: entries("nested", "parent", "files", "nested/file1.txt"), limit: limit(200, rlMinute), remaining: 199, stats: "test-domain.nested_parent.files_nested/*"},
			{entries: entries("files", "top/file1.txt", "files", "nested/file1.txt"), limit: limit(300, rlMinute), remaining: 299, stats: "test-domain.files_top/*.files_nested/*"},
			{entries: entries("path", "path/foo", "file", "file/doc1", "type", "pdf"), limit: limit(120, rlMinute), remaining: 119, stats: "test-domain.path_path/*.file_file/*.type"},
			{entries: entries("user", "user/alice", "resource", "res/file1", "action", "read"), limit: limit(150, rlMinute), remaining: 149, stats: "test-domain.user_user/*.resource_res/*.action"},
			{entries: entries("file", "test1"), limit: limit(50, rlMinute), remaining: 49, stats: "test-domain.file_test1"},
			{entries: entries("file", "test2"), limit: limit(100, rlMinute), remaining: 99, stats: "test-domain.file_test*"},
			{entries: entries("file", "test23"), limit: limit(100, rlMinute), remaining: 98, stats: "test-domain.file_test*"},
			{entries: entries("file", "test123"), limit: limit(100, rlMinute), remaining: 97, stats: "test-domain.file_test*"},
			{entries: entries("midpath", "/api/v1"), limit: limit(100, rlMinute), remaining: 99, stats: "test-domain.midpath_/api*v1"},
			{entries: entries("midpath", "/api-beta-v1"), limit: limit(100, rlMinute), remaining: 98, stats: "test-domain.midpath_/api*v1"},
			{entries: entries("midpath", "/apiXYZv1"), limit: limit(100, rlMinute), remaining: 97, stats: "test-domain.midpath_/api*v1"},
			{entries: entries("midpath", "/api/v2")},
			{entries: entries("multiroute", "svcAepBrpc"), limit: limit(50, rlMinute), remaining: 49, stats: "test-domain.multiroute_svc*ep*rpc"},
			{entries: entries("multiroute", "svcXXXepYYYrpc"), limit: limit(50, rlMinute), remaining: 48, stats: "test-domain.multiroute_svc*ep*rpc"},
			{entries: entries("multiroute", "svceprpc"), limit: limit(50, rlMinute), remaining: 47, stats: "test-domain.multiroute_svc*ep*rpc"},
			{entries: entries("multiroute", "svcABCrpc")},
			{entries: entries("midroute", "/api/v2"), limit: limit(80, rlMinute), remaining: 79, stats: "test-domain.midroute_/api*v2"},
			{entries: entries("midroute", "/api-beta-v2"), limit: limit(80, rlMinute), remaining: 78, stats: "test-domain.midroute_/api*v2"},
			{entries: entries("tenant", "t1prod", "resource", "resAv2"), limit: limit(60, rlMinute), remaining: 59, stats: "test-domain.tenant_t*prod.resource_res*v2"},
			{entries: entries("tenant", "t99prod", "resource", "resBBBv2"), limit: limit(60, rlMinute), remaining: 58, stats: "test-domain.tenant_t*prod.resource_res*v2"},
		})
	})
	t.Run("metadata.yaml", func(t *testing.T) {
		t.Parallel()
		env := with(rlConfigEnv(rlConfigDir(t, "metadata.yaml")), rlResponseDynamicMetadata...)
		s := runProbes(t, env, []rlProbe{
			{entries: entries("key1", "value1", "subkey1", "something"), limit: limit(5, rlSecond), remaining: 4, stats: "test-domain.key1_value1.subkey1"},
			{entries: entries("key2", "something"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.key2"},
		})
		for _, tc := range []struct {
			entries [][2]string
			want    string
		}{
			{entries("key1", "value1", "subkey1", "something"), `{"name":"service_1"}`},
			{entries("key2", "something"), `{"service_with_quota":{"name":"service_2"}}`},
		} {
			c := s.call(t, rlRequest("test-domain", [][][2]string{tc.entries}, 1))
			got, err := c.resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().MarshalJSON()
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got), "the metadata of the rule of %v", tc.entries)
		}
	})
	t.Run("merge_domain_key1.yaml+merge_domain_key2.yaml", func(t *testing.T) { // their TestDomainMerge
		t.Parallel()
		env := with(rlConfigEnv(rlConfigDir(t, "merge_domain_key1.yaml", "merge_domain_key2.yaml")), rlMergeDomains...)
		runProbes(t, env, []rlProbe{
			{domain: "foo_domain", entries: entries("key1", "value1")},
			{entries: entries("key1", "value1"), limit: limit(10, rlMinute), remaining: 9, stats: "test-domain.key1_value1"},
			{entries: entries("key2", "value2"), limit: limit(20, rlMinute), remaining: 19, stats: "test-domain.key2_value2"},
		})
	})
	t.Run("examples/ratelimit/config", func(t *testing.T) {
		t.Parallel()
		runProbes(t, rlConfigEnv(rlConfigDir(t, "examples/ratelimit/config/config.yaml", "examples/ratelimit/config/example.yaml")), []rlProbe{
			{domain: "mongo_cps", entries: entries("database", "users"), limit: limit(500, rlSecond), remaining: 499, stats: "mongo_cps.database_users"},
			{domain: "mongo_cps", entries: entries("database", "default"), limit: limit(500, rlSecond), remaining: 499, stats: "mongo_cps.database_default"},
			{domain: "mongo_cps", entries: entries("database", "other")},
			{domain: "rl", entries: entries("category", "account"), limit: limit(4, rlMinute), remaining: 3, stats: "rl.category_account"},
			{domain: "rl", entries: entries("foo", "f", "bar", "banned"), limit: limit(0, rlMinute, "banned_limit"), code: rlOver, remaining: 0, stats: "rl.foo.bar_banned"},
			{domain: "rl", entries: entries("foo", "f", "bay", "b"), unlimited: true},
			{domain: "rl", entries: entries("unspec", "u"), limit: limit(2, rlMinute), remaining: 1, stats: "rl.unspec_u"},
			{domain: "rl", entries: entries("service", "service_2"), limit: limit(2, rlMinute), remaining: 1, stats: "rl.service_service_2"},
		})
	})
}

// rlDiffersOverrideStats is the stats key of a request's limit override,
// for theirs, named after every entry, key and value. ratewarden counts an
// override under the rule that the descriptor matched (with the window
// label "override"), so that a client cannot make a metric series per
// value: for these probes, test-domain.key1_value1.subkey1.
func rlDiffersOverrideStats(theirs string) string {
	rule, _, _ := strings.Cut(strings.TrimPrefix(theirs, "test-domain.key1_value1."), "_")
	return "test-domain.key1_value1." + rule
}

// rlResponseDynamicMetadata is their RESPONSE_DYNAMIC_METADATA=true.
var rlResponseDynamicMetadata = []string{"RESPONSE_DYNAMIC_METADATA", "true"}
