package test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/testkit/rlqsenvoy"
)

// TestRLQSServedBesideRLS: the server binary serves the Rate Limit Quota
// Service on its gRPC port. Two Envoys (the fake, on the real clock) ask
// for a bucket of a limit of 50 a minute, far more than it allows, for 7
// seconds: the first request of each is denied (no assignment yet), the
// grants arrive as token buckets, and together they admit no more than 50.
// With RLS_RLQS=false the service is not there.
func TestRLQSServedBesideRLS(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "quota.yaml"), []byte(`
domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 50, algorithm: fixed_window}
`), 0o644))
	if into := time.Since(time.Now().Truncate(time.Minute)); into > 45*time.Second {
		time.Sleep(time.Minute - into) // the test's seconds in one minute
	}
	srv := startServer(t, map[string]string{"RLS_CONFIG_PATH": dir})
	conn, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })

	ctx, cancel := context.WithTimeout(t.Context(), 7*time.Second)
	defer cancel()
	deny := rlqsenvoy.Settings{NoAssignment: rlqsenvoy.DenyAll(), ExpiredFallback: rlqsenvoy.DenyAll()}
	bucket := map[string]string{"tenant": "acme"}
	var envoys []*rlqsenvoy.Envoy
	for range 2 {
		e, err := rlqsenvoy.New(rlqsv3.NewRateLimitQuotaServiceClient(conn), rlqsenvoy.Config{Domain: "edge", Settings: deny})
		require.NoError(t, err)
		t.Cleanup(e.Close)
		go e.Run(ctx, 10*time.Millisecond)
		envoys = append(envoys, e)
	}
	var admitted int
	for ctx.Err() == nil {
		for _, e := range envoys {
			if e.Request(bucket) {
				admitted++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	assert.Positive(t, admitted, "the grants arrived")
	assert.LessOrEqual(t, admitted, 50)
	for _, e := range envoys {
		assert.Positive(t, e.Counters().Responses, "each Envoy got its grant")
	}

	off := startServer(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_RLQS": "false"})
	offConn, err := grpc.NewClient(off.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { offConn.Close() })
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(offConn).StreamRateLimitQuotas(t.Context())
	require.NoError(t, err)
	require.NoError(t, stream.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge"}))
	_, err = stream.Recv()
	assert.Equal(t, codes.Unimplemented, status.Code(err))
}
