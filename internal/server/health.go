package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/redisx"
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

// backendWatch checks at a fixed interval that the backend would take
// writes, and tells Health, so that readiness (grpc.health.v1
// and /ready) turns NOT_SERVING while Redis is unreachable or refuses
// writes, and SERVING again when it recovers, without a restart. Liveness
// (/healthcheck) waits for the backend's first answer, as
// envoyproxy/ratelimit's waits for its first Redis PING, and does not follow
// it after that.
type backendWatch struct {
	backend  backend
	health   *Health
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	// observe, when set, learns what each check found, for metrics.
	observe func(metrics.BackendCheck)

	// Used by run's goroutine only (and by check before it starts):
	down     bool // whether the last check failed
	answered bool // whether the backend has answered once
	prepared bool // whether the backend was prepared since it last came up
}

// prepareTimeout bounds readying the backend (loading the scripts on every
// node), which happens off the request path.
const prepareTimeout = 5 * time.Second

// check checks the backend once, bounded by the watch's timeout, reports
// the outcome to health, and logs when it changes.
func (w *backendWatch) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	err := w.backend.CheckWrites(ctx)
	found := metrics.BackendOK
	switch {
	case errors.Is(err, redisx.ErrWritesRefused):
		err, found = fmt.Errorf("backend refuses writes: %w", err), metrics.BackendRefusesWrites
	case err != nil:
		err, found = fmt.Errorf("backend unreachable: %w", err), metrics.BackendUnreachable
	}
	w.health.SetBackendError(err)
	if w.observe != nil {
		w.observe(found)
	}
	// A refusal is an answer too: Redis is there, and would answer PING.
	wasAnswered := w.answered
	if !wasAnswered && (err == nil || errors.Is(err, redisx.ErrWritesRefused)) {
		w.answered = true
		w.health.BackendAnswered()
	}
	switch {
	case err != nil && !w.answered && !w.down:
		w.log.Warn("backend has not answered yet: liveness (/healthcheck) and readiness fail until it does; requests get the failure mode", "err", err)
	case err != nil && w.answered && (!w.down || !wasAnswered):
		w.log.Warn("backend not ready: readiness is NOT_SERVING; requests get the failure mode", "err", err)
	case err == nil && w.down && !wasAnswered:
		w.log.Info("backend answered for the first time: liveness (/healthcheck) is OK")
	case err == nil && w.down:
		w.log.Info("backend ready again: readiness is SERVING")
	}
	w.down = err != nil
	if w.down {
		w.prepared = false
		return
	}
	if !w.prepared {
		pctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
		defer cancel()
		if err := w.backend.Prepare(pctx); err != nil {
			w.log.Debug("preparing the backend failed; trying again at the next check", "err", err)
			return
		}
		w.prepared = true
	}
}

// run checks the backend every interval until ctx ends.
func (w *backendWatch) run(ctx context.Context) {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.check(ctx)
		}
	}
}

// start runs the watch in a goroutine and returns the function that stops
// it and waits for it to end.
func (w *backendWatch) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
