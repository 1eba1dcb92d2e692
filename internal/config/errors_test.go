package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		msg   string // a substring of Msg
	}{
		// Unknown fields, everywhere.
		{"unknown field at top level", `
domain: d
limits: []
`, 2, "limits", "unknown field (want domain, descriptors)"},
		{"unknown field in a descriptor", `
domain: d
descriptors:
  - key: k
    rate_limt: {unit: second}
`, 4, "descriptors[0].rate_limt", "unknown field"},
		{"a known field misplaced in a descriptor", `
domain: d
descriptors:
  - key: k
    name: n
`, 4, "descriptors[0].name", "unknown field"},
		{"unknown field in rate_limit", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      request_per_unit: 5
`, 6, "descriptors[0].rate_limit.request_per_unit", "unknown field"},
		{"unknown field in replaces", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      replaces:
        - name: a
          domain: d
`, 8, "descriptors[0].rate_limit.replaces[0].domain", "unknown field (want name)"},
		{"unlimited in a rate_limits item", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - unit: second
      - unlimited: true
`, 6, "descriptors[0].rate_limits[1].unlimited", "unknown field"},
		{"unknown field in a nested descriptor", `
domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
      - key: c
        values: x
`, 7, "descriptors[0].descriptors[1].values", "unknown field"},
		{"a field given twice", `
domain: d
descriptors:
  - key: a
    key: b
`, 4, "descriptors[0].key", "field given twice (first at line 3)"},

		// Units and algorithms.
		{"bad unit", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: fortnight
`, 5, "descriptors[0].rate_limit.unit", `invalid rate limit unit "fortnight" (want second, minute, hour, day, week, month or year)`},
		{"unit UNKNOWN, envoy's enum zero", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: UNKNOWN}}
`, 3, "descriptors[0].rate_limit.unit", `invalid rate limit unit "UNKNOWN"`},
		{"rate_limit without unit or unlimited", `
domain: d
descriptors:
  - key: k
    rate_limit:
      requests_per_unit: 5
`, 5, "descriptors[0].rate_limit.unit", `invalid rate limit unit ""`},
		{"empty rate_limit mapping", `
domain: d
descriptors:
  - key: k
    rate_limit: {}
