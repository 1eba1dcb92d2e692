package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

func TestParseAccepts(t *testing.T) {
	const f = "test.yaml"
	tests := []struct {
		name string
		opts Options
		yaml string
		want []Rule
	}{
		{
			name: "envoy example 1: two values of one key",
			yaml: `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`,
			want: []Rule{
				{Domain: "mongo_cps", Path: "mongo_cps.database_users", Limits: []RateLimit{swc(500, Second)}, File: f, Line: 3},
				{Domain: "mongo_cps", Path: "mongo_cps.database_default", Limits: []RateLimit{swc(500, Second)}, File: f, Line: 9},
			},
		},
		{
			name: "envoy example 2: nested descriptors",
			yaml: `
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`,
			want: []Rule{
				{Domain: "messaging", Path: "messaging.message_type_marketing.to_number", Limits: []RateLimit{swc(5, Day)}, File: f, Line: 7},
				{Domain: "messaging", Path: "messaging.to_number", Limits: []RateLimit{swc(100, Day)}, File: f, Line: 13},
			},
		},
		{
			name: "envoy example 3: a blocked value next to its key",
			yaml: `
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`,
			want: []Rule{
				{Domain: "edge_proxy_per_ip", Path: "edge_proxy_per_ip.remote_address", Limits: []RateLimit{swc(10, Second)}, File: f, Line: 3},
				{Domain: "edge_proxy_per_ip", Path: "edge_proxy_per_ip.remote_address_50.0.0.5", Limits: []RateLimit{swc(0, Second)}, File: f, Line: 9},
			},
		},
		{
			name: "envoy example 5: unlimited",
			yaml: `
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`,
			want: []Rule{
				{Domain: "internal", Path: "internal.ldap", Unlimited: true, File: f, Line: 3},
				{Domain: "internal", Path: "internal.azure", Limits: []RateLimit{swc(100, Minute)}, File: f, Line: 7},
			},
		},
		{
			name: "envoy example 6: shadow_mode",
			yaml: `
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`,
			want: []Rule{
				{Domain: "example6", Path: "example6.service.user_user-a", Limits: []RateLimit{swc(10, Second)}, ShadowMode: true, File: f, Line: 5},
				{Domain: "example6", Path: "example6.service.user_user-b", Limits: []RateLimit{swc(20, Second)}, File: f, Line: 11},
			},
		},
		{
			name: "envoy example 7: replaces",
			yaml: `
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`,
			want: []Rule{
				{Domain: "example7", Path: "example7.key_1_value_1.user_bkthomps", Limits: []RateLimit{named(swc(5, Second), "specific_limit")}, File: f, Line: 6},
				{Domain: "example7", Path: "example7.key_2_value_2.user_bkthomps", Limits: []RateLimit{named(swc(10, Second), "", "specific_limit")}, File: f, Line: 15},
			},
		},
		{
			name: "envoy example 8: detailed_metric",
			yaml: `
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
			want: []Rule{
				{Domain: "example8", Path: "example8.key1", Limits: []RateLimit{swc(10, Minute)}, DetailedMetric: true, File: f, Line: 3},
				{Domain: "example8", Path: "example8.key1_value1", Limits: []RateLimit{swc(20, Minute)}, File: f, Line: 8},
			},
		},
		{
			name: "envoy example 9: wildcard, value_to_metric, share_threshold",
			yaml: `
domain: example9
descriptors:
  - key: key1
    value: value*
    value_to_metric: true
    share_threshold: true
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
			want: []Rule{
				{Domain: "example9", Path: "example9.key1_value*", Limits: []RateLimit{swc(20, Minute)}, ValueToMetric: true, File: f, Line: 3},
			},
		},
		{
			name: "upper-case and mixed-case units, every unit",
			yaml: `
domain: units
descriptors:
  - {key: a, rate_limit: {unit: SECOND, requests_per_unit: 1}}
  - {key: b, rate_limit: {unit: Minute, requests_per_unit: 2}}
  - {key: c, rate_limit: {unit: hour, requests_per_unit: 3}}
  - {key: d, rate_limit: {unit: DAY, requests_per_unit: 4}}
  - {key: e, rate_limit: {unit: week, requests_per_unit: 5}}
  - {key: f, rate_limit: {unit: month, requests_per_unit: 6}}
  - {key: g, rate_limit: {unit: YEAR, requests_per_unit: 7}}
`,
			want: []Rule{
				{Domain: "units", Path: "units.a", Limits: []RateLimit{swc(1, Second)}, File: f, Line: 3},
				{Domain: "units", Path: "units.b", Limits: []RateLimit{swc(2, Minute)}, File: f, Line: 4},
				{Domain: "units", Path: "units.c", Limits: []RateLimit{swc(3, Hour)}, File: f, Line: 5},
				{Domain: "units", Path: "units.d", Limits: []RateLimit{swc(4, Day)}, File: f, Line: 6},
				{Domain: "units", Path: "units.e", Limits: []RateLimit{swc(5, Week)}, File: f, Line: 7},
				{Domain: "units", Path: "units.f", Limits: []RateLimit{swc(6, Month)}, File: f, Line: 8},
				{Domain: "units", Path: "units.g", Limits: []RateLimit{swc(7, Year)}, File: f, Line: 9},
			},
		},
		{
			name: "extensions: multiplier, algorithm, burst, shards, rate_limits with names",
			yaml: `
domain: edge
descriptors:
  - key: api_key
    rate_limit:
      unit: minute
      unit_multiplier: 5
      requests_per_unit: 100
      algorithm: sliding_window_log
      shards: 4
      name: five_minutes
    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, name: burst, replaces: [{name: other}]}
      - {unit: day, requests_per_unit: 10000}
      - {unit: second, requests_per_unit: 10, algorithm: fixed_window}
`,
			want: []Rule{{
				Domain: "edge", Path: "edge.api_key", File: f, Line: 3,
				Limits: []RateLimit{
					func() RateLimit {
						l := named(limit(algorithms.SlidingWindowLog, 100, Minute, 5), "five_minutes")
						l.Shards = 4
						return l
					}(),
					func() RateLimit {
						l := named(limit(algorithms.TokenBucket, 10, Second, 1), "burst", "other")
						l.Limit.Burst = 20
						return l
					}(),
					swc(10000, Day),
					limit(algorithms.FixedWindow, 10, Second, 1),
				},
			}},
		},
		{
			name: "rate_limits without rate_limit; longest window and largest numbers",
			yaml: `
domain: edge
descriptors:
  - key: k
    rate_limits:
      - unit: year
        unit_multiplier: 10
        requests_per_unit: 4294967295
        algorithm: token_bucket
        burst: 4294967295
        shards: 64
`,
			want: []Rule{{
				Domain: "edge", Path: "edge.k", File: f, Line: 3,
				Limits: []RateLimit{func() RateLimit {
					l := limit(algorithms.TokenBucket, 4294967295, Year, 10)
					l.Limit.Burst = 4294967295
					l.Shards = 64
					return l
				}()},
			}},
		},
		{
			name: "Options.DefaultAlgorithm applies where no algorithm is named",
			opts: Options{DefaultAlgorithm: algorithms.TokenBucket},
			yaml: `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5, burst: 7}
`,
			want: []Rule{{
				Domain: "d", Path: "d.k", File: f, Line: 3,
				Limits: []RateLimit{func() RateLimit {
					l := limit(algorithms.TokenBucket, 5, Second, 1)
					l.Limit.Burst = 7
					return l
				}()},
			}},
		},
		{
			name: "unlimited with a name, replaces and requests_per_unit (checked, ignored)",
			yaml: `
domain: d
descriptors:
  - key: vip
    shadow_mode: true
    rate_limit:
      unlimited: true
      requests_per_unit: 100
      name: vip
      replaces: [{name: per_user}]
`,
			want: []Rule{{
				Domain: "d", Path: "d.vip", Unlimited: true, ShadowMode: true,
				Name: "vip", Replaces: []string{"per_user"}, File: f, Line: 3,
			}},
		},
		{
			name: "YAML as envoyproxy/ratelimit reads it: scalars as strings, nulls, yes/no, quoted keys",
			yaml: `
"domain": 'd'
descriptors:
  - key: status
    value: 200
    shadow_mode: yes
    detailed_metric: off
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: placeholder
    value: ~
    rate_limit:
  - key: nulls
    value: null
    shadow_mode:
    descriptors:
    rate_limit:
      unit: hour
      requests_per_unit:
      replaces:
---
`,
			want: []Rule{
				{Domain: "d", Path: "d.status_200", Limits: []RateLimit{swc(1, Second)}, ShadowMode: true, File: f, Line: 3},
				{Domain: "d", Path: "d.nulls", Limits: []RateLimit{swc(0, Hour)}, File: f, Line: 11},
			},
		},
		{
			name: "a domain without descriptors, and descriptors without limits",
			yaml: `
domain: d
descriptors:
  - key: whitelisted
  - key: parent
    descriptors:
      - key: child
        value: v
        shadow_mode: true
        descriptors: []
`,
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts == (Options{}) { // a row that sets no options
				opts = testOptions()
			}
			c := mustParse(t, tt.yaml, opts)
			assert.Equal(t, tt.want, rules(c))
		})
	}
}

