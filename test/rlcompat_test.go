package test

// envoyproxy/ratelimit's own integration expectations
// (test/integration/integration_test.go and xds_sotw_integration_test.go in
// that project), held against the real server binary, started with that
// project's environment variables, its limits files
// (testdata/envoyproxy/test/integration/runtime) and real redis-servers:
// standalone, with a password, over TLS, a Redis Cluster and Sentinel.
//
// Each request and each expected answer is theirs. Where ratewarden answers
// otherwise on purpose, the expectation is adjusted in one named place
// (assertRL, and the rlDiffers* helpers), each a row of the table in
// "Answers that differ" of docs/migrating.md, or of its table of variables
// where a variable is not read, and ratewarden's own answer is asserted
// instead, exactly where it can be, so that the test fails when either
// drifts.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// Their codes and units, short.
const (
	rlOK     = rlsv3.RateLimitResponse_OK
	rlOver   = rlsv3.RateLimitResponse_OVER_LIMIT
	rlSecond = rlsv3.RateLimitResponse_RateLimit_SECOND
	rlMinute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	rlHour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	rlDay    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// rlRedisPassword is the password of every Redis their tests start with one.
const rlRedisPassword = "password123"

// rlRuntimeRoot returns their RuntimePath, runtime/current, holding
// ratelimit/config/{another,basic,share_threshold}.yaml and
// ratelimit/reload.yaml. With writable it is a copy the test may change.
func rlRuntimeRoot(t *testing.T, writable bool) string {
	t.Helper()
	src, err := filepath.Abs("testdata/envoyproxy/test/integration/runtime/current")
	require.NoError(t, err)
	if !writable {
		return src
	}
	dst := filepath.Join(t.TempDir(), "runtime", "current")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

// rlDefaultEnv is their defaultSettings and makeSimpleRedisSettings as
// environment variables: limits under RUNTIME_ROOT, statsd off, a Redis at
// redisURL, and, for the per-second Redis they may turn on, perSecondURL.
//
// Two variables are added. USE_PROMETHEUS (theirs) exports their metric
// names, which their tests read from the in-process stats store: on
// /metrics of the HTTP port, where the tests read them, and on
// PROMETHEUS_ADDR, a port the kernel picks. RLS_BACKEND_TIMEOUT gives each
// request without a deadline seconds rather than the default 1s, because
// this machine is shared with compilers: what is under test is what the
// server answers, not how fast.
func rlDefaultEnv(root, redisURL, perSecondURL string) map[string]string {
	return map[string]string{
		"USE_STATSD":                  "false",
		"RUNTIME_ROOT":                root,
		"RUNTIME_SUBDIRECTORY":        "ratelimit",
		"RUNTIME_APPDIRECTORY":        "config",
		"REDIS_SOCKET_TYPE":           "tcp",
		"REDIS_PERSECOND_SOCKET_TYPE": "tcp",
		"BACKEND_TYPE":                "redis",
		"REDIS_URL":                   redisURL,
		"REDIS_PERSECOND_URL":         perSecondURL,
		"USE_PROMETHEUS":              "true",
		"PROMETHEUS_ADDR":             "127.0.0.1:0",
		"RLS_BACKEND_TIMEOUT":         "5s",
	}
}

// with returns env with more variables.
func with(env map[string]string, more ...string) map[string]string {
	out := make(map[string]string, len(env)+len(more)/2)
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		out[more[i]] = more[i+1]
	}
	return out
}

// rlVariant is one of their settings for testBasicBaseConfig.
type rlVariant struct {
	name string
	env  map[string]string
	// localCache: LOCAL_CACHE_SIZE_IN_BYTES > 0, and the descriptors' keys
	// end in _local (their getCacheKey).
	localCache bool
	// stopIncrement: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT.
	stopIncrement bool
}

// rlVariants returns their nine variants of testBasicConfig, as the
// variables each adds: with and without the per-second Redis, with and
// without the local cache and STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, and
// with a cache key prefix.
func rlVariants() []rlVariant {
	v := func(name string, perSecond bool, cache int, stop bool, more ...string) rlVariant {
		env := with(nil, "REDIS_PERSECOND", strconv.FormatBool(perSecond), "LOCAL_CACHE_SIZE_IN_BYTES", strconv.Itoa(cache))
		if stop {
			env["STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"] = "true"
		}
		return rlVariant{name: name, env: with(env, more...), localCache: cache > 0, stopIncrement: stop}
	}
	return []rlVariant{
		v("WithoutPerSecondRedis", false, 0, false),
		v("WithPerSecondRedis", true, 0, false),
		v("WithoutPerSecondRedisWithLocalCache", false, 1000, false),
		v("WithPerSecondRedisWithLocalCache", true, 1000, false),
		v("WithoutPerSecondRedisWithCachePrefix", false, 0, false, "CACHE_KEY_PREFIX", "prefix:"),
		v("WithoutPerSecondRedisWithstopCacheKeyIncrementWhenOverlimitConfig", false, 0, true),
		v("WithPerSecondRedisWithstopCacheKeyIncrementWhenOverlimitConfig", true, 0, true),
		v("WithoutPerSecondRedisWithLocalCacheAndstopCacheKeyIncrementWhenOverlimitConfig", false, 1000, true),
		v("WithPerSecondRedisWithLocalCacheAndstopCacheKeyIncrementWhenOverlimitConfig", true, 1000, true),
	}
}

// rlServer is a server under their expectations, with its metrics.
type rlServer struct {
	*serverProcess
	// peer reports that its limits count as envoyproxy/ratelimit counts
	// them, as limits that come over xDS do: in fixed windows (admitted hits
	// are replenished at the end of their window, and denied ones wait for
	// it), with every hit recorded, a denied request's too.
	peer bool
}

// startRLServer starts the server binary with env, their variables, and
// waits until it is ready.
func startRLServer(t *testing.T, env map[string]string) rlServer {
	t.Helper()
	srv := startServerAt(t, "", env)
	require.Eventually(t, func() bool { return srv.Serving(context.Background()) }, 20*time.Second, 10*time.Millisecond,
		"the server becomes ready with its limits loaded")
	return rlServer{serverProcess: srv, peer: env["CONFIG_TYPE"] == "GRPC_XDS_SOTW"}
}

// rlRequest is their common.NewRateLimitRequest.
func rlRequest(domain string, descriptors [][][2]string, hitsAddend uint32) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hitsAddend}
	for _, d := range descriptors {
		desc := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range d {
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

// rlCall is one ShouldRateLimit call and when it was made.
type rlCall struct {
	resp          *rlsv3.RateLimitResponse
	before, after time.Time
	peer          bool // the limits count as the peer's do (rlServer.peer)
}

// call sends req and returns the answer, failing the test on an error.
func (s rlServer) call(t *testing.T, req *rlsv3.RateLimitRequest) rlCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := rlCall{before: time.Now(), peer: s.peer}
	resp, err := s.Client.ShouldRateLimit(ctx, req)
	c.after = time.Now()
	require.NoError(t, err)
	c.resp = resp
	return c
}

// rlMetrics are their counters, as the server exports them under their
// names with USE_PROMETHEUS.
type rlMetrics map[string]float64

// rlMetrics scrapes the server's counters.
func (s rlServer) rlMetrics(t *testing.T) rlMetrics {
	t.Helper()
	return scrapeMetrics(t, s.serverProcess)
}

// of returns one counter of a rule: name is metrics.RatelimitTotalHits, ...,
// and labels the series' labels (domain="basic",key1="key1").
func (m rlMetrics) of(name, labels string) float64 {
	return m[name+"{"+labels+"}"]
}

// rlStatus is their newDescriptorStatus, less the duration (see rlAnswer).
func rlStatus(code rlsv3.RateLimitResponse_Code, requestsPerUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:           code,
		CurrentLimit:   &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: requestsPerUnit, Unit: unit},
		LimitRemaining: remaining,
	}
}

