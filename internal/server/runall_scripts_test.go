package server

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"    // in proxy.yaml
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3" // in proxy.yaml
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
	"github.com/ratewarden/ratewarden/internal/testkit/rlscripts"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// TestRunAllScripts runs envoyproxy/ratelimit's integration scripts as its
// integration-test/run-all.sh runs them: every script of scripts/, one after
// another in the shell's glob order, against one service and one Redis,
// whose counts the scripts share. Each curl is the call their Envoy
// (examples/envoy/proxy.yaml) makes for it, each `sleep 60` a minute of the
// clock the limiter decides by, and each answer is held to the one
// envoyproxy/ratelimit gives: a fixed window that records every hit, quota
// descriptors included, and forgets its count when the window ends.
//
// The scripts share the quota descriptors (service: service_1) and
// (service: service_2), so each quota script starts with what the one
// before it counted. That makes envoyproxy/ratelimit's own answer to
// token-quota.sh's third request OVER_LIMIT, although the script expects it
// to pass: quota.sh's last request counted a hit of service_2 in the same
// minute. The answers below are the peer's, not the scripts' hopes.
func TestRunAllScripts(t *testing.T) {
	b, err := envoymodel.LoadBootstrap("../../test/testdata/envoyproxy/examples/envoy/proxy.yaml")
	require.NoError(t, err)
	ls, err := envoymodel.HTTPListeners(b)
	require.NoError(t, err)
	require.Len(t, ls, 1)

	for _, be := range scriptBackends {
		t.Run(be.name, func(t *testing.T) {
			env := newScriptEnv(t, be, exampleLimits(t))
			r := &runAll{client: env.client, advance: env.clock.Advance, proxy: ls[0]}
			// run-all.sh's glob order.
			r.multiserviceTokenQuota(t)
			r.quota(t)
			r.replaces(t)
			r.simpleGet(t)
			r.tokenQuota(t)
			r.triggerRatelimit(t)
			r.triggerShadowModeKey(t)
			r.valueIncludedInStatsKeyWhenUnspecified(t)
		})
	}
}

// runAll is one run of run-all.sh: a client of the service, the clock it
// decides by, and their Envoy in front of it.
type runAll struct {
	client  rlsv3.RateLimitServiceClient
	advance func(time.Duration)
	proxy   envoymodel.HTTPListener
}

// curlGap is the time between two curls of a script.
const curlGap = 5 * time.Millisecond

// sleep is a script's `sleep 60`.
func (r *runAll) sleep() { r.advance(time.Minute) }

// call sends the descriptors of domain rl, a curl's worth of time later.
func (r *runAll) call(t *testing.T, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	r.advance(curlGap)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: descs})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(descs))
	return resp
}

// curl sends what their Envoy sends for a GET of path with headers (pairs
// of name and value), and reports whether curl -f succeeds: the answer is
// not OVER_LIMIT.
func (r *runAll) curl(t *testing.T, path string, headers ...string) bool {
	t.Helper()
	h := make(map[string]string)
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	req, err := r.proxy.RateLimitRequest(envoymodel.Request{Path: path, Headers: h})
	require.NoError(t, err)
	require.NotNil(t, req, "%s sends a request", path)
	r.advance(curlGap)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	return resp.GetOverallCode() != codeOver
}

// multiserviceTokenQuota is multiservice-tokenquota.sh: a check of
// service_1 and service_2 with 0 hits; Envoy sends the request to the
// service whose descriptor is the first within its limit (the metadata of
// its rule names it) and charges that service 1 when the stream ends.
// Counts of service_1 and service_2 after each request, minute 0:
//
//	1: both within → service_1   1, 0
//	2: both within → service_1   2, 0
//	3: service_1 over → service_2   2, 1
//	4: → service_2   2, 2
//	5: → service_2   2, 3
//	6: both over → 429, no upstream
//	minute 1: 7: → service_1   1, 0
func (r *runAll) multiserviceTokenQuota(t *testing.T) {
	route := func() string {
		resp := r.call(t, service("service_1", 0), service("service_2", 0))
		if resp.GetOverallCode() == codeOver {
			return ""
		}
		md := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue()
		served := md.GetFields()["service_with_quota"].GetStructValue().GetFields()["name"].GetStringValue()
		require.NotEmpty(t, served, "the answer names a service with quota: %v", resp.GetDynamicMetadata())
		r.call(t, service(served, 1)) // on stream done
		return served
	}
	for i, want := range []string{"service_1", "service_1", "service_2", "service_2", "service_2", ""} {
		assert.Equal(t, want, route(), "multiservice-tokenquota.sh request %d", i+1)
	}
	r.sleep()
	assert.Equal(t, "service_1", route(), "multiservice-tokenquota.sh request 7: the quota buckets are refreshed")
}

