package server

import (
	"context"
	"math"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHostileInputOverGRPC sends what a broken or malicious client might
// through a real gRPC connection: each gets a clear error or a correct
// answer, and the server keeps serving.
func TestHostileInputOverGRPC(t *testing.T) {
	s := start(t, nil)
	ctx := context.Background()
	entries := func(kv ...string) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return d
	}
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
		resp, err := call(req)
		require.NoError(t, err)
		require.Len(t, resp.GetStatuses(), 10_000)
		// 50 a second per address: 26 addresses get ~385 hits each, so the
		// request is over the limit, with one status per descriptor, in order.
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		assert.EqualValues(t, 50, resp.GetStatuses()[9_999].GetCurrentLimit().GetRequestsPerUnit())
	})

	t.Run("hits_addend 4294967295", func(t *testing.T) {
		req := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: math.MaxUint32, Descriptors: []*ratelimitv3.RateLimitDescriptor{entries("api_key", "hits")}}
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