// unitLength is the window of a unit.
func unitLength(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	switch u {
	case rlSecond:
		return time.Second
	case rlMinute:
		return time.Minute
	case rlHour:
		return time.Hour
	case rlDay:
		return 24 * time.Hour
	}
	panic(fmt.Sprintf("unit %v", u))
}

// assertRL asserts that the answer to c is their expected response want,
// as AssertProtoEqual does, but for what ratewarden answers otherwise on
// purpose:
//
//   - duration_until_reset: they take each status's duration from the
//     answer, cut to whole seconds, so they demand whole seconds and check
//     no value. ratewarden's durations are exact to the microsecond, and
//     with the default algorithm (sliding_window_counter) an admitted hit
//     leaves its limit fully replenished at the end of the window after
//     this one: that is asserted, to the microsecond, against the clock of
//     the call. A denied status must wait past the end of this window and
//     at most to the end of the next (see rlDeniedWait). In fixed windows
//     (limits from xDS), both end with this window, as theirs do.
//   - an OVER_LIMIT answer carries a retry-after header, the longest wait
//     of its denied statuses in whole seconds, rounded up, before any
//     other header.
func assertRL(t *testing.T, want *rlsv3.RateLimitResponse, c rlCall, msgAndArgs ...any) {
	t.Helper()
	got := c.resp
	want = proto.Clone(want).(*rlsv3.RateLimitResponse)
	if len(want.GetStatuses()) == len(got.GetStatuses()) {
		var longest time.Duration
		for i, w := range want.GetStatuses() {
			g := got.GetStatuses()[i]
			if w.GetCurrentLimit() == nil || g.GetDurationUntilReset() == nil {
				continue
			}
			d := g.GetDurationUntilReset().AsDuration()
			window := unitLength(w.GetCurrentLimit().GetUnit())
			if w.GetCode() == rlOver {
				rlDeniedWait(t, d, window, c, msgAndArgs...)
				longest = max(longest, d)
			} else {
				rlAdmittedWait(t, d, window, c, msgAndArgs...)
			}
			w.DurationUntilReset = durationpb.New(d)
		}
		if want.GetOverallCode() == rlOver {
			secs := max(1, int64(math.Ceil(longest.Seconds())))
			want.ResponseHeadersToAdd = append([]*corev3.HeaderValue{retryAfter(secs)}, want.ResponseHeadersToAdd...)
		}
	}
	if !proto.Equal(want, got) {
		assert.Fail(t, fmt.Sprintf("These two protobuf messages are not equal:\nexpected: %v\nactual:   %v", want, got), msgAndArgs...)
	}
}

