package test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestTopology runs the demo's topology (docker-compose.yaml) as processes:
// the real server, on the memory backend and on a 6-node Redis Cluster, is
// sent exactly what Envoy configured by envoy/envoy.yaml sends it for bursts
// of HTTP requests, and answers what docs/envoy.md promises.
func TestTopology(t *testing.T) {
	for _, backend := range []struct {
		name string
		env  func(t *testing.T) map[string]string
	}{
		{"memory", func(t *testing.T) map[string]string { return map[string]string{"RLS_BACKEND": "memory"} }},
		{"redis_cluster", func(t *testing.T) map[string]string {
			return map[string]string{
				"RLS_BACKEND":     "redis",
				"RLS_REDIS_MODE":  "cluster",
				"RLS_REDIS_ADDRS": strings.Join(redistest.SharedCluster(t).Addrs(), ","),
				// The cluster outlives this test: count from nothing.
				"RLS_KEY_PREFIX": fmt.Sprintf("topology-%d:", rand.Uint64()),
			}
		}},
	} {
		t.Run(backend.name, func(t *testing.T) {
			env := backend.env(t)
			// Outcomes, not latency, are under test, on a small shared machine.
			env["RLS_BACKEND_TIMEOUT"] = "2s"
			p := &envoyFront{srv: startServer(t, env), listener: frontProxy(t)}
			t.Run("logins", p.logins)
			t.Run("api_key_burst", p.apiKeyBurst)
			t.Run("limits_by_address", p.limitsByAddress)
		})
	}
}

// envoyFront plays Envoy's rate limit filter configured by envoy/envoy.yaml
// in front of a real server.
type envoyFront struct {
	srv      *serverProcess
	listener envoymodel.HTTPListener
}

// envoyExchange is one HTTP request through the proxy: what Envoy sent to the
// server, and the answer.
type envoyExchange struct {
	req  *rlsv3.RateLimitRequest
	resp *rlsv3.RateLimitResponse
}

// send sends what Envoy sends for an HTTP request and returns the answer.
func (p *envoyFront) send(t *testing.T, r envoymodel.Request) envoyExchange {
	t.Helper()
	req, err := p.listener.RateLimitRequest(r)
	require.NoError(t, err)
	require.NotNil(t, req, "Envoy asks about every request")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := p.srv.Client.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(req.GetDescriptors()), "one status per descriptor")
	return envoyExchange{req, resp}
}

// httpStatus is the status Envoy answers with: 429 when over the limit,
// else the upstream's 200.
func (e envoyExchange) httpStatus() int {
	if e.resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return 429
	}
	return 200
}

// status returns the status of the descriptor rendered as "k=v,k=v".
func (e envoyExchange) status(t *testing.T, descriptor string) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	sent := envoymodel.Describe(e.req.GetDescriptors())
	if i := slices.Index(sent, descriptor); i >= 0 {
		return e.resp.GetStatuses()[i]
	}
	t.Fatalf("Envoy sent no descriptor %s, only %q", descriptor, sent)
	return nil
}

// overOnly checks that the descriptor is the one over the limit and every
// other descriptor is OK.
func (e envoyExchange) overOnly(t *testing.T, descriptor string) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	over := e.status(t, descriptor)
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, over.GetCode())
	for _, st := range e.resp.GetStatuses() {
		if st != over {
			assert.Equal(t, rlsv3.RateLimitResponse_OK, st.GetCode())
		}
	}
	return over
}

// retryAfter returns the retry-after header the server asks Envoy to add.
func (e envoyExchange) retryAfter(t *testing.T) string {
	t.Helper()
	for _, h := range e.resp.GetResponseHeadersToAdd() {
		if strings.EqualFold(h.GetKey(), "retry-after") {
			return h.GetValue()
		}
	}
	t.Fatalf("no retry-after header in %v", e.resp.GetResponseHeadersToAdd())
	return ""
}

// retryAfterSeconds is a wait rounded up to whole seconds, at least 1: a
// Retry-After that a client can honour.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// logins: five logins from one address in a minute are admitted, the sixth
// is denied until the first is a minute old, with or without a query
// string, and other addresses are not affected.
func (p *envoyFront) logins(t *testing.T) {
	client := netip.MustParseAddr("192.0.2.10")
	login := envoymodel.Request{Method: "POST", Path: "/login", RemoteAddress: client, Headers: map[string]string{"x-api-key": "login-key"}}
	const descriptor = "path=/login,remote_address=192.0.2.10"

	start := time.Now()
	for i := 1; i <= 5; i++ {
		e := p.send(t, login)
		require.Equal(t, 200, e.httpStatus(), "login %d", i)
		st := e.status(t, descriptor)
		assert.EqualValues(t, 5, st.GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit())
		assert.EqualValues(t, 5-i, st.GetLimitRemaining(), "login %d", i)
	}
	e := p.send(t, login)
	elapsed := time.Since(start)
	require.Equal(t, 429, e.httpStatus(), "the sixth login in a minute")
	st := e.overOnly(t, descriptor)
	wait := st.GetDurationUntilReset().AsDuration()
	// The first login was admitted after start, so it leaves the window
	// less than a minute from now, and no sooner than a minute after start.
	assert.LessOrEqual(t, wait, time.Minute)
	assert.GreaterOrEqual(t, wait, time.Minute-elapsed)
	assert.Equal(t, retryAfterSeconds(wait), e.retryAfter(t))
	t.Logf("sixth login: 429, duration_until_reset %s, retry-after %s", wait, e.retryAfter(t))

	withQuery := login
	withQuery.Path = "/login?next=%2Fhome"
	withQuery.Headers = nil
	require.Equal(t, 429, p.send(t, withQuery).httpStatus(), "a query string does not dodge the login limit")

	other := login
	other.RemoteAddress = netip.MustParseAddr("192.0.2.11")
	require.Equal(t, 200, p.send(t, other).httpStatus(), "another address logs in")
	home := login
	home.Path = "/"
	require.Equal(t, 200, p.send(t, home).httpStatus(), "the address may still use other paths")
}

