package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestLimitHeadersOverGRPCAndJSON(t *testing.T) {
	s := start(t, map[string]string{"RLS_LIMIT_HEADERS": "true", "RLS_LIMIT_HEADER_RESET": "X-Reset"})
	ctx := context.Background()

	// The example config allows 5 logins in any 60 seconds per address.
	resp, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.10"))
	require.NoError(t, err)
	require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	h := map[string]string{}
	for _, hv := range resp.GetResponseHeadersToAdd() {
		h[hv.GetKey()] = hv.GetValue()
	}
	assert.Equal(t, map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "X-Reset": "60"}, h)

	post := func() (*http.Response, string) {
		body, err := protojson.Marshal(loginRequest("192.0.2.10"))
		require.NoError(t, err)
		r, err := http.Post(s.http+"/json", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		defer r.Body.Close()
		out, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		return r, string(out)
	}
	// /json sets them as HTTP headers, and keeps them in the answer.
	for want := 3; want >= 0; want-- {
		r, out := post()
		assert.Equal(t, http.StatusOK, r.StatusCode)
		assert.Equal(t, "5", r.Header.Get("RateLimit-Limit"))
		assert.Equal(t, strconv.Itoa(want), r.Header.Get("RateLimit-Remaining"))
		assert.NotEmpty(t, r.Header.Get("X-Reset"))
		assert.Contains(t, out, `"responseHeadersToAdd"`)
	}
	r, _ := post()
	assert.Equal(t, http.StatusTooManyRequests, r.StatusCode)
	assert.Equal(t, "0", r.Header.Get("RateLimit-Remaining"))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
}