// rlAdmittedWait asserts that d, the duration_until_reset of a status
// whose hits were admitted in a window of length w, ends with the window
// after the one the call was decided in: d = (⌊t/w⌋ + 2)·w − t for some
// time t between the call's start and its end, to the microsecond.
func rlAdmittedWait(t *testing.T, d, w time.Duration, c rlCall, msgAndArgs ...any) {
	t.Helper()
	const tol = time.Millisecond // the server's clock reads microseconds
	ends := int64(2)             // the window after the call's
	if c.peer {
		ends = 1 // the call's own
	}
	for _, at := range []time.Time{c.before, c.after} {
		k := at.UnixNano() / int64(w)
		decided := time.Unix(0, (k+ends)*int64(w)-int64(d)) // the t that gives d in window k
		if !decided.Before(c.before.Add(-tol)) && !decided.After(c.after.Add(tol)) {
			return
		}
	}
	assert.Fail(t, fmt.Sprintf("duration_until_reset %v of an admitted hit in a %v window (counted as the peer counts: %t) does not end where it should for a call between %v and %v",
		d, w, c.peer, c.before.Format(time.StampMicro), c.after.Format(time.StampMicro)), msgAndArgs...)
}

// rlDeniedWait asserts that d, the duration_until_reset of a denied status
// of a window of length w whose count reached its limit in the window the
// call was decided in, ends after that window and no later than the next:
// the previous window's weight has to slide out far enough to admit a hit.
func rlDeniedWait(t *testing.T, d, w time.Duration, c rlCall, msgAndArgs ...any) {
	t.Helper()
	const tol = time.Millisecond
	k0, k1 := c.before.UnixNano()/int64(w), c.after.UnixNano()/int64(w)
	ends := int64(2)
	if c.peer {
		ends = 1
	}
	low := time.Unix(0, (k0+1)*int64(w)).Sub(c.after) - tol
	high := time.Unix(0, (k1+ends)*int64(w)).Sub(c.before) + tol
	assert.True(t, d > low && d <= high, append([]any{"duration_until_reset %v of a denial in a %v window is not in (%v, %v]", d, w, low, high}, msgAndArgs...)...)
}

// awayFromBoundary waits, when the next boundary of a window of length w
// is nearer than margin, until it has passed: the loops below count within
// one window, as their test does (it would fail when a minute ends during
// one; with the sliding window counter only the durations would).
func awayFromBoundary(w, margin time.Duration) {
	now := time.Now()
	if next := now.Truncate(w).Add(w); next.Sub(now) < margin {
		time.Sleep(next.Sub(now) + 10*time.Millisecond)
	}
}