`, 4, "descriptors[0].rate_limit.unit", `invalid rate limit unit ""`},
		{"rate_limits item without unit", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - requests_per_unit: 5
`, 5, "descriptors[0].rate_limits[0].unit", `invalid rate limit unit ""`},
		{"unknown algorithm", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      algorithm: leaky_bucket
`, 6, "descriptors[0].rate_limit.algorithm", `unknown algorithm "leaky_bucket" (want fixed_window, sliding_window_log, sliding_window_counter or token_bucket)`},
		{"algorithm in upper case", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, algorithm: TOKEN_BUCKET}}
`, 3, "descriptors[0].rate_limit.algorithm", `unknown algorithm "TOKEN_BUCKET"`},

		// Unlimited.
		{"unlimited with a unit", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unlimited: true
      unit: second
`, 6, "descriptors[0].rate_limit.unit", "should not specify rate limit unit when unlimited"},
		{"unlimited with an invalid unit", `
domain: d
descriptors:
  - {key: k, rate_limit: {unlimited: true, unit: fortnight}}
`, 3, "descriptors[0].rate_limit.unit", "should not specify rate limit unit when unlimited"},
		{"unlimited with an algorithm", `
domain: d
descriptors:
  - {key: k, rate_limit: {unlimited: true, algorithm: token_bucket}}
`, 3, "descriptors[0].rate_limit.algorithm", "should not be set when unlimited"},
		{"unlimited with a burst", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unlimited: true
      burst: 5
`, 6, "descriptors[0].rate_limit.burst", "should not be set when unlimited"},
		{"unlimited with a unit_multiplier", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit_multiplier: 2
      unlimited: true
`, 5, "descriptors[0].rate_limit.unit_multiplier", "should not be set when unlimited"},
		{"unlimited with shards", `
domain: d
descriptors:
  - {key: k, rate_limit: {unlimited: true, shards: 2}}
`, 3, "descriptors[0].rate_limit.shards", "should not be set when unlimited"},
		{"unlimited with rate_limits", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unlimited: true
    rate_limits:
      - {unit: second, requests_per_unit: 1}
`, 7, "descriptors[0].rate_limits", "should not be combined with an unlimited rate_limit"},
		{"unlimited with requests_per_unit out of range", `
domain: d
descriptors:
  - {key: k, rate_limit: {unlimited: true, requests_per_unit: -1}}
`, 3, "descriptors[0].rate_limit.requests_per_unit", "want an integer in [0, 4294967295]"},

		// Keys, domains, duplicates.
		{"duplicate key and value at one level", `
domain: d
descriptors:
  - key: k
    value: v
  - key: other
  - key: k
    value: v
`, 6, "descriptors[2]", `duplicate descriptor "d.k_v" (first at line 3)`},
		{"duplicate key-only descriptor", `
domain: d
descriptors:
  - key: a
    descriptors:
      - {key: k, rate_limit: {unit: second}}
      - {key: k, value: "", rate_limit: {unit: minute}}
`, 6, "descriptors[0].descriptors[1]", `duplicate descriptor "d.a.k" (first at line 5)`},
		{"duplicate wildcard", `
domain: d
descriptors:
  - {key: k, value: "v*"}
  - {key: k, value: "v*"}
`, 4, "descriptors[1]", `duplicate descriptor "d.k_v*" (first at line 3)`},
		{"empty key", `
domain: d
descriptors:
  - key: ""
    value: v
`, 3, "descriptors[0].key", "descriptor has empty key"},
		{"missing key", `
domain: d
descriptors:
  - key: a
  - value: v
    rate_limit: {unit: second}
`, 4, "descriptors[1].key", "descriptor has empty key"},
		{"null key", `
domain: d
descriptors:
  - key:
    value: v
`, 3, "descriptors[0].key", "descriptor has empty key"},
		{"empty domain", `
domain: ""
descriptors: []
`, 1, "domain", "config file cannot have empty domain"},
		{"missing domain", `
# limits
descriptors:
  - key: k
`, 2, "domain", "config file cannot have empty domain"},

		// Replaces.
		{"replaces naming its own limit", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      name: mine
      replaces:
        - name: other
        - name: mine
`, 9, "descriptors[0].rate_limit.replaces[1].name", "replaces should not contain name of same descriptor"},
		{"replaces with an empty name", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      replaces:
        - name: ""
`, 7, "descriptors[0].rate_limit.replaces[0].name", "should not have an empty replaces entry"},
		{"replaces entry without a name", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      replaces: [{}]
`, 6, "descriptors[0].rate_limit.replaces[0].name", "should not have an empty replaces entry"},
		{"replaces naming a sibling limit", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, name: fast}
    rate_limits:
      - {unit: day, replaces: [{name: fast}]}
`, 6, "descriptors[0].rate_limits[0].replaces[0].name", `replaces should not name "fast", a limit of the same descriptor`},
		{"replaces naming itself in a rate_limits item", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: day, name: x, replaces: [{name: x}]}
`, 5, "descriptors[0].rate_limits[0].replaces[0].name", "replaces should not contain name of same descriptor"},

		// Burst.
		{"burst on fixed_window", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      algorithm: fixed_window
      burst: 10
`, 7, "descriptors[0].rate_limit.burst", "burst applies only to token_bucket, not fixed_window"},
		{"burst on the default algorithm", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, burst: 10}}
