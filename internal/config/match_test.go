package config

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/rate"
)

const matchConfig = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: remote_address
    value: "10.1.*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1000}
  - key: remote_address
    value: "10.*"
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: path
    value: "/api/*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: user
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: key
    value: value
    rate_limit: {unit: second, requests_per_unit: 300}
  - key: parent
    rate_limit: {unit: hour, requests_per_unit: 1}
    descriptors:
      - key: child
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: {unit: second, requests_per_unit: 10}
        shadow_mode: true
      - key: user
        value: "tier*"
        share_threshold: true
        descriptors:
          - key: plan
            value_to_metric: true
            rate_limit: {unit: second, requests_per_unit: 20}
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: endpoint
        value: login
        rate_limit: {unit: minute, requests_per_unit: 3}
  - key: listed
    value: quiet
  - key: listed
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: any
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 8}
  - key: any
    rate_limit: {unit: second, requests_per_unit: 9}
`

// entries builds a request descriptor from "key=value" pairs.
func entries(pairs ...string) []rate.Entry {
	var es []rate.Entry
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		es = append(es, rate.Entry{Key: k, Value: v})
	}
	return es
}

func TestMatch(t *testing.T) {
	c := mustParse(t, matchConfig, testOptions())
	tests := []struct {
		name    string
		domain  string
		request []rate.Entry
		// path is the matched rule's Path; "" means no match.
		path string
		// key is Match.Key's entries; nil means the request's.
		key []rate.Entry
		// metric is Match.MetricKey; "" means the rule's Path.
		metric string
	}{
		{name: "key-only", domain: "edge", request: entries("remote_address=1.2.3.4"), path: "edge.remote_address"},
		{name: "exact beats wildcard and key-only", domain: "edge", request: entries("remote_address=50.0.0.5"), path: "edge.remote_address_50.0.0.5"},
		{name: "wildcard beats key-only", domain: "edge", request: entries("remote_address=10.0.0.1"), path: "edge.remote_address_10.*"},
		{name: "the first wildcard that matches wins, and shares its state", domain: "edge", request: entries("remote_address=10.1.2.3"),
			path: "edge.remote_address_10.1.*", key: entries("remote_address=10.1.*")},
		{name: "a value equal to a wildcard's prefix", domain: "edge", request: entries("remote_address=10."), path: "edge.remote_address_10.*"},
		{name: "an empty value falls to key-only", domain: "edge", request: entries("remote_address="), path: "edge.remote_address"},
		{name: "wildcard * matches every value, the empty one too", domain: "edge", request: entries("any="), path: "edge.any_*"},
		{name: "value_to_metric on a wildcard", domain: "edge", request: entries("path=/api/users"),
			path: "edge.path_/api/*", metric: "edge.path_/api/users"},
		{name: "detailed_metric on a key-only node", domain: "edge", request: entries("user=alice"),
			path: "edge.user", metric: "edge.user_alice"},
		{name: "detailed_metric with an empty value", domain: "edge", request: entries("user="), path: "edge.user"},
		{name: "nested", domain: "edge", request: entries("message_type=marketing", "to_number=2061111111"),
			path: "edge.message_type_marketing.to_number"},
		{name: "request shallower than the limit", domain: "edge", request: entries("message_type=marketing")},
		{name: "request deeper than the config", domain: "edge", request: entries("message_type=marketing", "to_number=1", "extra=x")},
		{name: "envoy example 4: two entries do not match a depth-1 limit", domain: "edge", request: entries("key=value", "subkey=subvalue")},
		{name: "envoy example 4: one entry does", domain: "edge", request: entries("key=value"), path: "edge.key_value"},
		{name: "a parent's own limit", domain: "edge", request: entries("parent=p"), path: "edge.parent"},
		{name: "the child under it", domain: "edge", request: entries("parent=p", "child=c"), path: "edge.parent.child"},
		{name: "deeper than the child", domain: "edge", request: entries("parent=p", "child=c", "x=y")},
		{name: "an unknown key under a parent", domain: "edge", request: entries("parent=p", "other=c")},
		{name: "exact under key-only", domain: "edge", request: entries("service=s1", "user=user-a"), path: "edge.service.user_user-a"},
		{name: "no node for this value under the parent", domain: "edge", request: entries("service=s1", "user=bob")},
		{name: "a node without a limit", domain: "edge", request: entries("service=s1")},
		{name: "a shared wildcard in the middle, value_to_metric at the end", domain: "edge",
			request: entries("service=s1", "user=tier-gold", "plan=pro"),
			path:    "edge.service.user_tier*.plan",
			key:     entries("service=s1", "user=tier*", "plan=pro"),
			metric:  "edge.service.user_tier*.plan_pro"},
		{name: "value_to_metric on a key-only parent", domain: "edge", request: entries("tenant=acme", "endpoint=login"),
			path: "edge.tenant.endpoint_login", metric: "edge.tenant_acme.endpoint_login"},
		{name: "an exact node without a limit hides the key-only one", domain: "edge", request: entries("listed=quiet")},
		{name: "other values reach the key-only one", domain: "edge", request: entries("listed=loud"), path: "edge.listed"},
		{name: "an unknown key", domain: "edge", request: entries("nope=1")},
		{name: "keys are case-sensitive", domain: "edge", request: entries("Remote_Address=1.2.3.4")},
		{name: "an unknown domain", domain: "other", request: entries("remote_address=1.2.3.4")},
		{name: "no entries", domain: "edge", request: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := c.Match(tt.domain, tt.request)
			if tt.path == "" {
				assert.False(t, ok)
				assert.Equal(t, Match{}, m)
				return
			}
			require.True(t, ok)
			require.NotNil(t, m.Rule)
			assert.Equal(t, tt.path, m.Rule.Path)
			wantKey := tt.key
			if wantKey == nil {
				wantKey = tt.request
			}
			assert.Equal(t, rate.Key{Domain: tt.domain, Entries: wantKey}, m.Key)
			wantMetric := tt.metric
			if wantMetric == "" {
				wantMetric = tt.path
			}
			assert.Equal(t, wantMetric, m.MetricKey)
			assert.Contains(t, c.Rules(), m.Rule)
		})
	}
}

func TestMatchKeySharing(t *testing.T) {
	c := mustParse(t, matchConfig, testOptions())

	// Without share_threshold the Key holds the request's own entries.
	req := entries("remote_address=1.2.3.4")
	m, ok := c.Match("edge", req)
	require.True(t, ok)
	assert.Same(t, &req[0], &m.Key.Entries[0])

	// With it, a copy, and the request is left alone.
	req = entries("remote_address=10.1.9.9")
	m, ok = c.Match("edge", req)
	require.True(t, ok)
	assert.Equal(t, "10.1.*", m.Key.Entries[0].Value)
	assert.Equal(t, "10.1.9.9", req[0].Value)

	// Every value the shared wildcard matches has one identity.
	other, ok := c.Match("edge", entries("remote_address=10.1.0.1"))
	require.True(t, ok)
	l := m.Rule.Limits[0].Limit
	assert.Equal(t, rate.Identity(m.Key, l), rate.Identity(other.Key, l))
}

func TestMatchUnlimitedAndShadow(t *testing.T) {
	c := mustParse(t, `
