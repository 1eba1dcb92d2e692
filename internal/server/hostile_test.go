package server

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/rlstest"
)

// entries returns a descriptor of the entries kv: key, value, key, value….
func entries(kv ...string) *ratelimitv3.RateLimitDescriptor { return rlstest.Descriptor(kv...) }

// TestHostileInputOverGRPC sends what a broken or malicious client might
// through a real gRPC connection: each gets a clear error or a correct
// answer, and the server keeps serving.
func TestHostileInputOverGRPC(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	call := func(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		return s.client.ShouldRateLimit(ctx, req)
	}

	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("api_key", "k")}}, "domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}, "no descriptors"},
		{"an empty key", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("", "v")}}, "empty key"},
		{"a descriptor without entries", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}}, "no entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(tc.req)
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}

	t.Run("a 64 KiB value is limited as one key", func(t *testing.T) {
		big := strings.Repeat("x", 64<<10)
		req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("path", "/login", "remote_address", big)}}
		for i := range 5 {
			resp, err := call(req)
			require.NoError(t, err)
			require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "call %d", i)
		}
		resp, err := call(req)
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
	})

	t.Run("10000 descriptors", func(t *testing.T) {
		req := &rlsv3.RateLimitRequest{Domain: "edge"}
		for i := range 10_000 {
			req.Descriptors = append(req.Descriptors, entries("remote_address", "198.51.100."+string(rune('a'+i%26))))
		}
		_, err := call(req)
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.Contains(t, status.Convert(err).Message(), "the request has 10000 descriptors, more than the 256 one request may have (RLS_MAX_DESCRIPTORS)")

		req.Descriptors = req.Descriptors[:256]
		resp, err := call(req)
		require.NoError(t, err)
		require.Len(t, resp.GetStatuses(), 256)
		// 50 a second per address: 26 addresses get ~10 hits each, so the
		// request is within the limits, with one status per descriptor, in
		// order.
		assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
		assert.EqualValues(t, 50, resp.GetStatuses()[255].GetCurrentLimit().GetRequestsPerUnit())
	})

	t.Run("hits_addend 1000000000", func(t *testing.T) {
		req := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 1_000_000_000, Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("api_key", "hits")}}
		resp, err := call(req)
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		// It consumed nothing: the key still has its whole burst.
		resp, err = call(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("api_key", "hits")}})
		require.NoError(t, err)
		assert.EqualValues(t, 19, resp.GetStatuses()[0].GetLimitRemaining())
	})

	// After all that, the server still answers.
	resp, err := call(loginRequest("192.0.2.200"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
}

// TestHostileRequestsAreBounded sends, over a real gRPC connection, what a
// client might send to hurt the others: more hits than any limit, overrides
// that make huge or everlasting logs and keys, descriptors with countless
// entries, give-backs of other tenants' hits. Each bad request is refused
// with InvalidArgument and a message that says what to do, or does no harm;
// the counters keep counting, the metrics keep their series, and the server
// keeps serving.
func TestHostileRequestsAreBounded(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	edge := func(ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds}
	}
	withHits := func(d *ratelimitv3.RateLimitDescriptor, hits uint64) *ratelimitv3.RateLimitDescriptor {
		d.HitsAddend = wrapperspb.UInt64(hits)
		return d
	}
	override := func(d *ratelimitv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit, mult uint32) *ratelimitv3.RateLimitDescriptor {
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit, UnitMultiplier: wrapperspb.UInt32(mult)}
		return d
	}
	many := func(n int, value string) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := range n {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: fmt.Sprint("k", i), Value: value})
		}
		return d
	}
	hitsTotal := func(descriptor, algorithm, window string) float64 {
		series := fmt.Sprintf(metrics.RuleHits+`{algorithm=%q,descriptor=%q,domain="edge",limit="api_key_per_second",window=%q}`, algorithm, descriptor, window)
		return scrapeMetrics(t, s.http)[series]
	}

	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"a descriptor's hits_addend of 2^64-1", edge(withHits(entries("api_key", "poison"), math.MaxUint64)),
			"descriptors[0] asks for 18446744073709551615 hits, more than the 1000000000 one descriptor may take or give back (RLS_MAX_HITS): send them in several requests"},
		{"the request's hits_addend of 2^32-1", &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: math.MaxUint32, Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("api_key", "k")}},
			"RLS_MAX_HITS"},
		{"an override of a log to 100000 per 10 years, with 100000 hits", edge(withHits(override(entries("path", "/login", "remote_address", "198.51.100.66"), 100_000, typev3.RateLimitUnit_YEAR, 10), 100_000)),
			"descriptors[0].limit.requests_per_unit 100000 is more than the 1000 entries a limit override may give a sliding_window_log (RLS_MAX_OVERRIDE_LOG_SIZE): ask for fewer, or configure the limit in a rule"},
		{"an override of a log to 1000 per 10 years", edge(override(entries("path", "/login", "remote_address", "198.51.100.66"), 1000, typev3.RateLimitUnit_YEAR, 10)),
			"longer than the 1488h0m0s a limit override may (RLS_MAX_OVERRIDE_LIFETIME): ask for a shorter window, or configure the limit in a rule"},
		{"5000 hits of a log", edge(withHits(entries("path", "/login", "remote_address", "198.51.100.66"), 5000)),
			"descriptors[0] asks for 5000 hits of a sliding_window_log, more than the 100 it may take or give back at once (RLS_MAX_LOG_HITS)"},
		{"an override of an unmatched descriptor with 20 entries", edge(override(many(20, "v"), 10, typev3.RateLimitUnit_SECOND, 1)),
			"descriptors[0] matches no rule and has 20 entries, more than the 16 a limit override of an unmatched descriptor may count under (RLS_MAX_UNMATCHED_ENTRIES): send fewer entries, or configure a rule for them"},
		{"a descriptor with 20000 entries", edge(many(20_000, "v")),
			"descriptors[0] has 20000 entries, more than the 64 one descriptor may have (RLS_MAX_ENTRIES): send fewer; no configured rule matches more than 64"},
		{"an override of an unmatched descriptor with 16 entries of 250 bytes", edge(override(many(16, strings.Repeat("x", 250)), 10, typev3.RateLimitUnit_SECOND, 1)),
			"(RLS_MAX_UNMATCHED_KEY_BYTES): send shorter entries, or configure a rule for them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.client.ShouldRateLimit(ctx, tc.req)
			require.Error(t, err)
			assert.Equal(t, codes.InvalidArgument, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), tc.msg)
		})
	}

	t.Run("the hits counter keeps counting", func(t *testing.T) {
		before := hitsTotal("edge.api_key", "token_bucket", "1s")
		_, err := s.client.ShouldRateLimit(ctx, edge(withHits(entries("api_key", "poison"), math.MaxUint64)))
		require.Equal(t, codes.InvalidArgument, status.Code(err))
		assert.Equal(t, before, hitsTotal("edge.api_key", "token_bucket", "1s"), "a refused request counts nothing")

		// The most hits a request may ask for, far beyond the bucket's 20,
		// count as 21: all they could be denied for. A client repeating
		// them cannot push the series out of float64's exact integers.
		resp, err := s.client.ShouldRateLimit(ctx, edge(withHits(entries("api_key", "poison"), 1_000_000_000)))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		assert.Equal(t, before+21, hitsTotal("edge.api_key", "token_bucket", "1s"))
		before += 21

		resp, err = s.client.ShouldRateLimit(ctx, edge(entries("api_key", "poison")))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
		assert.Equal(t, before+1, hitsTotal("edge.api_key", "token_bucket", "1s"))
		assert.EqualValues(t, 19, resp.GetStatuses()[0].GetLimitRemaining(), "the refused request took nothing")
	})

	t.Run("is_negative_hits does not refill a rule that does not allow it", func(t *testing.T) {
		login := func() *ratelimitv3.RateLimitDescriptor {
			return entries("path", "/login", "remote_address", "198.51.100.77")
		}
		for range 5 {
			resp, err := s.client.ShouldRateLimit(ctx, edge(login()))
			require.NoError(t, err)
			require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
		}
		back := withHits(login(), 5)
		back.IsNegativeHits = true
		resp, err := s.client.ShouldRateLimit(ctx, edge(back))
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode(), "the hits are taken, as envoyproxy/ratelimit takes them")
		resp, err = s.client.ShouldRateLimit(ctx, edge(login()))
		require.NoError(t, err)
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
	})

	t.Run("overrides of unmatched descriptors make one metric series", func(t *testing.T) {
		for i := range 200 {
			d := override(entries(fmt.Sprint("key", i), "v"), 10, typev3.RateLimitUnit_SECOND, uint32(1+i))
			_, err := s.client.ShouldRateLimit(ctx, edge(d))
			require.NoError(t, err)
		}
		series := 0
		for name := range scrapeMetrics(t, s.http) {
			if strings.HasPrefix(name, metrics.RuleHits+"{") && strings.Contains(name, `descriptor="edge"`) {
				series++
				assert.Contains(t, name, `window="override"`)
			}
		}
		assert.Equal(t, 1, series)
	})

	// The others are served as before.
	resp, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.201"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
}

