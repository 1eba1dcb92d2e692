package server

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/layers/admission"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rlqs"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// newRequestPath builds what a request goes through, bottom-up from the
// backend b, as the settings s say: each layer is a rate.Limiter that wraps
// the one below it and knows nothing of the others. Read top-down, as a
// request goes:
//
//	rls.Service        the protocol: plans the ops, applies the deadline and the failure mode
//	lease.Limiter      serves hot limits from leases taken from the backend (Redis, RLS_LEASES)
//	admission.Limiter  sheds what could not be answered before its deadline (requests with a budget)
//	breaker.Limiter    times and classifies every call; stops calling a backend that keeps failing
//	denycache.Limiter  answers the denials it has seen without the backend (Redis, RLS_DENY_CACHE)
//	tracer.Limiter     a span for each call that reaches the backend (RLS_TRACING; tracer nil without)
//	b                  the memory or Redis backend
//
// Beside them, the give-back queue (giveback.Queue) sends what the path
// owes the backend through the layers below the breaker. What is owed
// reaches it by one route: outcomes, to which the backend reports what
// became of the ops of failed calls, and the service the takes admitted
// for answers that came too late and the charges of requests never sent;
// the queue, the breaker (late answers are answers) and the lease layer
// (leases granted to no one) follow it. A layer tells the one above only,
// by its error, that a call was never sent (rate.ErrNotSent). m observes
// the service and every layer. The function returned gives back what the
// layers hold; it runs once no call is under way, before the backend
// closes.
func newRequestPath(b rate.Limiter, outcomes *rate.Outcomes, cfg *config.Config, s settings.Settings, m *metrics.Metrics, tracer *tracing.Tracer, logger *slog.Logger) (requestPath, error) {
	opts := s.ServiceOptions(logger)
	opts.Observer = m
	if s.Backend == settings.BackendMemory {
		// The memory backend never waits: a deadline per request would only
		// cost a timer.
		opts.BackendTimeout = 0
	}

	l := b
	if tracer != nil {
		l = tracer.Limiter(l)
	}
	if s.Backend == settings.BackendRedis && s.DenyCache {
		cache, err := denycache.New(l, s.DenyCacheOptions())
		if err != nil {
			return requestPath{}, fmt.Errorf("server: %w", err)
		}
		m.RegisterDenyCacheHits(cache.Hits)
		l = cache
	}
	gbOpts := s.GiveBackOptions()
	gbOpts.Observer, gbOpts.Logger = m, logger
	queue, err := giveback.New(l, gbOpts)
	if err != nil {
		return requestPath{}, fmt.Errorf("server: %w", err)
	}
	outcomes.Follow(queue.Settle)
	bOpts := s.BreakerOptions()
	bOpts.Grace = breakerGrace(s)
	bOpts.Observer, bOpts.Logger = m, logger.With("failure_mode", s.FailureMode.String())
	br, err := breaker.New(l, bOpts)
	if err != nil {
		return requestPath{}, fmt.Errorf("server: %w", err)
	}
	outcomes.Follow(br.Answered)
	l = br
	if opts.BackendTimeout > 0 {
		// Shedding needs a deadline to shed by.
		aOpts := s.AdmissionOptions()
		aOpts.Observer = m
		if l, err = admission.New(l, aOpts); err != nil {
			return requestPath{}, fmt.Errorf("server: %w", err)
		}
	}
	var svc *rls.Service
	var quota *rlqs.Server
	if s.RLQS {
		// Envoys hold the grants: the quota service takes them below the
		// leases, which are this replica's.
		qOpts := rlqs.DefaultOptions()
		qOpts.Limiter, qOpts.Logger, qOpts.Observer = l, logger, m
		qOpts.ShadowMode = s.ShadowMode
		qOpts.Config = func() *config.Config { return svc.Config() }
		if opts.BackendTimeout > 0 {
			qOpts.Timeout = opts.BackendTimeout
		}
		if quota, err = rlqs.New(qOpts); err != nil {
			return requestPath{}, fmt.Errorf("server: %w", err)
		}
	}
	release := func() {}
	if s.Backend == settings.BackendRedis && s.Leases {
		lOpts := s.LeaseOptions()
		lOpts.Observer = m
		leases, err := lease.New(l, lOpts)
		if err != nil {
			return requestPath{}, fmt.Errorf("server: %w", err)
		}
		outcomes.Follow(leases.Settle)
		l, release = leases, leases.Close
	}
	opts.Outcomes = outcomes
	if svc, err = rls.New(l, cfg, opts); err != nil {
		release()
		return requestPath{}, fmt.Errorf("server: %w", err)
	}
	return requestPath{service: svc, quota: quota, release: release}, nil
}

// requestPath is what newRequestPath builds: the service, the quota service
// beside it (nil when RLS_RLQS is off), and what gives back what the layers
// hold.
type requestPath struct {
	service *rls.Service
	quota   *rlqs.Server
	release func()
}

// breakerGrace returns how late the breaker judges a timeout: once the
// Redis client has stopped reading its reply (redisGrace); the memory
// backend's timeouts, callers' deadlines that passed before it was asked,
// as late as a Redis client's with its default read timeout.
func breakerGrace(s settings.Settings) time.Duration {
	if s.Backend == settings.BackendMemory {
		return redisx.DefaultReadTimeout
	}
	return redisGrace(s)
}