// apiKeyBurst: one API key gets a burst of 20, then is denied until a token
// refills (10 a second).
func (p *envoyFront) apiKeyBurst(t *testing.T) {
	key := fmt.Sprintf("burst-%d", rand.Uint64())
	req := envoymodel.Request{Path: "/", RemoteAddress: netip.MustParseAddr("192.0.2.20"), Headers: map[string]string{"x-api-key": key}}
	descriptor := "api_key=" + key

	start := time.Now()
	admitted := 0
	var denied envoyExchange
	for range 100 {
		e := p.send(t, req)
		if e.httpStatus() == 429 {
			denied = e
			break
		}
		admitted++
	}
	elapsed := time.Since(start)
	require.NotNil(t, denied.resp, "the burst is cut off")
	// The bucket holds 20 and refills one token every 100ms while the burst
	// runs; on an idle machine the 21st request is the first denied.
	assert.GreaterOrEqual(t, admitted, 20)
	assert.LessOrEqual(t, admitted, 20+int(elapsed/(100*time.Millisecond))+1, "admitted in %s", elapsed)
	t.Logf("API key burst: %d admitted in %s, request %d denied", admitted, elapsed, admitted+1)

	st := denied.overOnly(t, descriptor)
	assert.Equal(t, "api_key_per_second", st.GetCurrentLimit().GetName())
	assert.EqualValues(t, 10, st.GetCurrentLimit().GetRequestsPerUnit())
	assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_SECOND, st.GetCurrentLimit().GetUnit())
	assert.EqualValues(t, 0, st.GetLimitRemaining())
	wait := st.GetDurationUntilReset().AsDuration()
	assert.Greater(t, wait, time.Duration(0))
	assert.LessOrEqual(t, wait, 100*time.Millisecond, "one token refills within 100ms")
	assert.Equal(t, "1", denied.retryAfter(t))

	other := req
	other.Headers = map[string]string{"x-api-key": key + "-other"}
	require.Equal(t, 200, p.send(t, other).httpStatus(), "another key from the same address")
}

// limitsByAddress: each descriptor Envoy sends meets the limit
// config/edge.yaml gives it.
func (p *envoyFront) limitsByAddress(t *testing.T) {
	type limit struct {
		name       string
		rpu        uint32
		unit       rlsv3.RateLimitResponse_RateLimit_Unit
		multiplier uint32
	}
	second := rlsv3.RateLimitResponse_RateLimit_SECOND
	for _, tc := range []struct {
		name string
		req  envoymodel.Request
		want map[string]limit
	}{
		{"client", envoymodel.Request{Path: "/search?q=envoy", RemoteAddress: netip.MustParseAddr("192.0.2.30")}, map[string]limit{
			"remote_address=192.0.2.30":              {rpu: 50, unit: second},
			"path=/search,remote_address=192.0.2.30": {rpu: 100, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, multiplier: 5},
			"generic_key=upstream":                   {rpu: 1000, unit: second},
		}},
		{"partner network", envoymodel.Request{Path: "/", RemoteAddress: netip.MustParseAddr("10.1.2.3"), Headers: map[string]string{"x-api-key": "partner"}}, map[string]limit{
			"remote_address=10.1.2.3": {rpu: 500, unit: second},
			"api_key=partner":         {name: "api_key_per_second", rpu: 10, unit: second},
			"generic_key=upstream":    {rpu: 1000, unit: second},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.send(t, tc.req)
			require.Equal(t, 200, e.httpStatus())
			require.Len(t, e.req.GetDescriptors(), len(tc.want))
			for d, want := range tc.want {
				cl := e.status(t, d).GetCurrentLimit()
				require.NotNil(t, cl, "descriptor %s is limited", d)
				got := limit{cl.GetName(), cl.GetRequestsPerUnit(), cl.GetUnit(), cl.GetUnitMultiplier().GetValue()}
				assert.Equal(t, want, got, "descriptor %s", d)
			}
		})
	}
}

