package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// policy returns a RateLimitPolicy of n per unit.
func policy(n uint32, unit rlsconfv3.RateLimitUnit) *rlsconfv3.RateLimitPolicy {
	return &rlsconfv3.RateLimitPolicy{RequestsPerUnit: n, Unit: unit}
}

// xdsError builds a Config from resources and returns the *Error it must
// fail with.
func xdsError(t *testing.T, resources ...*rlsconfv3.RateLimitConfig) *Error {
	t.Helper()
	_, err := FromRateLimitConfigs(resources, testOptions())
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e), "error %v (%T) is not a *config.Error", err, err)
	return e
}

// TestFromRateLimitConfigsMeansWhatTheFileMeans: a resource gives the same
// rules, and matches the same descriptors, as the limits file with the same
// fields, and with charge: window where it counts hits: a resource's limits
// record every hit, as envoyproxy/ratelimit counts them.
func TestFromRateLimitConfigsMeansWhatTheFileMeans(t *testing.T) {
	resource := &rlsconfv3.RateLimitConfig{
		Name:   "default/eg/http",
		Domain: "default/eg/http",
		Descriptors: []*rlsconfv3.RateLimitDescriptor{{
			Key:   "httproute/default/backend/rule/0/match/0/*",
			Value: "httproute/default/backend/rule/0/match/0/*",
			Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "rule-0-match-0", Value: "rule-0-match-0", Descriptors: []*rlsconfv3.RateLimitDescriptor{
					{Key: "rule-0-match-1", RateLimit: policy(3, rlsconfv3.RateLimitUnit_HOUR)},
				}},
				{Key: "masked_remote_address", Value: "192.0.2.0/24", ShadowMode: true, Descriptors: []*rlsconfv3.RateLimitDescriptor{
					{Key: "remote_address", ShadowMode: true, RateLimit: policy(10, rlsconfv3.RateLimitUnit_SECOND)},
				}},
				{Key: "rule-2-match--1", Value: "rule-2-match--1", DetailedMetric: true, RateLimit: &rlsconfv3.RateLimitPolicy{
					RequestsPerUnit: 100, Unit: rlsconfv3.RateLimitUnit_WEEK, Name: "weekly",
					Replaces: []*rlsconfv3.RateLimitReplace{{Name: "daily"}},
				}},
				{Key: "internal", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
				{Key: "blocked", RateLimit: policy(0, rlsconfv3.RateLimitUnit_MONTH)},
				{Key: "yearly", RateLimit: policy(7, rlsconfv3.RateLimitUnit_YEAR)},
				{Key: "daily", RateLimit: policy(5, rlsconfv3.RateLimitUnit_DAY)},
				{Key: "minutely", RateLimit: policy(5, rlsconfv3.RateLimitUnit_MINUTE)},
			},
		}},
	}
	const file = `
domain: default/eg/http
descriptors:
  - key: "httproute/default/backend/rule/0/match/0/*"
    value: "httproute/default/backend/rule/0/match/0/*"
    descriptors:
      - key: rule-0-match-0
        value: rule-0-match-0
        descriptors:
          - key: rule-0-match-1
            charge: window
            rate_limit: {unit: hour, requests_per_unit: 3}
      - key: masked_remote_address
        value: 192.0.2.0/24
        shadow_mode: true
        descriptors:
          - key: remote_address
            shadow_mode: true
            charge: window
            rate_limit: {unit: second, requests_per_unit: 10}
      - key: rule-2-match--1
        value: rule-2-match--1
        detailed_metric: true
        charge: window
        rate_limit: {unit: week, requests_per_unit: 100, name: weekly, replaces: [{name: daily}]}
      - key: internal
        rate_limit: {unlimited: true}
      - key: blocked
        charge: window
        rate_limit: {unit: month, requests_per_unit: 0}
      - key: yearly
        charge: window
        rate_limit: {unit: year, requests_per_unit: 7}
      - key: daily
        charge: window
        rate_limit: {unit: day, requests_per_unit: 5}
      - key: minutely
        charge: window
        rate_limit: {unit: minute, requests_per_unit: 5}
`
	opts := Options{DefaultAlgorithm: algorithms.FixedWindow}
	got, err := FromRateLimitConfigs([]*rlsconfv3.RateLimitConfig{resource}, opts)
	require.NoError(t, err)
	want := mustParse(t, file, opts)

	label := `RateLimitConfig "default/eg/http"`
	assert.Equal(t, []string{label}, got.Files())
	assert.Equal(t, []string{"default/eg/http"}, got.Domains())
	wantRules, gotRules := rules(want), rules(got)
	require.Len(t, gotRules, len(wantRules))
	for i := range wantRules {
		assert.Equal(t, label, gotRules[i].File)
		assert.Zero(t, gotRules[i].Line, "a resource has no lines")
		wantRules[i].File, wantRules[i].Line = label, 0
	}
	assert.Equal(t, wantRules, gotRules)
	assert.Equal(t, regexp.MustCompile(`test\.yaml:\d+`).ReplaceAllLiteralString(want.String(), label), got.String(),
		"the same rules, shown without lines")
	assert.NotContains(t, got.String(), label+":", "no line is shown for a resource")

	route := rate.Entry{Key: "httproute/default/backend/rule/0/match/0/*", Value: "httproute/default/backend/rule/0/match/0/*"}
	for _, entries := range [][]rate.Entry{
		{route, {Key: "rule-0-match-0", Value: "rule-0-match-0"}, {Key: "rule-0-match-1", Value: "x"}},
		{route, {Key: "masked_remote_address", Value: "192.0.2.0/24"}, {Key: "remote_address", Value: "192.0.2.7"}},
		{route, {Key: "rule-2-match--1", Value: "rule-2-match--1"}},
		{route, {Key: "internal", Value: "a"}},
		{route, {Key: "blocked", Value: "b"}},
		{route, {Key: "rule-0-match-0", Value: "other"}},
		{{Key: "httproute/default/backend/rule/0/match/0/x", Value: "httproute/default/backend/rule/0/match/0/x"}},
	} {
		wm, wok := want.Match("default/eg/http", entries)
		gm, gok := got.Match("default/eg/http", entries)
		require.Equal(t, wok, gok, "%v", entries)
		if wok {
			assert.Equal(t, wm.Key, gm.Key, "%v", entries)
			assert.Equal(t, wm.MetricKey, gm.MetricKey, "%v", entries)
			assert.Equal(t, wm.Rule.Path, gm.Rule.Path, "%v", entries)
		}
	}
}