// quota is quota.sh: /quota takes a hit of service_1 (1 a minute) and of
// service_2 (2 a minute), both quota_mode; the request is denied only when
// both are over. Minute 1 starts with service_1 at 1, from the script
// before:
//
//	1: 2 over, 1 → OK
//	2: 3 over, 2 → OK
//	3: 4 over, 3 over → OVER_LIMIT
//	minute 2: 4: 1, 1 → OK
func (r *runAll) quota(t *testing.T) {
	over, ok := codeOver, codeOK
	quota := func() *rlsv3.RateLimitResponse {
		return r.call(t, serviceHit("service_1"), serviceHit("service_2"))
	}
	for i, want := range [][]rlsv3.RateLimitResponse_Code{{over, ok}, {over, ok}, {over, over}} {
		resp := quota()
		assert.Equal(t, want, rlstest.Codes(resp), "quota.sh request %d", i+1)
		wantOverall := ok
		if i == 2 {
			wantOverall = over
		}
		assert.Equal(t, wantOverall, resp.GetOverallCode(), "quota.sh request %d", i+1)
	}
	r.sleep()
	resp := quota()
	assert.Equal(t, codeOK, resp.GetOverallCode(), "quota.sh request 4: the quota buckets are refreshed")
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, rlstest.Codes(resp), "quota.sh request 4: counts start again")
}

// replaces is replaces.sh: a limit that replaces another by name takes its
// place in the request.
func (r *runAll) replaces(t *testing.T) {
	for i, step := range rlscripts.Replaces() {
		assert.Equal(t, step.OK, r.curl(t, step.Path, step.Headers...), "replaces.sh curl %d: %s %v", i+1, step.Path, step.Headers)
	}
}

// simpleGet is simple-get.sh.
func (r *runAll) simpleGet(t *testing.T) {
	assert.True(t, r.curl(t, "/twoheader", "foo", "test", "baz", "shady"), "simple-get.sh")
}

// tokenQuota is token-quota.sh: /tokenquota checks service_2 with 0 hits
// and charges it 1 when the stream ends. Minute 2 starts with service_2 at
// 1, from quota.sh's last request:
//
//	1: check 1 → OK; done → 2
//	2: check 2 → OK; done → 3, over
//	3: check 3 → 429 (the script expects this one to pass)
//	4: check 3 → 429
//	minute 3: 5: check 0 → OK
func (r *runAll) tokenQuota(t *testing.T) {
	request := func() bool {
		if r.call(t, service("service_2", 0)).GetOverallCode() == codeOver {
			return false
		}
		r.call(t, service("service_2", 1)) // on stream done
		return true
	}
	for i, want := range []bool{true, true, false, false} {
		assert.Equal(t, want, request(), "token-quota.sh request %d", i+1)
	}
	r.sleep()
	assert.True(t, request(), "token-quota.sh request 5: the quota bucket is refreshed")
}

// triggerRatelimit is trigger-ratelimit.sh: (foo: *), (baz: not-so-shady)
// has 3 a minute.
func (r *runAll) triggerRatelimit(t *testing.T) {
	for i, want := range []bool{true, true, true, false, false} {
		assert.Equal(t, want, r.curl(t, "/twoheader", "foo", "pelle", "baz", "not-so-shady"), "trigger-ratelimit.sh request %d", i+1)
	}
}

// triggerShadowModeKey is trigger-shadow-mode-key.sh: (foo: *), (baz:
// shady) has 3 a minute in shadow mode, so every request passes.
func (r *runAll) triggerShadowModeKey(t *testing.T) {
	for i := range 6 {
		assert.True(t, r.curl(t, "/twoheader", "foo", "pelle", "baz", "shady"), "trigger-shadow-mode-key.sh request %d", i+1)
	}
}

// valueIncludedInStatsKeyWhenUnspecified is
// value-included-in-stats-key-when-unspecified.sh: (unspec: *) has 2 a
// minute.
func (r *runAll) valueIncludedInStatsKeyWhenUnspecified(t *testing.T) {
	for i, want := range []bool{true, true, false} {
		assert.Equal(t, want, r.curl(t, "/unspec", "unspec", "unspecified_value"), "value-included-in-stats-key-when-unspecified.sh request %d", i+1)
	}
}
