package rls

import (
	"strings"
	"sync"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Health tracks whether the service can serve: a configuration is loaded, the
// backend is reachable and no shutdown has begun. It drives both
// grpc.health.v1 and /healthcheck. It is safe for concurrent use; the zero
// value is not usable, use NewHealth.
type Health struct {
	server *health.Server

	mu          sync.Mutex
	backendDown string // why the backend is unreachable; "" when reachable
	configured  bool
	draining    bool
}

// NewHealth returns a Health that reports NOT_SERVING until a configuration
// is loaded.
func NewHealth() *Health {
	h := &Health{server: health.NewServer()}
	h.update()
	return h
}

// Server returns the grpc.health.v1 implementation to register.
func (h *Health) Server() healthpb.HealthServer { return h.server }

// SetConfigLoaded records whether a configuration is loaded.
func (h *Health) SetConfigLoaded(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.configured = ok
	h.update()
}

// SetBackendError records the backend's reachability: nil when reachable.
func (h *Health) SetBackendError(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.backendDown = ""
	if err != nil {
		h.backendDown = err.Error()
	}
	h.update()
}

// Shutdown marks the service as draining: NOT_SERVING from now on.
func (h *Health) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	h.update()
}

// Check returns whether the service can serve and, when it cannot, why.
func (h *Health) Check() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reasons := h.reasons()
	return len(reasons) == 0, strings.Join(reasons, "; ")
}

func (h *Health) reasons() []string {
	var r []string
	if h.draining {
		r = append(r, "shutting down")
	}
	if !h.configured {
		r = append(r, "no rate limit configuration loaded")
	}
	if h.backendDown != "" {
		r = append(r, "backend unreachable: "+h.backendDown)
	}
	return r
}

// update pushes the state to the gRPC health server; h.mu must be held.
func (h *Health) update() {
	st := healthpb.HealthCheckResponse_SERVING
	if len(h.reasons()) > 0 {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	h.server.SetServingStatus("", st)
	h.server.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, st)
}
