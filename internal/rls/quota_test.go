package rls

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// envoyExample is envoyproxy/ratelimit's example configuration, domain "rl",
// whose service=service_1 (1 a minute) and service=service_2 (2 a minute)
// are quotas with metadata.
var envoyExample = filepath.Join("..", "config", "testdata", "envoyproxy", "example.yaml")

// newConfigFixture serves the configuration files with fixed windows, as
// envoyproxy/ratelimit counts, on the memory backend at t0.
func newConfigFixture(t *testing.T, mutate func(*Options), files ...config.File) *fixture {
	t.Helper()
	cfg, err := config.Parse(files, config.Options{DefaultAlgorithm: algorithms.FixedWindow})
	require.NoError(t, err)
	clock := algotest.NewClock(t0)
	mem := memory.New(memory.WithClock(clock.Now))
	t.Cleanup(mem.Close)
	opts := DefaultOptions()
	opts.BackendTimeout = time.Second
	if mutate != nil {
		mutate(&opts)
	}
	return &fixture{svc: newService(t, mem, cfg, opts), clock: clock, mem: mem}
}

func readFile(t *testing.T, path string) config.File {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return config.File{Name: path, Data: data}
}

// TestQuotaModeEnvoyExample plays envoyproxy/ratelimit's quota test: a
// request carries both quota descriptors; it is admitted while either has
// room, and denied once both are spent, until their window passes.
func TestQuotaModeEnvoyExample(t *testing.T) {
	f := newConfigFixture(t, nil, readFile(t, envoyExample))
	req := &rlsv3.RateLimitRequest{Domain: "rl", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("service", "service_1"), desc("service", "service_2")}}

	resp := f.call(t, req)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))

	// service_1 is spent and says so, but service_2 has room: admitted.
	resp = f.call(t, req)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
	assert.EqualValues(t, 0, resp.GetStatuses()[1].GetLimitRemaining())
	assert.Empty(t, resp.GetResponseHeadersToAdd())

	// Both spent: denied, with the wait of the first quota to come back.
	resp = f.call(t, req)
	assert.Equal(t, over, resp.GetOverallCode())
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, over}, codesOf(resp))
	require.Len(t, resp.GetResponseHeadersToAdd(), 1)
	assert.Equal(t, "60", resp.GetResponseHeadersToAdd()[0].GetValue())

	// Quota descriptors record every hit, as envoyproxy/ratelimit counts
	// them: 3 of service_1's 1 and 3 of service_2's 2. The counts end with
	// their window: a minute later both start again, as the peer's do.
	f.clock.Advance(time.Minute)
	resp = f.call(t, req)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok}, codesOf(resp))
	assert.EqualValues(t, []uint32{0, 1}, remainingOf(resp))
}

// remainingOf returns the limit_remaining of each status of resp.
func remainingOf(resp *rlsv3.RateLimitResponse) []uint32 {
	var r []uint32
	for _, st := range resp.GetStatuses() {
		r = append(r, st.GetLimitRemaining())
	}
	return r
}

const quotaLimits = `
domain: q
descriptors:
  - key: a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: shadow
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
`

func qRequest(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "q", Descriptors: descs}
}

