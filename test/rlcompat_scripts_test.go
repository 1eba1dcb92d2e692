package test

// envoyproxy/ratelimit's Envoy integration scripts (integration-test/ in
// that project) against the server binary: their example limits
// (examples/ratelimit/config) under RUNTIME_ROOT, the environment of their
// Compose file, and for each curl through their Envoy
// (examples/envoy/proxy.yaml) the call Envoy makes for it. Their Envoy
// answers 429 when the answer is OVER_LIMIT, and curl -f fails on it.

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"    // in proxy.yaml
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3" // in proxy.yaml
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlscripts"
)

// rlProxy is their Envoy in front of a server.
type rlProxy struct {
	t        *testing.T
	s        rlServer
	listener envoymodel.HTTPListener
}

// startRLProxy starts a server as their Compose file runs it, with a Redis
// of its own (their scripts share one, and sleep a minute where one needs
// fresh windows; each script here starts with empty ones instead).
func startRLProxy(t *testing.T) *rlProxy {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("testdata", "envoyproxy", "examples", "ratelimit", "config")
	require.NoError(t, os.CopyFS(filepath.Join(root, "ratelimit", "config"), os.DirFS(src)))
	// Their Compose file's environment, but statsd: USE_PROMETHEUS
	// instead, where their last script reads the statsd exporter.
	env := map[string]string{
		"USE_PROMETHEUS":       "true",
		"PROMETHEUS_ADDR":      "127.0.0.1:0",
		"LOG_LEVEL":            "debug",
		"REDIS_SOCKET_TYPE":    "tcp",
		"REDIS_URL":            redistest.Standalone(t).Addr(),
		"RUNTIME_ROOT":         root,
		"RUNTIME_SUBDIRECTORY": "ratelimit",
		"RUNTIME_WATCH_ROOT":   "false",
		"RLS_BACKEND_TIMEOUT":  "5s", // as in rlDefaultEnv
	}
	env = with(env, rlResponseDynamicMetadata...)
	b, err := envoymodel.LoadBootstrap("testdata/envoyproxy/examples/envoy/proxy.yaml")
	require.NoError(t, err)
	ls, err := envoymodel.HTTPListeners(b)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	return &rlProxy{t: t, s: startRLServer(t, env), listener: ls[0]}
}

// curl sends what their Envoy sends for a GET of path with headers, and
// returns the answer.
func (p *rlProxy) curl(path string, headers ...string) *rlsv3.RateLimitResponse {
	p.t.Helper()
	h := make(map[string]string)
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	req, err := p.listener.RateLimitRequest(envoymodel.Request{Path: path, Headers: h})
	require.NoError(p.t, err)
	require.NotNil(p.t, req)
	return p.s.call(p.t, req).resp
}

// ok reports whether curl -f succeeds: the answer is not OVER_LIMIT.
func ok(resp *rlsv3.RateLimitResponse) bool { return resp.GetOverallCode() != rlOver }

// TestRLScriptSimpleGet is their simple-get.sh.
func TestRLScriptSimpleGet(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	assert.True(t, ok(p.curl("/twoheader", "foo", "test", "baz", "shady")))
}

// TestRLScriptTriggerRatelimit is their trigger-ratelimit.sh: (foo: *),
// (baz: not-so-shady) has 3 a minute.
func TestRLScriptTriggerRatelimit(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	for i := range 3 {
		assert.True(t, ok(p.curl("/twoheader", "foo", "pelle", "baz", "not-so-shady")), "request %d: rate limit should not trigger yet", i+1)
	}
	assert.False(t, ok(p.curl("/twoheader", "foo", "pelle", "baz", "not-so-shady")), "rate limiting should fail the request")
	assert.False(t, ok(p.curl("/twoheader", "foo", "pelle", "baz", "not-so-shady")), "this should trigger a ratelimit")
}

// TestRLScriptTriggerShadowModeKey is their trigger-shadow-mode-key.sh:
// (foo: *), (baz: shady) has 3 a minute in shadow mode, so five requests
// pass. Their last check reads x-ratelimit-remaining and fails when it is
// "0", but compares the header's value with its carriage return, so it
// cannot fail; ratewarden's remaining there is 0, as theirs is (the three
// hits of the limit are spent, and ratewarden counts no denied hit).
func TestRLScriptTriggerShadowModeKey(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	for i := range 5 {
		assert.True(t, ok(p.curl("/twoheader", "foo", "pelle", "baz", "shady")), "request %d: shadow mode key should not trigger an error", i+1)
	}
	resp := p.curl("/twoheader", "foo", "pelle", "baz", "shady")
	assert.True(t, ok(resp))
	require.Len(t, resp.GetStatuses(), 1)
	assert.Equal(t, rlOK, resp.GetStatuses()[0].GetCode())
	assert.Zero(t, resp.GetStatuses()[0].GetLimitRemaining())
}