`, 3, "descriptors[0].rate_limit.burst", "burst applies only to token_bucket, not sliding_window_counter"},
		{"burst 0", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, algorithm: token_bucket, requests_per_unit: 5, burst: 0}}
`, 3, "descriptors[0].rate_limit.burst", "want an integer in [1, 4294967295], got \"0\""},
		{"token_bucket with no requests and a burst", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      algorithm: token_bucket
      requests_per_unit: 0
      burst: 5
`, 8, "descriptors[0].rate_limit.burst", "never refills, so its burst must be 0"},
		{"burst over the range", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, algorithm: token_bucket, burst: 4294967296}}
`, 3, "descriptors[0].rate_limit.burst", "want an integer in [1, 4294967295]"},

		// Numbers.
		{"requests_per_unit 4294967296", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 4294967296
`, 6, "descriptors[0].rate_limit.requests_per_unit", `want an integer in [0, 4294967295], got "4294967296"`},
		{"requests_per_unit -1", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: -1}}
`, 3, "descriptors[0].rate_limit.requests_per_unit", `got "-1"`},
		{"requests_per_unit 1.5", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 1.5
`, 6, "descriptors[0].rate_limit.requests_per_unit", `got "1.5"`},
		{"requests_per_unit ten", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: ten
`, 6, "descriptors[0].rate_limit.requests_per_unit", `got "ten"`},
		{"requests_per_unit quoted", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: "10"}}
`, 3, "descriptors[0].rate_limit.requests_per_unit", `got "10"`},
		{"requests_per_unit a list", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: [1]}}
`, 3, "descriptors[0].rate_limit.requests_per_unit", "got a list"},
		{"requests_per_unit beyond 64 bits", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, requests_per_unit: 99999999999999999999}}
`, 3, "descriptors[0].rate_limit.requests_per_unit", "want an integer"},
		{"sliding_window_log over 100000", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      algorithm: sliding_window_log
      requests_per_unit: 100001
`, 7, "descriptors[0].rate_limit.requests_per_unit", "the most a sliding_window_log keeps"},
		{"unit_multiplier 0", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      unit_multiplier: 0
`, 6, "descriptors[0].rate_limit.unit_multiplier", "want an integer in [1, 4294967295]"},
		{"window over 10 years", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: year
      unit_multiplier: 11
`, 6, "descriptors[0].rate_limit.unit_multiplier", "window of 11 year exceeds the longest window, 3650 days"},
		{"window over 10 years in days", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - unit: day
        unit_multiplier: 3651
`, 6, "descriptors[0].rate_limits[0].unit_multiplier", "window of 3651 day exceeds"},
		{"the largest multiplier of the longest unit", `
domain: d
descriptors:
  - {key: k, rate_limit: {unit: year, unit_multiplier: 4294967295}}
`, 3, "descriptors[0].rate_limit.unit_multiplier", "exceeds the longest window"},
		{"shards 0", `
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: second
      shards: 0
`, 6, "descriptors[0].rate_limit.shards", "want an integer in [1, 64]"},
		{"shards 65", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - unit: second
        shards: 65
`, 6, "descriptors[0].rate_limits[0].shards", `want an integer in [1, 64], got "65"`},

		// Limits that would share state.
		{"same algorithm and window twice", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 10}
    rate_limits:
      - {unit: day, requests_per_unit: 1000}
      - {unit: second, unit_multiplier: 60, requests_per_unit: 20}
`, 7, "descriptors[0].rate_limits[1]", "same algorithm (sliding_window_counter) and window (60 second) as descriptors[0].rate_limit"},
		{"same algorithm and window twice in rate_limits", `
domain: d
descriptors:
  - key: k
    rate_limits:
      - unit: hour
        algorithm: token_bucket
      - unit: hour
        algorithm: token_bucket
        requests_per_unit: 5
        burst: 10
`, 7, "descriptors[0].rate_limits[1]", "as descriptors[0].rate_limits[0]: the two would share one state"},

		// Wrong YAML types.
		{"descriptors as a map", `
domain: d
descriptors:
  key: k
`, 3, "descriptors", "want a list, got a mapping"},
		{"key as a list", `
domain: d
descriptors:
  - key: [a, b]
`, 3, "descriptors[0].key", "want a string, got a list"},
		{"domain as a mapping", `