func TestParseAliases(t *testing.T) {
	c := mustParse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: &std {unit: minute, requests_per_unit: 60}
  - key: b
    rate_limit: *std
  - key: c
    rate_limit:
      <<: *std
      requests_per_unit: 5
  - key: t
    value: t1
    rate_limit:
      <<: [{unit: second}, {unit: day, requests_per_unit: 9}]
  - &tenant
    key: tenant
    descriptors:
      - key: user
        rate_limit: *std
  - key: other
    descriptors: [*tenant]
`, testOptions())
	std := swc(60, Minute)
	assert.Equal(t, []Rule{
		{Domain: "d", Path: "d.a", Limits: []RateLimit{std}, File: "test.yaml", Line: 3},
		{Domain: "d", Path: "d.b", Limits: []RateLimit{std}, File: "test.yaml", Line: 5},
		{Domain: "d", Path: "d.c", Limits: []RateLimit{swc(5, Minute)}, File: "test.yaml", Line: 7},
		{Domain: "d", Path: "d.t_t1", Limits: []RateLimit{swc(9, Second)}, File: "test.yaml", Line: 11},
		{Domain: "d", Path: "d.tenant.user", Limits: []RateLimit{std}, File: "test.yaml", Line: 18},
		{Domain: "d", Path: "d.other.tenant.user", Limits: []RateLimit{std}, File: "test.yaml", Line: 18},
	}, rules(c))
}

func TestParseSeveralFiles(t *testing.T) {
	c, err := Parse([]File{
		{Name: "b.yaml", Data: yml(`
domain: zeta
descriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]
`)},
		{Name: "a.yaml", Data: yml(`