// TestRLScriptReplaces is their replaces.sh: a limit that replaces another
// by name takes its place in the request, and leaves it in force for the
// requests that do not match the replacing rule.
func TestRLScriptReplaces(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 5*time.Second)
	for i, step := range rlscripts.Replaces() {
		assert.Equal(t, step.OK, ok(p.curl(step.Path, step.Headers...)), "curl %d: %s %v", i+1, step.Path, step.Headers)
	}
}

// TestRLScriptValueIncludedInStatsKeyWhenUnspecified is their
// value-included-in-stats-key-when-unspecified.sh: (unspec: *) has 2 a
// minute with detailed_metric, so its over_limit counter is named after
// the value.
func TestRLScriptValueIncludedInStatsKeyWhenUnspecified(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	assert.True(t, ok(p.curl("/unspec", "unspec", "unspecified_value")))
	assert.True(t, ok(p.curl("/unspec", "unspec", "unspecified_value")), "these should not be rate limited")
	assert.False(t, ok(p.curl("/unspec", "unspec", "unspecified_value")), "this should be a ratelimited call")
	assert.Equal(t, 1.0, p.s.rlMetrics(t).of(metrics.RatelimitOverLimit, `domain="rl",key1="unspec_unspecified_value"`), "over_limit should be 1")
}

// The quota scripts' routes set their descriptors in typed_per_filter_config,
// which the envoy package does not model: these are the descriptors their
// generic_key actions make. What the scripts check after sleeping a minute
// is held with a clock in internal/server (quota_mode_scripts_test.go).

// serviceDescriptor is (service: name), with a descriptor hits_addend when
// hits is not nil.
func serviceDescriptor(name string, hits *uint64) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "service", Value: name}}}
	if hits != nil {
		d.HitsAddend = wrapperspb.UInt64(*hits)
	}
	return d
}

// call sends descriptors of domain rl.
func (p *rlProxy) call(descriptors ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := p.s.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: descriptors})
	require.NoError(p.t, err)
	return resp
}

// TestRLScriptQuota is their quota.sh, up to its minute of sleep: /quota
// takes a hit of (service: service_1), 1 a minute, and (service:
// service_2), 2 a minute, both quota_mode; the third request is refused.
func TestRLScriptQuota(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	quota := func() *rlsv3.RateLimitResponse {
		return p.call(serviceDescriptor("service_1", nil), serviceDescriptor("service_2", nil))
	}
	assert.True(t, ok(quota()))
	assert.True(t, ok(quota()), "quota limit should not trigger yet")
	assert.False(t, ok(quota()), "quota limiting should fail the request")
}

// TestRLScriptTokenQuota is their token-quota.sh, up to its minute of
// sleep: /tokenquota checks (service: service_2) with 0 hits, and charges
// it 1 when the stream ends.
func TestRLScriptTokenQuota(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	zero, one := uint64(0), uint64(1)
	request := func() bool {
		if !ok(p.call(serviceDescriptor("service_2", &zero))) {
			return false
		}
		p.call(serviceDescriptor("service_2", &one)) // on stream done
		return true
	}
	for i := range 3 {
		assert.True(t, request(), "request %d: quota limit should not trigger yet", i+1)
	}
	assert.False(t, request(), "quota limiting should fail the request")
}

// TestRLScriptMultiserviceTokenQuota is their multiservice-tokenquota.sh,
// up to its minute of sleep: /multiservice-tokenquota checks service_1 and
// service_2 with 0 hits, sends the request to the service the answer's
// dynamic metadata names (service_with_quota.name, of the descriptors
// within their limits, the first first), and charges that service 1 when
// the stream ends.
func TestRLScriptMultiserviceTokenQuota(t *testing.T) {
	t.Parallel()
	p := startRLProxy(t)
	awayFromBoundary(time.Minute, 3*time.Second)
	zero, one := uint64(0), uint64(1)
	request := func() string {
		resp := p.call(serviceDescriptor("service_1", &zero), serviceDescriptor("service_2", &zero))
		if !ok(resp) {
			return ""
		}
		md := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue()
		served := md.GetFields()["service_with_quota"].GetStructValue().GetFields()["name"].GetStringValue()
		require.NotEmpty(t, served, "the answer names a service with quota: %v", resp.GetDynamicMetadata())
		p.call(serviceDescriptor(served, &one)) // on stream done
		return served
	}
	for i, want := range []string{"service_1", "service_1", "service_2", "service_2", "service_2", ""} {
		assert.Equal(t, want, request(), "request %d", i+1)
	}
}