domain: {name: d}
`, 1, "domain", "want a string, got a mapping"},
		{"a descriptor that is a string", `
domain: d
descriptors:
  - key
`, 3, "descriptors[0]", `want a mapping, got "key"`},
		{"rate_limit as a list", `
domain: d
descriptors:
  - key: k
    rate_limit:
      - unit: second
`, 5, "descriptors[0].rate_limit", "want a mapping, got a list"},
		{"rate_limits as a mapping", `
domain: d
descriptors:
  - key: k
    rate_limits:
      unit: second
`, 5, "descriptors[0].rate_limits", "want a list, got a mapping"},
		{"replaces as a mapping", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, replaces: {name: x}}
`, 4, "descriptors[0].rate_limit.replaces", "want a list, got a mapping"},
		{"shadow_mode not a boolean", `
domain: d
descriptors:
  - key: k
    shadow_mode: maybe
`, 4, "descriptors[0].shadow_mode", `want true or false, got "maybe"`},
		{"allow_negative_hits not a boolean", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    allow_negative_hits: 1
`, 5, "descriptors[0].allow_negative_hits", `want true or false, got "1"`},
		{"allow_negative_hits in a rate_limit", `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1, allow_negative_hits: true}
`, 4, "descriptors[0].rate_limit.allow_negative_hits", `unknown field`},
		{"quoted yes is a string, not a boolean", `
domain: d
descriptors:
  - {key: k, share_threshold: "yes"}
`, 3, "descriptors[0].share_threshold", `want true or false, got "yes"`},
		{"a field name that is a list", `
domain: d
? [a]
: b
`, 2, "", "want a field name, got a list"},
		{"a merge of a scalar", `
domain: d
descriptors:
  - key: k
    <<: x
`, 4, "descriptors[0]", "merge key (<<) wants a mapping or a list of mappings"},
		{"a merge bringing an unknown field", `
domain: d
base: &b {unit: second}
`, 2, "base", "unknown field"},

		// Whole documents.
		// yaml.v3 locates errors of structure at the start of the
		// collection that holds them.
		{"broken YAML syntax", `
domain: d
descriptors:
  - key: k
   value: v
`, 3, "", "invalid YAML: did not find expected '-' indicator"},
		{"unclosed flow sequence", `