// TestFromRateLimitConfigsKeepsEveryString: keys and values reach the rules
// exactly, whatever YAML would make of them unquoted.
func TestFromRateLimitConfigsKeepsEveryString(t *testing.T) {
	values := []string{
		"yes", "no", "on", "~", "null", "true", "0x1F", "1e3", "007", "-", "- a", "a: b", "#x", "&a", "*a",
		"<<", "!tag", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", " leading", "trailing ", "two\nlines",
		"tab\there", "quote\"s'", "ünïcode ✓", strings.Repeat("long value with spaces ", 40), "{a}", "[b]", "|", ">",
	}
	var ds []*rlsconfv3.RateLimitDescriptor
	for _, v := range values {
		ds = append(ds, &rlsconfv3.RateLimitDescriptor{Key: "k " + v, Value: v, RateLimit: policy(1, rlsconfv3.RateLimitUnit_SECOND)})
	}
	c, err := FromRateLimitConfigs([]*rlsconfv3.RateLimitConfig{{Name: "strings", Domain: "d: ~", Descriptors: ds}}, testOptions())
	require.NoError(t, err)
	assert.Equal(t, []string{"d: ~"}, c.Domains())
	for _, v := range values {
		m, ok := c.Match("d: ~", []rate.Entry{{Key: "k " + v, Value: v}})
		require.True(t, ok, "%q", v)
		assert.Equal(t, "d: ~.k "+v+"_"+v, m.Rule.Path, "%q", v)
	}
}