// testRLBasicConfig is their testBasicBaseConfig: the same requests, in the
// same order, with the same expectations, against a running server.
func testRLBasicConfig(t *testing.T, s rlServer, v rlVariant) {
	key := func(k string) string { // their getCacheKey
		if v.localCache {
			return k + "_local"
		}
		return k
	}

	// Their last check, that duration_until_reset counts down, sends a
	// request, sleeps two seconds and sends it again. The first is sent
	// here and the sleep is what the rest of the flow leaves of the two
	// seconds: key4 is no other request's.
	durTest := rlRequest("another", [][][2]string{{{key("key4"), "durTest"}}}, 1)
	first := s.call(t, durTest)

	// A domain with no limits: one status, OK, nothing else.
	c := s.call(t, rlRequest("foo", [][][2]string{{{key("hello"), "world"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlOK, CurrentLimit: nil, LimitRemaining: 0}},
	}, c)

	c = s.call(t, rlRequest("basic", [][][2]string{{{key("key1"), "foo"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(rlOK, 50, rlSecond, 49)},
	}, c)
	basicKey1 := fmt.Sprintf(`domain="basic",key1=%q`, key("key1"))
	assert.Equal(t, 1.0, s.rlMetrics(t).of(metrics.RatelimitTotalHits, basicKey1))

	// A new value, over a limit of 20 a minute.
	awayFromBoundary(time.Minute, 3*time.Second)
	random := strconv.FormatUint(rand.Uint64(), 10)
	key2 := fmt.Sprintf(`domain="another",key1=%q`, key("key2"))
	for i := range 25 {
		c = s.call(t, rlRequest("another", [][][2]string{{{key("key2"), random}}}, 1))
		status, remaining := rlOK, uint32(20-(i+1))
		if i >= 20 {
			status, remaining = rlOver, 0
		}
		assertRL(t, &rlsv3.RateLimitResponse{
			OverallCode: status,
			Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(status, 20, rlMinute, remaining)},
		}, c, "request %d", i)
		m := s.rlMetrics(t)
		assert.Equal(t, float64(i+1), m.of(metrics.RatelimitTotalHits, key2), "request %d", i)
		assert.Equal(t, float64(max(0, i-19)), m.of(metrics.RatelimitOverLimit, key2), "request %d", i)
	}

	// Two keys of one domain: key3, 10 an hour, denies from the 11th
	// request on.
	awayFromBoundary(time.Minute, 3*time.Second)
	random = strconv.FormatUint(rand.Uint64(), 10)
	key3 := fmt.Sprintf(`domain="another",key1=%q`, key("key3"))
	for i := range 15 {
		c = s.call(t, rlRequest("another", [][][2]string{
			{{key("key2"), random}},
			{{key("key3"), random}},
		}, 1))
		status := rlOK
		remaining1, remaining2 := uint32(20-(i+1)), uint32(10-(i+1))
		if i >= 10 {
			status, remaining2 = rlOver, 0
			if v.stopIncrement {
				remaining1 = 10
			} else if !s.peer {
				remaining1 = rlDiffersDeniedTakesNothing(remaining1, i-9)
			}
		}
		assertRL(t, &rlsv3.RateLimitResponse{
			OverallCode: status,
			Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
				rlStatus(rlOK, 20, rlMinute, remaining1),
				rlStatus(status, 10, rlHour, remaining2),
			},
		}, c, "request %d", i)
		m := s.rlMetrics(t)
		assert.Equal(t, float64(i+26), m.of(metrics.RatelimitTotalHits, key2), "request %d", i)
		assert.Equal(t, 5.0, m.of(metrics.RatelimitOverLimit, key2), "request %d", i)
		assert.Equal(t, float64(i+1), m.of(metrics.RatelimitTotalHits, key3), "request %d", i)
		assert.Equal(t, float64(max(0, i-9)), m.of(metrics.RatelimitOverLimit, key3), "request %d", i)
	}

	// duration_until_reset counts down.
	time.Sleep(time.Until(first.after.Add(2 * time.Second)))
	second := s.call(t, durTest)
	assert.Less(t, second.resp.GetStatuses()[0].GetDurationUntilReset().GetSeconds(), first.resp.GetStatuses()[0].GetDurationUntilReset().GetSeconds())
}

// rlDiffersDeniedTakesNothing is the remaining count of a descriptor within
// its limit in a request that another descriptor denies, after denied
// requests: their Redis counts its hits anyway, so remaining goes on
// falling (unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, which leaves
// it). ratewarden gives back what a denied request took (RLS_REFUND_ON_DENY,
// on by default), so the hits of the denied requests are not counted: its
// answer is theirs with that variable set. Limits from xDS count every hit,
// as theirs do, and answer as they do.
func rlDiffersDeniedTakesNothing(theirs uint32, denied int) uint32 {
	return theirs + uint32(denied)
}

// retryAfter is the header an OVER_LIMIT answer carries: the wait in
// whole seconds.
func retryAfter(secs int64) *corev3.HeaderValue {
	return &corev3.HeaderValue{Key: "retry-after", Value: strconv.FormatInt(secs, 10)}
}

// runVariants runs one subtest per variant, all at once rather than as
// -parallel allows: a variant spends most of its time waiting for its
// duration_until_reset to count down.
func runVariants(t *testing.T, variants []rlVariant, run func(t *testing.T, v rlVariant)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, v := range variants {
		wg.Go(func() { t.Run(v.name, func(t *testing.T) { run(t, v) }) })
	}
	wg.Wait()
}

// TestRLBasicConfig is their TestBasicConfig: the nine variants against a
// standalone Redis, with REDIS_PERSECOND_URL naming a second one. Each
// variant has Redis servers of its own, since they run at once.
func TestRLBasicConfig(t *testing.T) {
	t.Parallel()
	root := rlRuntimeRoot(t, false)
	runVariants(t, rlVariants(), func(t *testing.T, v rlVariant) {
		main, perSecond := redistest.Standalone(t), redistest.Standalone(t)
		v.env = with(rlDefaultEnv(root, main.Addr(), perSecond.Addr()), flatten(v.env)...)
		testRLBasicConfig(t, startRLServer(t, v.env), v)

		keys, err := main.Client(t).Keys(context.Background(), "*").Result()
		require.NoError(t, err)
		assert.NotEmpty(t, keys)
		prefix := "ratewarden:"
		if p, ok := v.env["CACHE_KEY_PREFIX"]; ok {
			prefix = p
		}
		for _, k := range keys {
			assert.True(t, strings.HasPrefix(k, prefix), "key %q starts with %q", k, prefix)
		}
		n, err := perSecond.Client(t).DBSize(context.Background()).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing in the Redis of REDIS_PERSECOND_URL: every limit is counted in REDIS_URL's")
	})
}

// flatten returns env as name, value pairs for with.
func flatten(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k, v)
	}
	return out
}

