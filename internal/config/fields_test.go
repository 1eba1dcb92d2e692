package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// ruleAt returns the rule that the request descriptor matches.
func ruleAt(t *testing.T, c *Config, domain string, pairs ...string) *Rule {
	t.Helper()
	m, ok := c.Match(domain, entries(pairs...))
	require.True(t, ok, "%v matches nothing", pairs)
	return m.Rule
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

// TestEnvoyExampleLoads loads envoyproxy/ratelimit's example configuration,
// which uses quota_mode and metadata, and checks what its quota descriptors
// say.
func TestEnvoyExampleLoads(t *testing.T) {
	c, err := Parse([]File{envoyFile(t, "example.yaml")}, testOptions())
	require.NoError(t, err)
	for _, tc := range []struct {
		value string
		rpu   uint64
	}{{"service_1", 1}, {"service_2", 2}} {
		r := ruleAt(t, c, "rl", "service="+tc.value)
		assert.True(t, r.QuotaMode)
		assert.Equal(t, tc.rpu, r.Limits[0].Limit.Requests)
		sameStruct(t, map[string]any{"service_with_quota": map[string]any{"name": tc.value}}, r.Metadata)
	}
	assert.False(t, ruleAt(t, c, "rl", "foo=x").QuotaMode)
	assert.Nil(t, ruleAt(t, c, "rl", "foo=x").Metadata)
	assert.True(t, ruleAt(t, c, "rl", "foo=x", "baz=shady").ShadowMode)
}

// TestMetadataFile loads envoyproxy/ratelimit's metadata test file.
func TestMetadataFile(t *testing.T) {
	c, err := Parse([]File{envoyFile(t, "metadata.yaml")}, testOptions())
	require.NoError(t, err)
	r := ruleAt(t, c, "test-domain", "key1=value1", "subkey1=something")
	assert.Equal(t, uint64(5), r.Limits[0].Limit.Requests)
	sameStruct(t, map[string]any{"name": "service_1"}, r.Metadata)
	assert.Nil(t, ruleAt(t, c, "test-domain", "key1=value1", "subkey1=subvalue1").Metadata)
	r = ruleAt(t, c, "test-domain", "key2=something")
	sameStruct(t, map[string]any{"service_with_quota": map[string]any{"name": "service_2"}}, r.Metadata)
}

// sameStruct asserts that got holds what want holds.
func sameStruct(t *testing.T, want map[string]any, got *structpb.Struct) {
	t.Helper()
	assert.True(t, proto.Equal(mustStruct(t, want), got), "metadata %v", got)
}

func TestMetadataValues(t *testing.T) {
	c := mustParse(t, `
domain: d
descriptors:
  - key: base
    metadata: &shared {team: payments, tier: 1}
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata:
      <<: *shared
      tier: 2
      ratio: 0.25
      big: 12345678901
      hex: 0x10
      enabled: yes
      quoted: "yes"
      off: off
      none: ~
      empty: ""
      list: [a, 1, true, {x: y}]
      nested: {deeper: {deepest: [1, [2, 3]]}}
      200: "numeric key"
      when: 2026-01-01
  - key: empty
    metadata: {}
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: nothing
    metadata:
    rate_limit: {unit: second, requests_per_unit: 1}
`, testOptions())
	want := mustStruct(t, map[string]any{
		"team":    "payments",
		"tier":    2,
		"ratio":   0.25,
		"big":     12345678901,
		"hex":     16,
		"enabled": true,
		"quoted":  "yes",
		"off":     false,
		"none":    nil,
		"empty":   "",
		"list":    []any{"a", 1, true, map[string]any{"x": true}}, // a plain y is YAML 1.1's true
		"nested":  map[string]any{"deeper": map[string]any{"deepest": []any{1, []any{2, 3}}}},
		"200":     "numeric key",
		"when":    "2026-01-01",
	})
	got := ruleAt(t, c, "d", "k=v").Metadata
	require.NotNil(t, got)
	assert.Equal(t, want.AsMap(), got.AsMap())
	assert.Nil(t, ruleAt(t, c, "d", "empty=v").Metadata)
	assert.Nil(t, ruleAt(t, c, "d", "nothing=v").Metadata)
}

func TestMetadataErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       Error
	}{
		{"a scalar", `
domain: d
descriptors:
  - key: k
    metadata: name
`, Error{Line: 4, Column: 15, Field: "descriptors[0].metadata", Msg: `want a mapping, got "name"`}},
		{"a list", `
domain: d
descriptors:
  - key: k
    metadata: [a]
`, Error{Line: 4, Column: 15, Field: "descriptors[0].metadata", Msg: `want a mapping, got a list`}},
		{"a key given twice", `
domain: d
descriptors:
  - key: k
    metadata:
      a: 1
      b: {c: 1, c: 2}
`, Error{Line: 6, Column: 17, Field: "descriptors[0].metadata.b.c", Msg: `field given twice (first at line 6)`}},
		{"an infinite number", `
domain: d
descriptors:
  - key: k
    metadata:
      list: [1, .inf]
`, Error{Line: 5, Column: 17, Field: "descriptors[0].metadata.list[1]", Msg: `want a finite number, got ".inf"`}},
		{"a mapping as a key", `
domain: d
descriptors:
  - key: k
    metadata:
      ? {a: 1}
      : x
`, Error{Line: 5, Column: 9, Field: "descriptors[0].metadata", Msg: `want a field name, got a mapping`}},
		{"too deep", `
domain: d
descriptors:
  - key: k
    metadata: {a: ` + repeat("[", 70) + repeat("]", 70) + `}
`, Error{Line: 4, Column: 82, Field: "descriptors[0].metadata.a" + repeat("[0]", 63), Msg: `metadata nested more than 64 deep`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parseError(t, []File{{Name: "m.yaml", Data: yml(tc.yaml)}})
			tc.want.File = "m.yaml"
			assert.Equal(t, &tc.want, e)
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func TestQuotaMode(t *testing.T) {
	c := mustParse(t, `
domain: d
descriptors:
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: plain
    quota_mode: false
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: parent
    quota_mode: true
    descriptors:
      - key: child
        rate_limit: {unit: second, requests_per_unit: 1}
`, testOptions())
	assert.True(t, ruleAt(t, c, "d", "quota=x").QuotaMode)
	assert.False(t, ruleAt(t, c, "d", "plain=x").QuotaMode)
	// As in envoyproxy/ratelimit, quota_mode is the matched descriptor's own.
	assert.False(t, ruleAt(t, c, "d", "parent=x", "child=y").QuotaMode)

	e := parseError(t, []File{{Name: "q.yaml", Data: yml(`
domain: d
descriptors:
  - {key: k, quota_mode: maybe}
`)}})
	assert.Equal(t, &Error{File: "q.yaml", Line: 3, Column: 26, Field: "descriptors[0].quota_mode", Msg: `want true or false, got "maybe"`}, e)
}

func TestStringShowsQuotaModeAndMetadata(t *testing.T) {
	c, err := Parse([]File{{Name: "q.yaml", Data: yml(`
domain: q
descriptors:
  - key: service
    quota_mode: true
    shadow_mode: true
    metadata: {b: [1, true], a: {name: "x y"}}
    rate_limit: {unit: minute, requests_per_unit: 2}
`)}}, testOptions())
	require.NoError(t, err)
	assert.Equal(t, `domain "q" (q.yaml:1)
  q.service (q.yaml:3) shadow_mode quota_mode charge=window metadata={"a":{"name":"x y"},"b":[1,true]}
    - algorithm=fixed_window requests_per_unit=2 unit=minute unit_multiplier=1 burst=2 shards=1
`, c.String())
}

// TestMergeDomains loads envoyproxy/ratelimit's two files of one domain.
func TestMergeDomains(t *testing.T) {
	files := []File{envoyFile(t, "merge_domain_key1.yaml"), envoyFile(t, "merge_domain_key2.yaml")}

	e := parseError(t, files)
	assert.Equal(t, "domain", e.Field)
	assert.Equal(t, files[1].Name, e.File)
	assert.Contains(t, e.Msg, `duplicate domain "test-domain" (also in `+files[0].Name+`:2)`)

	c, err := Parse(files, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"test-domain"}, c.Domains())
	assert.Equal(t, []string{files[0].Name, files[1].Name}, c.Files())
	r := ruleAt(t, c, "test-domain", "key1=value1")
	assert.Equal(t, uint64(10), r.Limits[0].Limit.Requests)
	assert.Equal(t, files[0].Name, r.File)
	r = ruleAt(t, c, "test-domain", "key2=value2")
	assert.Equal(t, uint64(20), r.Limits[0].Limit.Requests)
	assert.Equal(t, files[1].Name, r.File)
	assert.Len(t, c.Rules(), 2)
	assert.Contains(t, c.String(), `domain "test-domain" (`+files[0].Name+`:2)`)

	// A descriptor given in two of the files is an error, as there.
	_, err = Parse([]File{files[0], files[0]}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	assert.Equal(t, &Error{File: files[0].Name, Line: 5, Column: 5, Field: "descriptors[0]",
		Msg: `duplicate descriptor "test-domain.key1_value1" (first at line 5)`}, err)
	_, err = Parse([]File{files[0], {Name: "again.yaml", Data: yml(`
domain: test-domain
descriptors:
  - key: key3
  - key: key1
    value: value1
`)}}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	assert.Equal(t, &Error{File: "again.yaml", Line: 4, Column: 5, Field: "descriptors[1]",
		Msg: `duplicate descriptor "test-domain.key1_value1" (first at ` + files[0].Name + `:5)`}, err)

	// The wildcards of a merged level are tried in the order of the files.
	c, err = Parse([]File{
		{Name: "a.yaml", Data: yml("domain: m\ndescriptors:\n  - {key: ip, value: \"10.*\", rate_limit: {unit: second, requests_per_unit: 1}}\n")},
		{Name: "b.yaml", Data: yml("domain: m\ndescriptors:\n  - {key: ip, value: \"10.1.*\", rate_limit: {unit: second, requests_per_unit: 2}}\n")},
	}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	require.NoError(t, err)
	assert.Equal(t, "a.yaml", ruleAt(t, c, "m", "ip=10.1.1.1").File)
}