domain: alpha
`)},
	}, testOptions())
	require.NoError(t, err)
	assert.Equal(t, []string{"alpha", "zeta"}, c.Domains())
	assert.Equal(t, []string{"b.yaml", "a.yaml"}, c.Files())
	assert.True(t, c.HasDomain("alpha"))
	assert.True(t, c.HasDomain("zeta"))
	assert.False(t, c.HasDomain("beta"))
	require.Len(t, c.Rules(), 1)
	assert.Equal(t, "zeta.k", c.Rules()[0].Path)
	assert.Equal(t, "b.yaml", c.Rules()[0].File)

	// The accessors hand out copies.
	c.Domains()[0] = "changed"
	c.Files()[0] = "changed"
	c.Rules()[0] = nil
	assert.Equal(t, []string{"alpha", "zeta"}, c.Domains())
	assert.Equal(t, []string{"b.yaml", "a.yaml"}, c.Files())
	assert.NotNil(t, c.Rules()[0])
}

func TestParseNoFiles(t *testing.T) {
	c, err := Parse(nil, testOptions())
	require.NoError(t, err)
	assert.Empty(t, c.Domains())
	assert.Empty(t, c.Rules())
	_, ok := c.Match("any", []rate.Entry{{Key: "k", Value: "v"}})
	assert.False(t, ok)
}

// TestParseAllowNegativeHits reads allow_negative_hits: set on a descriptor
// it applies to that descriptor's rule alone, and where it is not set
// Options.AllowNegativeHits decides.
func TestParseAllowNegativeHits(t *testing.T) {
	const limits = `