// TestAllowNegativeHitsSetting: with RLS_ALLOW_NEGATIVE_HITS, a rule that
// does not set allow_negative_hits takes hits back, and /rlconfig says so.
func TestAllowNegativeHitsSetting(t *testing.T) {
	s := start(t, map[string]string{"RLS_ALLOW_NEGATIVE_HITS": "true"})
	ctx := context.Background()
	for range 5 {
		resp, err := s.client.ShouldRateLimit(ctx, loginRequest("198.51.100.88"))
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	}
	back := loginRequest("198.51.100.88")
	back.Descriptors[0].IsNegativeHits = true
	back.Descriptors[0].HitsAddend = wrapperspb.UInt64(2)
	resp, err := s.client.ShouldRateLimit(ctx, back)
	require.NoError(t, err)
	assert.EqualValues(t, 2, resp.GetStatuses()[0].GetLimitRemaining(), "two hits given back")
	resp, err = s.client.ShouldRateLimit(ctx, loginRequest("198.51.100.88"))
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())

	rl, err := http.Get(s.http + "/rlconfig")
	require.NoError(t, err)
	defer rl.Body.Close()
	body, err := io.ReadAll(rl.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "edge.path_/login.remote_address (../../config/edge.yaml")
	assert.Contains(t, string(body), "allow_negative_hits")
}