// TestFromRateLimitConfigsErrors: a bad resource is refused with its name
// and the path of the field at fault.
func TestFromRateLimitConfigsErrors(t *testing.T) {
	nested := func(d *rlsconfv3.RateLimitDescriptor) *rlsconfv3.RateLimitConfig {
		return &rlsconfv3.RateLimitConfig{Name: "eg", Domain: "eg", Descriptors: []*rlsconfv3.RateLimitDescriptor{
			{Key: "route", Value: "r", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				{Key: "ok", RateLimit: policy(1, rlsconfv3.RateLimitUnit_SECOND)}, d,
			}},
		}}
	}
	for _, tc := range []struct {
		name      string
		resources []*rlsconfv3.RateLimitConfig
		file      string
		field     string
		msg       string
	}{
		{
			name:      "unknown unit",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Key: "k", RateLimit: policy(5, rlsconfv3.RateLimitUnit_UNKNOWN)})},
			file:      `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1].rate_limit.unit",
			msg: `invalid rate limit unit "UNKNOWN" (want second, minute, hour, day, week, month or year)`,
		},
		{
			name:      "unit out of the enum",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Key: "k", RateLimit: policy(5, rlsconfv3.RateLimitUnit(42))})},
			file:      `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1].rate_limit.unit",
			msg: `invalid rate limit unit "42" (want second, minute, hour, day, week, month or year)`,
		},
		{
			name: "unlimited with a unit",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{
				Unlimited: true, Unit: rlsconfv3.RateLimitUnit_SECOND}})},
			file: `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1].rate_limit.unit",
			msg: "should not specify rate limit unit when unlimited",
		},
		{
			name:      "empty key",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Value: "v"})},
			file:      `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1].key",
			msg: "descriptor has empty key",
		},
		{
			name: "replaces its own name",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{
				Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 1, Name: "n", Replaces: []*rlsconfv3.RateLimitReplace{{Name: "n"}}}})},
			file: `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1].rate_limit.replaces[0].name",
			msg: "replaces should not contain name of same descriptor",
		},
		{
			name:      "duplicate descriptor",
			resources: []*rlsconfv3.RateLimitConfig{nested(&rlsconfv3.RateLimitDescriptor{Key: "ok", RateLimit: policy(2, rlsconfv3.RateLimitUnit_SECOND)})},
			file:      `RateLimitConfig "eg"`, field: "descriptors[0].descriptors[1]",
			msg: `duplicate descriptor: key "ok" and value "" are also those of descriptors[0].descriptors[0]`,
		},
		{
			name:      "empty domain",
			resources: []*rlsconfv3.RateLimitConfig{{Name: "nameless-domain"}},
			file:      `RateLimitConfig "nameless-domain"`, field: "domain",
			msg: "config file cannot have empty domain",
		},
		{
			name:      "duplicate domain",
			resources: []*rlsconfv3.RateLimitConfig{{Name: "a", Domain: "d"}, {Domain: "d"}},
			file:      `RateLimitConfig [1]`, field: "domain",
			msg: `duplicate domain "d" (also in RateLimitConfig "a")`,
		},
		{
			name:      "duplicate name",
			resources: []*rlsconfv3.RateLimitConfig{{Name: "a", Domain: "d"}, {Name: "a", Domain: "e"}},
			file:      `RateLimitConfig "a"`, field: "name",
			msg: "another resource has the same name",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := xdsError(t, tc.resources...)
			assert.Equal(t, tc.file, e.File)
			assert.Zero(t, e.Line, "a resource has no lines")
			assert.Equal(t, tc.field, e.Field)
			assert.Equal(t, tc.msg, e.Msg)
			assert.Equal(t, tc.file+": "+tc.field+": "+tc.msg, e.Error())
		})
	}
}

// TestFromRateLimitConfigsEmpty: no resources, or nil ones, give a Config
// that knows no domain, as an xDS server with no limits to serve sends.
func TestFromRateLimitConfigsEmpty(t *testing.T) {
	for _, resources := range [][]*rlsconfv3.RateLimitConfig{nil, {nil}} {
		c, err := FromRateLimitConfigs(resources, testOptions())
		require.NoError(t, err)
		assert.Empty(t, c.Domains())
		_, ok := c.Match("any", []rate.Entry{{Key: "k", Value: "v"}})
		assert.False(t, ok)
	}
}

// TestFromRateLimitConfigsMergeDomains: with MergeDomains, resources that
// name one domain are merged, as envoyproxy/ratelimit merges them with
// MERGE_DOMAIN_CONFIG (its config_impl.go loadConfig): the top-level
// descriptors of each join one tree, each rule keeps its resource, and a
// top-level key and value given by two of them is an error, as there
// ("duplicate descriptor composite key"). Without MergeDomains they stay
// an error.
func TestFromRateLimitConfigsMergeDomains(t *testing.T) {
	a := &rlsconfv3.RateLimitConfig{Name: "a", Domain: "test-domain", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key1", Value: "value1", RateLimit: policy(10, rlsconfv3.RateLimitUnit_MINUTE)},
		{Key: "ip", Value: "10.*", RateLimit: policy(1, rlsconfv3.RateLimitUnit_SECOND)},
	}}
	b := &rlsconfv3.RateLimitConfig{Name: "b", Domain: "test-domain", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key2", Value: "value2", RateLimit: policy(20, rlsconfv3.RateLimitUnit_MINUTE)},
		{Key: "ip", Value: "10.1.*", RateLimit: policy(2, rlsconfv3.RateLimitUnit_SECOND)},
		// The same key and value one level down is no duplicate.
		{Key: "user", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "key1", Value: "value1", RateLimit: policy(30, rlsconfv3.RateLimitUnit_HOUR)}}},
	}}
	other := &rlsconfv3.RateLimitConfig{Name: "c", Domain: "other", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key1", Value: "value1", RateLimit: policy(40, rlsconfv3.RateLimitUnit_DAY)},
	}}

	e := xdsError(t, a, b)
	assert.Equal(t, `RateLimitConfig "b": domain: duplicate domain "test-domain" (also in RateLimitConfig "a")`, e.Error())

	c, err := FromRateLimitConfigs([]*rlsconfv3.RateLimitConfig{a, other, b}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"other", "test-domain"}, c.Domains())
	for _, tc := range []struct {
		domain string
		pairs  []string
		rpu    uint64
		file   string
	}{
		{"test-domain", []string{"key1=value1"}, 10, `RateLimitConfig "a"`},
		{"test-domain", []string{"key2=value2"}, 20, `RateLimitConfig "b"`},
		{"test-domain", []string{"user=u1", "key1=value1"}, 30, `RateLimitConfig "b"`},
		// The wildcards of the merged level are tried in the order of the
		// resources: a's first.
		{"test-domain", []string{"ip=10.1.1.1"}, 1, `RateLimitConfig "a"`},
		{"other", []string{"key1=value1"}, 40, `RateLimitConfig "c"`},
	} {
		r := ruleAt(t, c, tc.domain, tc.pairs...)
		assert.Equal(t, tc.rpu, r.Limits[0].Limit.Requests, "%s %v", tc.domain, tc.pairs)
		assert.Equal(t, tc.file, r.File, "%s %v", tc.domain, tc.pairs)
	}

	dup := &rlsconfv3.RateLimitConfig{Name: "d", Domain: "test-domain", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "key3", RateLimit: policy(1, rlsconfv3.RateLimitUnit_SECOND)},
		{Key: "key2", Value: "value2", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: policy(1, rlsconfv3.RateLimitUnit_SECOND)}}},
	}}
	_, err = FromRateLimitConfigs([]*rlsconfv3.RateLimitConfig{a, b, dup}, Options{DefaultAlgorithm: testAlgorithm, MergeDomains: true})
	require.Error(t, err)
	assert.Equal(t, `RateLimitConfig "d": descriptors[1]: duplicate descriptor: key "key2" and value "value2" are also those of RateLimitConfig "b" descriptors[0] in the same domain`, err.Error())
}
