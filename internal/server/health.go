package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// backendWatch checks at a fixed interval that the backend would take
// writes, and tells the service's Health, so that readiness (grpc.health.v1
// and /ready) turns NOT_SERVING while Redis is unreachable or refuses
// writes, and SERVING again when it recovers, without a restart. Liveness
// (/healthcheck) waits for the backend's first answer, as
// envoyproxy/ratelimit's waits for its first Redis PING, and does not follow
// it after that.
type backendWatch struct {
	backend  backend
	health   *rls.Health
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger

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
	switch {
	case errors.Is(err, redisx.ErrWritesRefused):
		err = fmt.Errorf("backend refuses writes: %w", err)
	case err != nil:
		err = fmt.Errorf("backend unreachable: %w", err)
	}
	w.health.SetBackendError(err)
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
