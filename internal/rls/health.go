package rls

import (
	"strings"
	"sync"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// healthServiceNames are the grpc.health.v1 service names that report
// readiness: the server as a whole (""), the RateLimitService, and
// "ratelimit", the name envoyproxy/ratelimit reports under.
var healthServiceNames = [...]string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName, "ratelimit"}

// Health tracks two things, for probes:
//   - liveness: the process serves. False until the backend has answered
//     once (as envoyproxy/ratelimit opens its HTTP port only after its first
//     Redis PING), then true until shutdown begins; neither a later backend
//     outage nor limits not loaded yet make it false, since a restart would
//     cure neither.
//   - readiness: it can decide requests. Liveness, a configuration loaded,
//     and the backend takes writes. It drives grpc.health.v1 for the service names "" (the
//     server), "envoy.service.ratelimit.v3.RateLimitService" and "ratelimit"
//     (envoyproxy/ratelimit's name).
//
// It is safe for concurrent use; the zero value is not usable, use
// NewHealth.
type Health struct {
	server *health.Server

	mu          sync.Mutex
	answered    bool   // whether the backend has answered once
	backendDown string // why the backend cannot serve; "" when it can
	configured  bool
	draining    bool
}

// NewHealth returns a Health that is neither live, until the backend has
// answered (BackendAnswered), nor ready, until a configuration is loaded
// too.
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

// BackendAnswered records that the backend has answered, even if only to
// refuse a write: from then on liveness no longer waits for it.
func (h *Health) BackendAnswered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered = true
	h.update()
}

// SetBackendError records whether the backend can serve: nil when it can,
// else why not. The error's text is the reason Ready gives.
func (h *Health) SetBackendError(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.backendDown = ""
	if err != nil {
		h.backendDown = err.Error()
	}
	h.update()
}

// Shutdown marks the service as draining: neither live nor ready from now
// on.
func (h *Health) Shutdown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.draining = true
	h.update()
}

// Live returns whether the process serves and, when it does not, why.
func (h *Health) Live() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reasons := h.liveReasons()
	return len(reasons) == 0, strings.Join(reasons, "; ")
}

// Ready returns whether the service can decide requests and, when it
// cannot, why.
func (h *Health) Ready() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reasons := h.readyReasons()
	return len(reasons) == 0, strings.Join(reasons, "; ")
}

// liveReasons says why the process does not serve: a backend that has
// never answered, or a shutdown. Once the backend has answered, neither a
// missing configuration (files mounted late, an xDS server not answering
// yet) nor a backend outage fails liveness, since a restart would cure
// neither; this is envoyproxy/ratelimit's /healthcheck by default, which
// it serves only once its first Redis PING has answered.
func (h *Health) liveReasons() []string {
	if h.draining {
		return []string{"shutting down"}
	}
	if !h.answered {
		if h.backendDown != "" {
			return []string{"waiting for the backend's first answer: " + h.backendDown}
		}
		return []string{"waiting for the backend's first answer"}
	}
	return nil
}

func (h *Health) readyReasons() []string {
	r := h.liveReasons()
	if !h.configured {
		r = append(r, "no rate limit configuration loaded")
	}
	// Before the backend's first answer, the reason of liveness names the
	// backend's error already.
	if h.backendDown != "" && (h.answered || h.draining) {
		r = append(r, h.backendDown)
	}
	return r
}

// update pushes readiness to the gRPC health server; h.mu must be held.
func (h *Health) update() {
	st := healthpb.HealthCheckResponse_SERVING
	if len(h.readyReasons()) > 0 {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, name := range healthServiceNames {
		h.server.SetServingStatus(name, st)
	}
}