// rlAuthVariants are the four variants their auth, TLS, cluster and
// Sentinel tests run: with and without the per-second Redis and the local
// cache.
func rlAuthVariants() []rlVariant {
	all := rlVariants()
	return []rlVariant{all[0], all[1], all[2], all[3]}
}

// requirePassword makes each server demand their password, of clients and
// of its replicas when it is one.
func requirePassword(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	ctx := context.Background()
	for _, srv := range servers {
		c := srv.Client(t)
		require.NoError(t, c.ConfigSet(ctx, "masterauth", rlRedisPassword).Err())
		require.NoError(t, c.ConfigSet(ctx, "requirepass", rlRedisPassword).Err())
	}
}

// TestRLBasicAuthConfig is their TestBasicAuthConfig: REDIS_AUTH for a
// Redis with a password.
func TestRLBasicAuthConfig(t *testing.T) {
	t.Parallel()
	root := rlRuntimeRoot(t, false)
	runVariants(t, rlAuthVariants(), func(t *testing.T, v rlVariant) {
		main, perSecond := redistest.Standalone(t), redistest.Standalone(t)
		requirePassword(t, main, perSecond)
		env := with(rlDefaultEnv(root, main.Addr(), perSecond.Addr()), flatten(v.env)...)
		env = with(env, "REDIS_AUTH", rlRedisPassword, "REDIS_PERSECOND_AUTH", rlRedisPassword)
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
}

// TestRLBasicTLSConfig is their TestBasicTLSConfig: REDIS_TLS with
// REDIS_AUTH, and a variant whose Redis demands a client certificate
// (REDIS_TLS_CLIENT_CERT, REDIS_TLS_CLIENT_KEY). Their Redis's certificate
// is in the system's trust store; here REDIS_TLS_CACERT names its CA.
func TestRLBasicTLSConfig(t *testing.T) {
	t.Parallel()
	root := rlRuntimeRoot(t, false)
	certs := redistest.NewCerts(t)
	variants := rlAuthVariants()
	clientCert := rlVariants()[0]
	clientCert.name = "WithoutPerSecondRedisTLSWithClientCert"
	clientCert.env = with(clientCert.env,
		"REDIS_TLS_CLIENT_CERT", certs.ClientCertFile, "REDIS_TLS_CLIENT_KEY", certs.ClientKeyFile)
	for i := range variants {
		variants[i].name = strings.Replace(variants[i].name, "Redis", "RedisTLS", 1)
	}
	runVariants(t, append(variants, clientCert), func(t *testing.T, v rlVariant) {
		_, demandCert := v.env["REDIS_TLS_CLIENT_CERT"]
		main := redistest.StandaloneTLS(t, certs.Server(demandCert))
		perSecond := redistest.StandaloneTLS(t, certs.Server(demandCert))
		requirePassword(t, main, perSecond)
		env := with(rlDefaultEnv(root, main.TLSAddr(), perSecond.TLSAddr()), flatten(v.env)...)
		env = with(env, "REDIS_AUTH", rlRedisPassword, "REDIS_PERSECOND_AUTH", rlRedisPassword,
			"REDIS_TLS", "true", "REDIS_PERSECOND_TLS", "true", "REDIS_TLS_CACERT", certs.CAFile)
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
}

// TestRLBasicAuthConfigWithRedisCluster is their
// TestBasicAuthConfigWithRedisCluster: REDIS_TYPE cluster, REDIS_URL the
// masters, REDIS_AUTH. The four variants share one cluster and run at
// once, so each has a CACHE_KEY_PREFIX of its own (theirs run one after
// another).
func TestRLBasicAuthConfigWithRedisCluster(t *testing.T) {
	t.Parallel()
	root := rlRuntimeRoot(t, false)
	cluster := redistest.NewCluster(t)
	var masters []string
	for _, m := range cluster.Masters(t) {
		masters = append(masters, m.Addr())
	}
	requirePassword(t, cluster.Nodes()...)
	url := strings.Join(masters, ",")
	runVariants(t, rlAuthVariants(), func(t *testing.T, v rlVariant) {
		env := with(rlDefaultEnv(root, url, url), flatten(v.env)...)
		env = with(env, "REDIS_TYPE", "cluster", "REDIS_PERSECOND_TYPE", "cluster",
			"REDIS_AUTH", rlRedisPassword, "REDIS_PERSECOND_AUTH", rlRedisPassword,
			"REDIS_PIPELINE_WINDOW", "150us", "REDIS_PERSECOND_PIPELINE_WINDOW", "150us",
			"CACHE_KEY_PREFIX", v.name+":")
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
}

// TestRLBasicAuthConfigWithRedisSentinel is their
// TestBasicAuthConfigWithRedisSentinel: REDIS_TYPE sentinel, REDIS_URL the
// master's name and the Sentinels, REDIS_AUTH the password of the master
// and its replica (the Sentinels have none). One setup for the four
// variants, each with a CACHE_KEY_PREFIX of its own.
func TestRLBasicAuthConfigWithRedisSentinel(t *testing.T) {
	t.Parallel()
	root := rlRuntimeRoot(t, false)
	sentinel := redistest.Sentinel(t)
	for _, sn := range sentinel.Sentinels() {
		require.NoError(t, sn.Client(t).Do(context.Background(), "SENTINEL", "SET", sentinel.MasterName(), "auth-pass", rlRedisPassword).Err())
	}
	requirePassword(t, sentinel.Replica(), sentinel.Master())
	url := strings.Join(append([]string{sentinel.MasterName()}, sentinel.SentinelAddrs()...), ",")
	runVariants(t, rlAuthVariants(), func(t *testing.T, v rlVariant) {
		env := with(rlDefaultEnv(root, url, url), flatten(v.env)...)
		env = with(env, "REDIS_TYPE", "sentinel", "REDIS_PERSECOND_TYPE", "sentinel",
			"REDIS_AUTH", rlRedisPassword, "REDIS_PERSECOND_AUTH", rlRedisPassword,
			"CACHE_KEY_PREFIX", v.name+":")
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
}