domain: internal
descriptors:
  - key: ldap
    rate_limit: {unlimited: true}
  - key: azure
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`, testOptions())
	m, ok := c.Match("internal", entries("ldap=x"))
	require.True(t, ok)
	assert.True(t, m.Rule.Unlimited)
	assert.Empty(t, m.Rule.Limits)
	m, ok = c.Match("internal", entries("azure=y"))
	require.True(t, ok)
	assert.True(t, m.Rule.ShadowMode)
}

func TestMatchConcurrently(t *testing.T) {
	c := mustParse(t, matchConfig, testOptions())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				m, ok := c.Match("edge", entries("service=s", "user=tier-x", fmt.Sprintf("plan=p%d", i)))
				if !assert.True(t, ok) || !assert.Equal(t, fmt.Sprintf("edge.service.user_tier*.plan_p%d", i), m.MetricKey) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// benchConfig has many exact values, several wildcards and a nested branch,
// like a large tenant table.
func benchConfig(b *testing.B) *Config {
	var s strings.Builder
	s.WriteString("domain: bench\ndescriptors:\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&s, "  - {key: tenant, value: t%d, rate_limit: {unit: second, requests_per_unit: 10}}\n", i)
	}
	for _, p := range []string{"a", "ab", "abc", "abcd"} {
		fmt.Fprintf(&s, "  - {key: path, value: \"/%s*\", share_threshold: true, rate_limit: {unit: second, requests_per_unit: 10}}\n", p)
	}
	s.WriteString(`  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: remote
    descriptors:
      - key: path
        descriptors:
          - key: method
            value: GET
            rate_limit: {unit: second, requests_per_unit: 10}
  - key: user
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 10}
`)
	c, err := Parse([]File{{Name: "bench.yaml", Data: []byte(s.String())}}, testOptions())
	require.NoError(b, err)
	return c
}

func BenchmarkMatch(b *testing.B) {
	c := benchConfig(b)
	for _, bc := range []struct {
		name    string
		request []rate.Entry
	}{
		{"exact", entries("tenant=t4242")},
		{"key-only", entries("tenant=unknown")},
		{"wildcard shared", entries("path=/abcdef")},
		{"nested depth 3", entries("remote=1.2.3.4", "path=/x", "method=GET")},
		{"detailed metric", entries("user=alice")},
		{"no match", entries("nothing=here")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Match("bench", bc.request)
			}
		})
	}
}