// TestTopologyDemoScript runs scripts/demo-burst.sh against a stand-in for
// the demo's Envoy: an HTTP server that asks the real server what Envoy
// configured by envoy/envoy.yaml asks, and answers as Envoy's rate limit
// filter does: 429 with the service's headers when over the limit, and the
// X-RateLimit-* headers of DRAFT_VERSION_03 either way.
func TestTopologyDemoScript(t *testing.T) {
	redistest.NeedProgram(t, "curl", "apt-get install curl") // scripts/demo-burst.sh calls it
	p := &envoyFront{srv: startServer(t, map[string]string{"RLS_BACKEND": "memory"}), listener: frontProxy(t)}
	var mu sync.Mutex
	var failures []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.serveHTTP(w, r); err != nil {
			mu.Lock()
			failures = append(failures, err.Error())
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	defer front.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/demo-burst.sh")
	cmd.Env = append(cmd.Environ(), "ENVOY_URL="+front.URL)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("scripts/demo-burst.sh:\n%s", out)
	mu.Lock()
	assert.Empty(t, failures)
	mu.Unlock()

	sections := strings.Split(string(out), "== ")
	require.Len(t, sections, 3, "two bursts")
	line := regexp.MustCompile(`(?m)^\s*(\d+)  (\d{3})  (.*)$`)
	logins := line.FindAllStringSubmatch(sections[1], -1)
	require.Len(t, logins, 7)
	for i, l := range logins {
		assert.Regexp(t, `(?i)x-ratelimit-limit: 5, .*x-ratelimit-remaining: \d+ x-ratelimit-reset: \d+`, l[3], "login %d", i+1)
		if i < 5 {
			assert.Equal(t, "200", l[2], "login %d", i+1)
			assert.NotRegexp(t, `(?i)retry-after`, l[3], "login %d", i+1)
		} else {
			assert.Equal(t, "429", l[2], "login %d", i+1)
			assert.Regexp(t, `(?i)retry-after: (5[0-9]|60)`, l[3], "login %d", i+1)
		}
	}
	burst := line.FindAllStringSubmatch(sections[2], -1)
	require.Len(t, burst, 25)
	for i, l := range burst[:20] {
		assert.Equal(t, "200", l[2], "API key request %d: the bucket holds 20", i+1)
	}
}

// serveHTTP answers one request as the demo's Envoy would, with a 200 from
// the upstream when the request is within its limits.
func (p *envoyFront) serveHTTP(w http.ResponseWriter, r *http.Request) error {
	addr, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return err
	}
	req := envoymodel.Request{Method: r.Method, Authority: r.Host, Path: r.URL.RequestURI(), RemoteAddress: addr.Addr(), Headers: map[string]string{}}
	for name := range r.Header {
		req.Headers[strings.ToLower(name)] = r.Header.Get(name)
	}
	rlr, err := p.listener.RateLimitRequest(req)
	if err != nil {
		return err
	}
	resp, err := p.srv.Client.ShouldRateLimit(r.Context(), rlr)
	if err != nil {
		return err
	}
	for k, v := range draft03Headers(resp.GetStatuses()) {
		w.Header().Set(k, v)
	}
	if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		for _, h := range resp.GetResponseHeadersToAdd() {
			w.Header().Set(h.GetKey(), h.GetValue())
		}
		w.Header().Set("x-envoy-ratelimited", "true")
		w.WriteHeader(http.StatusTooManyRequests)
		return nil
	}
	fmt.Fprintln(w, "hello from the upstream")
	return nil
}

// draft03Headers returns the X-RateLimit-* headers Envoy derives from the
// statuses with enable_x_ratelimit_headers: DRAFT_VERSION_03: the limit,
// remaining and reset of the status with the fewest remaining, and every
// limit's quota policy.
func draft03Headers(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) map[string]string {
	windows := map[rlsv3.RateLimitResponse_RateLimit_Unit]int{
		rlsv3.RateLimitResponse_RateLimit_SECOND: 1, rlsv3.RateLimitResponse_RateLimit_MINUTE: 60,
		rlsv3.RateLimitResponse_RateLimit_HOUR: 3600, rlsv3.RateLimitResponse_RateLimit_DAY: 86400,
	}
	var min *rlsv3.RateLimitResponse_DescriptorStatus
	var policy strings.Builder
	for _, st := range statuses {
		cl := st.GetCurrentLimit()
		if cl == nil {
			continue
		}
		if min == nil || st.GetLimitRemaining() < min.GetLimitRemaining() {
			min = st
		}
		if w := windows[cl.GetUnit()]; w > 0 {
			fmt.Fprintf(&policy, ", %d;w=%d", cl.GetRequestsPerUnit(), w)
			if cl.GetName() != "" {
				fmt.Fprintf(&policy, ";name=%q", cl.GetName())
			}
		}
	}
	if min == nil {
		return nil
	}
	return map[string]string{
		"x-ratelimit-limit":     fmt.Sprint(min.GetCurrentLimit().GetRequestsPerUnit(), policy.String()),
		"x-ratelimit-remaining": fmt.Sprint(min.GetLimitRemaining()),
		"x-ratelimit-reset":     fmt.Sprint(min.GetDurationUntilReset().GetSeconds()),
	}
}
