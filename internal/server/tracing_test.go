package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/ratewarden/ratewarden/internal/testkit/tracingtest"
)

// TestTracingThroughEnvoyproxyRatelimitsVariables turns tracing on as Envoy
// Gateway's Deployment does, with envoyproxy/ratelimit's variables, and
// receives the spans of a call in an OTLP/gRPC collector when the server
// stops.
func TestTracingThroughEnvoyproxyRatelimitsVariables(t *testing.T) {
	// The OTel SDK reads its OTEL_* variables from the process's
	// environment, and the server's settings come through start's lookup:
	// the server runs in a child process that has the collector's address.
	if !tracingtest.IsChild(t) {
		col := &tracingtest.Collector{}
		tracingtest.RunChild(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+col.ServeGRPC(t))
		assert.ElementsMatch(t, []string{
			"envoy-ratelimit: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
			"envoy-ratelimit: ratewarden.backend",
		}, col.Spans())
		return
	}
	s := start(t, map[string]string{
		"TRACING_ENABLED":           "true",
		"TRACING_EXPORTER_PROTOCOL": "grpc",
		"TRACING_SERVICE_NAME":      "envoy-ratelimit",
	})
	ctx := metadata.NewOutgoingContext(context.Background(),
		metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	_, err := s.client.ShouldRateLimit(ctx, loginRequest("192.0.2.20"))
	require.NoError(t, err)
	require.NoError(t, s.stop(), "the spans are exported when the server stops")
}