domain: d
descriptors:
  - key: refillable
    allow_negative_hits: true
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: nested
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: fixed
    allow_negative_hits: false
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: unset
    rate_limit: {unit: minute, requests_per_unit: 10}
`
	for _, def := range []bool{false, true} {
		c := mustParse(t, limits, Options{DefaultAlgorithm: testAlgorithm, AllowNegativeHits: def})
		got := map[string]bool{}
		for _, r := range c.Rules() {
			got[r.Path] = r.AllowNegativeHits
		}
		assert.Equal(t, map[string]bool{
			"d.refillable": true, "d.refillable.nested": def, "d.fixed": false, "d.unset": def,
		}, got, "Options.AllowNegativeHits %v", def)
	}
}

// TestParseInvalidOptions: Parse refuses what Options.Validate refuses,
// naming the field; DefaultOptions parse.
func TestParseInvalidOptions(t *testing.T) {
	_, err := Parse(nil, Options{DefaultAlgorithm: algorithms.Algorithm(99)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config: DefaultAlgorithm ")
	assert.Equal(t, "DefaultAlgorithm", option.Of(err).Field)

	// No algorithm stands in for an unset one.
	_, err = Parse(nil, Options{})
	assert.EqualError(t, err, "config: DefaultAlgorithm is not set")
	_, err = Parse(nil, Options{DefaultAlgorithm: algorithms.FixedWindow, WildcardPrecedence: 9})
	assert.Equal(t, "WildcardPrecedence", option.Of(err).Field)
	_, err = Parse(nil, Options{DefaultAlgorithm: algorithms.FixedWindow, MaxBytes: -1})
	assert.Equal(t, "MaxBytes", option.Of(err).Field)
	_, err = Parse(nil, DefaultOptions())
	assert.NoError(t, err)
}

func TestString(t *testing.T) {
	c, err := Parse([]File{
		{Name: "limits/edge.yaml", Data: yml(`
domain: edge
descriptors:
  - key: api_key
    shadow_mode: true
    allow_negative_hits: true
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20, shards: 2}
    rate_limits:
      - {unit: day, requests_per_unit: 10000, name: daily, replaces: [{name: a}, {name: b}]}
  - key: internal
    rate_limit: {unlimited: true, name: "in ternal"}
`)},
		{Name: "limits/empty.yaml", Data: yml("domain: empty\n")},
	}, testOptions())
	require.NoError(t, err)
	assert.Equal(t, `domain "edge" (limits/edge.yaml:1)
  edge.api_key (limits/edge.yaml:3) shadow_mode allow_negative_hits
    - algorithm=token_bucket requests_per_unit=10 unit=second unit_multiplier=1 burst=20 shards=2
    - algorithm=sliding_window_counter requests_per_unit=10000 unit=day unit_multiplier=1 burst=10000 shards=1 name="daily" replaces="a","b"
  edge.internal (limits/edge.yaml:9)
    - unlimited name="in ternal"
domain "empty" (limits/empty.yaml:1)
  (no rate limits)
`, c.String())
}

func TestWindowOfEveryUnit(t *testing.T) {
	for u := Second; u <= Year; u++ {
		assert.Equal(t, u.Duration(), unitLengths[u])
		got, ok := parseUnit(u.String())
		assert.True(t, ok)
		assert.Equal(t, u, got)
	}
	assert.Equal(t, 365*24*time.Hour, Year.Duration())
	_, ok := parseUnit("unknown")
	assert.False(t, ok)
	_, ok = parseUnit("")
	assert.False(t, ok)
}
