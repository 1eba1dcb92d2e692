package rls

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcStatus returns what grpc.health.v1 says for the server as a whole.
func grpcStatus(t *testing.T, h *Health) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := h.Server().Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	return resp.GetStatus()
}

// TestLivenessWaitsForTheBackendsFirstAnswer: a new Health is not live
// until the backend has answered once, naming the backend's error while it
// has not; from then on a backend outage fails readiness alone, and only a
// shutdown fails liveness.
func TestLivenessWaitsForTheBackendsFirstAnswer(t *testing.T) {
	h := NewHealth()
	h.SetConfigLoaded(true)
	live, why := h.Live()
	assert.False(t, live)
	assert.Equal(t, "waiting for the backend's first answer", why)

	h.SetBackendError(errors.New("backend unreachable: connection refused"))
	live, why = h.Live()
	assert.False(t, live)
	assert.Equal(t, "waiting for the backend's first answer: backend unreachable: connection refused", why)
	ready, why := h.Ready()
	assert.False(t, ready)
	assert.Equal(t, "waiting for the backend's first answer: backend unreachable: connection refused", why, "the backend's error once")
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, grpcStatus(t, h))

	h.SetBackendError(nil)
	h.BackendAnswered()
	live, _ = h.Live()
	assert.True(t, live)
	ready, _ = h.Ready()
	assert.True(t, ready)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, grpcStatus(t, h))

	h.SetBackendError(errors.New("backend unreachable: connection refused"))
	live, _ = h.Live()
	assert.True(t, live, "a later outage is not cured by a restart")
	ready, why = h.Ready()
	assert.False(t, ready)
	assert.Equal(t, "backend unreachable: connection refused", why)

	h.Shutdown()
	live, why = h.Live()
	assert.False(t, live)
	assert.Equal(t, "shutting down", why)
}