domain: d
descriptors: [
  {key: k}
`, 2, "", "invalid YAML: did not find expected ',' or ']'"},
		{"broken YAML on the first line, noticed at the end", `
domain: [d
`, 2, "", "invalid YAML: did not find expected ',' or ']'"},
		{"unterminated quoted string", `
domain: d
descriptors:
  - key: k
    value: "v
`, 4, "", "invalid YAML: found unexpected end of stream"},
		{"mapping values where none may be", `
domain: d
descriptors:
  - key: k: v
`, 3, "", "invalid YAML: mapping values are not allowed in this context"},
		{"mapping values on the first line", `
domain: d: e
`, 1, "", "invalid YAML: mapping values are not allowed in this context"},
		{"invalid UTF-8", "domain: \xff\n", 0, "", "invalid YAML: "},
		{"tab indentation", "domain: d\ndescriptors:\n\t- key: k\n", 3, "", "invalid YAML: found character that cannot start any token"},
		{"empty file", "", 0, "", "empty file"},
		{"comments only", "# nothing\n# here\n", 0, "", "empty file"},
		{"an empty document", "---\n", 1, "", "empty document"},
		{"a list", "- domain: d\n", 1, "", "want a mapping with domain and descriptors, got a list"},
		{"a scalar", "domain\n", 1, "", `want a mapping with domain and descriptors, got "domain"`},
		{"two documents", `
domain: a
---
domain: b
`, 3, "", "a second YAML document"},
		{"an unknown alias", `
domain: *d
`, 0, "", "invalid YAML: unknown anchor 'd' referenced"},
		{"descriptors nested too deep", "domain: d\ndescriptors: " + strings.Repeat("[{key: k, descriptors: ", MaxDepth+1) +
			"[]" + strings.Repeat("}]", MaxDepth+1) + "\n", 2, "descriptors" + strings.Repeat("[0].descriptors", MaxDepth), "nested more than 64 deep"},
		{"an alias cycle", `
domain: d
descriptors: &loop
  - key: k
    descriptors: *loop
`, 4, "descriptors" + strings.Repeat("[0].descriptors", MaxDepth), "nested more than 64 deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := parseError(t, []File{{Name: "dir/test.yaml", Data: yml(tt.yaml)}})
			assert.Equal(t, "dir/test.yaml", e.File)
			assert.Equal(t, tt.line, e.Line, "line of %v", e)
			assert.Equal(t, tt.field, e.Field, "field of %v", e)
			assert.Contains(t, e.Msg, tt.msg)
		})
	}
}

func TestErrorFormat(t *testing.T) {
	e := parseError(t, []File{{Name: "path/to/file.yaml", Data: yml(`
domain: d
descriptors:
  - key: k
    rate_limit:
      unit: fortnight
`)}})
	assert.Equal(t, `path/to/file.yaml:5:13: descriptors[0].rate_limit.unit: invalid rate limit unit "fortnight" (want second, minute, hour, day, week, month or year)`, e.Error())

	assert.Equal(t, "f.yaml: empty file", (&Error{File: "f.yaml", Msg: "empty file"}).Error())
	assert.Equal(t, "f.yaml:3: invalid YAML: x", (&Error{File: "f.yaml", Line: 3, Msg: "invalid YAML: x"}).Error())
	assert.Equal(t, "f.yaml:3:7: domain: x", (&Error{File: "f.yaml", Line: 3, Column: 7, Field: "domain", Msg: "x"}).Error())
	assert.Equal(t, "f.yaml: x", (&Error{File: "f.yaml", Column: 7, Msg: "x"}).Error(), "a column without a line")

	// Errors from Limit.Validate stay reachable.
	_, err := Parse([]File{{Name: "f.yaml", Data: yml(`
domain: d
descriptors:
  - {key: k, rate_limit: {unit: second, algorithm: sliding_window_log, requests_per_unit: 200000}}
`)}}, testOptions())
	assert.ErrorIs(t, err, algorithms.ErrInvalidLimit)
	wrapped := fmt.Errorf("reload: %w", err)
	var e2 *Error
	require.True(t, errors.As(wrapped, &e2))
	assert.Equal(t, 3, e2.Line)
}

func TestParseDuplicateDomain(t *testing.T) {
	e := parseError(t, []File{
		{Name: "a.yaml", Data: yml("domain: edge\n")},
		{Name: "b.yaml", Data: yml("domain: other\n")},
		{Name: "c.yaml", Data: yml("# the same domain again\ndomain: edge\ndescriptors: []\n")},
	})
	assert.Equal(t, &Error{File: "c.yaml", Line: 2, Column: 9, Field: "domain", Msg: `duplicate domain "edge" (also in a.yaml:1)`}, e)
}

func TestParseUnnamedFile(t *testing.T) {
	e := parseError(t, []File{{Name: "a.yaml", Data: yml("domain: a\n")}, {Data: yml("domain: b\n")}})
	assert.Equal(t, "files[1]", e.File)
	assert.Equal(t, "file has no name", e.Msg)
}

func TestParseAliasExpansionIsBounded(t *testing.T) {
	// Each level doubles the tree the aliases describe: 2^30 descriptors if
	// expanded, from a file of a few hundred bytes.
	var c strings.Builder
	c.WriteString("domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: a}, {key: b}]\n")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&c, "  - key: l%d\n    descriptors: &l%d [{key: a, descriptors: *l%d}, {key: b, descriptors: *l%d}]\n", i, i, i-1, i-1)
	}
	e := parseError(t, []File{{Name: "bomb.yaml", Data: []byte(c.String())}})
	assert.Equal(t, "bomb.yaml", e.File)
	assert.Contains(t, e.Msg, "too large once aliases are expanded")
}
