package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
)

const traceYAML = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: remote_address
    value: 10.1.*
    rate_limit: {unit: second, requests_per_unit: 500}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: generic_key
    value: upstream
    rate_limit: {unit: second, requests_per_unit: 1000}
`

func TestTrace(t *testing.T) {
	c, err := Parse([]File{{Name: "edge.yaml", Data: yml(traceYAML)}, {Name: "other.yaml", Data: yml("domain: internal\n")}}, testOptions())
	require.NoError(t, err)
	e := func(kv ...string) []rate.Entry {
		var out []rate.Entry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, rate.Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		domain  string
		entries []rate.Entry
		steps   []TraceStep
		line    int // of the rule, 0 for none
		why     string
	}{
		{"a wildcard", "edge", e("remote_address", "10.1.2.3"),
			[]TraceStep{{Entry: rate.Entry{Key: "remote_address", Value: "10.1.2.3"}, By: "wildcard", Pattern: "10.1.*", File: "edge.yaml", Line: 5}}, 5, ""},
		{"the key alone", "edge", e("remote_address", "192.0.2.1"),
			[]TraceStep{{Entry: rate.Entry{Key: "remote_address", Value: "192.0.2.1"}, By: "key", File: "edge.yaml", Line: 3}}, 3, ""},
		{"nested", "edge", e("path", "/login", "remote_address", "192.0.2.1"), []TraceStep{
			{Entry: rate.Entry{Key: "path", Value: "/login"}, By: "value", Pattern: "/login", File: "edge.yaml", Line: 8},
			{Entry: rate.Entry{Key: "remote_address", Value: "192.0.2.1"}, By: "key", File: "edge.yaml", Line: 11},
		}, 11, ""},
		{"an unknown domain", "nope", e("k", "v"), nil, 0,
			`domain "nope" is not configured (domains "edge", "internal")`},
		{"an unknown key", "edge", e("user", "u1"), nil, 0,
			`no descriptor of key "user" at the top of the domain (keys "generic_key", "path", "remote_address")`},
		{"an unknown value", "edge", e("path", "/search"), nil, 0,
			`no descriptor of key "path" at the top of the domain matches the value "/search" (values "/login"), and there is none of the key alone`},
		{"an unknown nested key", "edge", e("path", "/login", "user", "u1"),
			[]TraceStep{{Entry: rate.Entry{Key: "path", Value: "/login"}, By: "value", Pattern: "/login", File: "edge.yaml", Line: 8}}, 0,
			`no descriptor of key "user" nested in the descriptor the entry before matched (keys "remote_address")`},
		{"more entries than the branch", "edge", e("generic_key", "upstream", "x", "y"),
			[]TraceStep{{Entry: rate.Entry{Key: "generic_key", Value: "upstream"}, By: "value", Pattern: "upstream", File: "edge.yaml", Line: 13}}, 0,
			`the request has more entries than the branch it matched: the descriptor at edge.yaml:13 has no nested descriptors, so x=y and what follows match nothing; a rule applies to a request whose entries end where the rule is`},
		{"no rate limit where it ends", "edge", e("path", "/login"),
			[]TraceStep{{Entry: rate.Entry{Key: "path", Value: "/login"}, By: "value", Pattern: "/login", File: "edge.yaml", Line: 8}}, 0,
			`the descriptor at edge.yaml:8 that the last entry matched has no rate limit of its own (only descriptors nested in it have): a rule applies to a request whose entries end where the rule is`},
		{"a domain without descriptors", "internal", e("k", "v"), nil, 0,
			`no descriptor of key "k" at the top of the domain (no keys)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := c.Trace(tc.domain, tc.entries)
			assert.Equal(t, tc.steps, tr.Steps)
			assert.Equal(t, tc.why, tr.Why)
			m, ok := c.Match(tc.domain, tc.entries)
			assert.Equal(t, ok, tr.Rule != nil, "Trace finds a rule when Match does")
			if tc.line == 0 {
				assert.Nil(t, tr.Rule)
				return
			}
			require.NotNil(t, tr.Rule)
			assert.Same(t, m.Rule, tr.Rule)
			assert.Equal(t, tc.line, tr.Rule.Line)
		})
	}
}

func TestTraceListsAFewKeys(t *testing.T) {
	c := mustParse(t, `
domain: d
descriptors: [{key: a}, {key: b}, {key: c}, {key: d}, {key: e}, {key: f}, {key: g}, {key: h}, {key: i}, {key: j}]
`, testOptions())
	assert.Equal(t, `no descriptor of key "z" at the top of the domain (keys "a", "b", "c", "d", "e", "f", "g", "h" and 2 more)`,
		c.Trace("d", []rate.Entry{{Key: "z", Value: "1"}}).Why)
}