func TestQuotaMode(t *testing.T) {
	file := config.File{Name: "q.yaml", Data: []byte(quotaLimits)}

	t.Run("one quota alone", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		assert.Equal(t, ok, f.call(t, qRequest(desc("a", "1"))).GetOverallCode())
		resp := f.call(t, qRequest(desc("a", "1")))
		assert.Equal(t, over, resp.GetOverallCode(), "every quota of the request is spent")
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over}, codesOf(resp))
	})

	t.Run("a quota spent beside a limit with room", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		f.call(t, qRequest(desc("a", "2")))
		resp := f.call(t, qRequest(desc("a", "2"), desc("plain", "2")))
		assert.Equal(t, over, resp.GetOverallCode(), "the only quota is spent")
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
		// Denied, so the plain limit gave its hit back.
		assert.EqualValues(t, 1, f.call(t, qRequest(desc("plain", "2"))).GetStatuses()[0].GetLimitRemaining())
	})

	t.Run("a limit over beside quotas with room", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		f.call(t, qRequest(desc("plain", "3")))
		f.call(t, qRequest(desc("plain", "3")))
		resp := f.call(t, qRequest(desc("a", "3"), desc("plain", "3")))
		assert.Equal(t, over, resp.GetOverallCode())
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{ok, over}, codesOf(resp))
		// Denied, but a quota's hits are charges, usage recorded whatever
		// the answer (as envoyproxy/ratelimit records them), which a
		// refund never undoes: the quota stays spent.
		assert.Equal(t, over, f.call(t, qRequest(desc("a", "3"))).GetOverallCode())
	})

	t.Run("an admitted request keeps what its quotas took", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		f.call(t, qRequest(desc("a", "4")))
		resp := f.call(t, qRequest(desc("a", "4"), desc("b", "4"), desc("plain", "4")))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok, ok}, codesOf(resp))
		assert.Equal(t, over, f.call(t, qRequest(desc("b", "4"))).GetOverallCode(), "b kept the hit")
		assert.EqualValues(t, 0, f.call(t, qRequest(desc("plain", "4"))).GetStatuses()[0].GetLimitRemaining(), "plain kept the hit")
	})

	t.Run("a shadowed quota is never spent", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		f.call(t, qRequest(desc("a", "5")))
		resp := f.call(t, qRequest(desc("a", "5"), desc("shadow", "5")))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
	})

	t.Run("unlimited descriptors are no quota", func(t *testing.T) {
		f := newConfigFixture(t, func(o *Options) { o.QuotaMode = true }, file)
		f.call(t, qRequest(desc("a", "6")))
		resp := f.call(t, qRequest(desc("a", "6"), desc("free", "6")))
		assert.Equal(t, over, resp.GetOverallCode())
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
	})

	t.Run("global quota mode", func(t *testing.T) {
		f := newConfigFixture(t, func(o *Options) { o.QuotaMode = true }, file)
		f.call(t, qRequest(desc("plain", "7")))
		f.call(t, qRequest(desc("plain", "7")))
		resp := f.call(t, qRequest(desc("plain", "7")))
		assert.Equal(t, over, resp.GetOverallCode(), "its only quota is spent")
		resp = f.call(t, qRequest(desc("plain", "7"), desc("unmatched", "7")))
		assert.Equal(t, ok, resp.GetOverallCode(), "an unmatched descriptor is a quota with room")
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codesOf(resp))
		resp = f.call(t, &rlsv3.RateLimitRequest{Domain: "unknown", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("x", "y")}})
		assert.Equal(t, ok, resp.GetOverallCode())
	})

	t.Run("a limit override is a quota only in global quota mode", func(t *testing.T) {
		f := newConfigFixture(t, nil, file)
		f.call(t, qRequest(desc("a", "8")))
		resp := f.call(t, qRequest(desc("a", "8"), withOverride(desc("b", "8"), 5, typev3.RateLimitUnit_MINUTE, 0)))
		assert.Equal(t, over, resp.GetOverallCode(), "a is the only quota")
	})

	t.Run("failure mode deny", func(t *testing.T) {
		for _, global := range []bool{false, true} {
			cfg, err := config.Parse([]config.File{file}, rlstest.Config())
			require.NoError(t, err)
			opts := DefaultOptions()
			opts.FailureMode = FailDeny
			opts.QuotaMode = global
			svc := newService(t, failingLimiter{}, cfg, opts)
			resp, err := svc.ShouldRateLimit(context.Background(), qRequest(desc("a", "9"), desc("b", "9")))
			require.NoError(t, err)
			assert.Equal(t, over, resp.GetOverallCode())
			assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, over}, codesOf(resp))
			resp, err = svc.ShouldRateLimit(context.Background(), qRequest(desc("a", "9"), desc("unmatched", "9")))
			require.NoError(t, err)
			assert.Equal(t, map[bool]rlsv3.RateLimitResponse_Code{false: over, true: ok}[global], resp.GetOverallCode())
		}
	})
}

// outcome is one descriptor's part in a verdict.
type outcome struct {
	quota, over bool
	wait        time.Duration
}

func TestVerdict(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name  string
		descs []outcome
		over  bool
		wait  time.Duration
	}{
		{name: "nothing"},
		{"limits over", []outcome{{false, true, 3 * s}, {false, true, 5 * s}, {false, false, 0}}, true, 5 * s},
		{"one quota of two spent", []outcome{{true, true, 3 * s}, {true, false, 0}}, false, 0},
		{"all quotas spent: the first back", []outcome{{true, true, 7 * s}, {true, true, 3 * s}, {false, false, 0}}, true, 3 * s},
		{"a limit and all quotas", []outcome{{true, true, 7 * s}, {false, true, 2 * s}, {true, true, 9 * s}}, true, 7 * s},
		{"a limit, one quota of two", []outcome{{true, true, 7 * s}, {false, true, 2 * s}, {true, false, 0}}, true, 2 * s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v verdict
			for _, d := range tc.descs {
				v.add(d.quota, d.over, d.wait)
			}
			over, wait := v.result()
			assert.Equal(t, tc.over, over)
			assert.Equal(t, tc.wait, wait)
		})
	}
}
