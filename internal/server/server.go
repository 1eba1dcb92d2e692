// Package server wires ratewarden together: it loads the limits, builds the
// backend and the request path over it (newRequestPath: the layers and the
// rls.Service on top), serves gRPC and HTTP (the service's endpoints,
// health, metrics), and shuts down gracefully. New acquires what the server
// holds step by step, each step pushing how to release what it acquired;
// a failed New and the shutdown release it all in the reverse order
// (releases.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/explain"
	"github.com/ratewarden/ratewarden/internal/listen"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rlqs"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/tlsx"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// Server is a running ratewarden: its listeners are bound by New, and Serve
// serves until its context ends.
type Server struct {
	settings settings.Settings
	log      *slog.Logger
	// releases releases what New acquired, last first: on a failed New,
	// and at shutdown (releases.go).
	releases releases

	service *rls.Service
	quota   *rlqs.Server // nil without RLS_RLQS
	health  *Health
	backend backend
	config  *configState // the limits in force, and their source
	metrics *metrics.Metrics
	explain *explain.Explainer // /explain's keys
	tracer  *tracing.Tracer    // nil without RLS_TRACING
	// backendWatch keeps health in step with the backend's reachability.
	backendWatch *backendWatch

	grpcLis net.Listener
	httpLis net.Listener
	// grpcServe and httpServe are the listeners served: grpcLis and
	// httpLis with their connection limits.
	grpcServe net.Listener
	httpServe net.Listener
	grpc      *grpc.Server
	http      *http.Server
	// side holds the servers beside gRPC and HTTP (listeners.go).
	side []*listen.Side
}

// New loads the configuration, builds the backend and binds the listeners,
// as the settings s ask: Settings that settings.Load returned, which it has
// validated. A configuration error is returned with its file, line and
// field. On any error, New has released whatever it acquired.
func New(ctx context.Context, s settings.Settings, logger *slog.Logger) (_ *Server, err error) {
	if report := s.Compat(); report != nil {
		report.Log(logger)
	}
	m := metrics.New(metrics.WithNames(s.MetricsNames))
	source, err := newConfigSource(ctx, s, logger, m)
	if err != nil {
		return nil, err
	}
	cfg, err := source.Load(ctx)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		logger.Info("loaded rate limit configuration", "path", source.Origin().Name, "domains", len(cfg.Domains()), "files", len(cfg.Files()), "watch", s.ConfigWatch)
		logWarnings(logger, cfg)
	} else {
		logger.Warn("no rate limit configuration yet: every request is answered with an error, so that Envoy's failure mode decides, and the server is not ready until the first arrives", "path", source.Origin().Name)
	}
	grpcTLS, err := tlsx.GRPC(s.GRPCTLS(), logger, time.Now())
	if err != nil {
		return nil, err
	}
	httpTLS, err := tlsx.HTTP(s.HTTPTLS(), logger, time.Now())
	if err != nil {
		return nil, err
	}
	if why := jsonOff(s); why != "" {
		logger.Info("/json and /explain are not served", "why", why)
	}

	// From here on, each step that acquires something pushes how to
	// release it. When a step fails, what the steps before it acquired is
	// released, last first, as shutdown releases it all.
	srv := &Server{settings: s, log: logger, health: NewHealth(), metrics: m}
	defer func() {
		if err != nil {
			srv.releases.run(context.Background())
		}
	}()
	routeRedisLogs(logger)
	if s.Tracing {
		// The tracer comes first, so that it goes last: its last export
		// holds the spans of what closes before it.
		if srv.tracer, err = tracing.New(ctx, tracingOptions(s)); err != nil {
			return nil, fmt.Errorf("server: RLS_TRACING: %w", err)
		}
		srv.releases.push(func(ctx context.Context) {
			if err := srv.tracer.Shutdown(ctx); err != nil {
				logger.Warn("exporting the last traces", "err", err)
			}
		})
	}
	// What became of the ops of failed calls, which the backend reports to
	// the request path's followers.
	outcomes := new(rate.Outcomes)
	if srv.backend, err = newBackend(s, outcomes, logger); err != nil {
		return nil, err
	}
	srv.releases.push(func(context.Context) {
		if err := srv.backend.Close(); err != nil {
			logger.Warn("closing backend", "err", err)
		}
	})
	if srv.explain, err = explain.New(s); err != nil {
		return nil, err
	}
	if cfg != nil {
		srv.metrics.ObserveConfigLoaded()
	}
	path, err := newRequestPath(srv.backend, outcomes, cfg, s, srv.metrics, srv.tracer, logger)
	if err != nil {
		return nil, err
	}
	srv.service, srv.quota = path.service, path.quota
	// What the request path's layers hold (leases) is given back before
	// the backend closes.
	srv.releases.push(func(context.Context) { path.release() })
	srv.config = newConfigState(srv.service, source, cfg, time.Now(), logger)
	srv.OnConfigReload(srv.metrics.ObserveConfigReload)
	// Ready once limits are in force: at the start, or after the first
	// update of the source that brought some.
	srv.health.SetConfigLoaded(cfg != nil)
	srv.OnConfigReload(func(error) { srv.health.SetConfigLoaded(srv.config.Status().Config != nil) })
	srv.backendWatch = &backendWatch{backend: srv.backend, health: srv.health, interval: s.BackendHealthInterval, timeout: s.BackendHealthTimeout, log: logger,
		observe: srv.metrics.ObserveBackendCheck}
	srv.backendWatch.check(ctx)

	if err = srv.bind(s); err != nil {
		return nil, err
	}
	srv.newServers(s, cfg, grpcTLS, httpTLS)
	return srv, nil
}

// bind binds the listeners the settings s name: gRPC's, HTTP's unless
// RLS_HTTP_ADDR is empty, and the side servers' (listeners.go), and wraps
// the served ones in their connection limits. Each listener bound pushes
// its closing.
func (srv *Server) bind(s settings.Settings) error {
	var err error
	if srv.grpcLis, err = net.Listen("tcp", s.GRPCAddr); err != nil {
		return fmt.Errorf("server: RLS_GRPC_ADDR: %w", err)
	}
	srv.releases.push(closeListener(srv.grpcLis))
	if s.HTTPAddr != "" {
		if srv.httpLis, err = net.Listen("tcp", s.HTTPAddr); err != nil {
			return fmt.Errorf("server: RLS_HTTP_ADDR: %w", err)
		}
		srv.releases.push(closeListener(srv.httpLis))
	}
	if err := srv.bindSideListeners(s); err != nil {
		return err
	}
	srv.grpcServe = listen.Bounded(srv.grpcLis, s.GRPCMaxConnections)
	if srv.httpLis != nil {
		srv.httpServe = listen.Reserving(srv.httpLis, s.HTTPMaxConnections, s.HTTPProbeConnections)
	}
	return nil
}

// closeListener returns the release of l: closing it. Its error is
// dropped: once served, l has been closed by its server's stop already.
func closeListener(l io.Closer) func(context.Context) {
	return func(context.Context) { l.Close() }
}

// newServers builds the gRPC and HTTP servers over the service, with the
// TLS of grpcTLS and httpTLS (nil for none), the HTTP endpoints of the
// settings s for cfg, the configuration loaded at the start. It pushes
// stopServing.
func (srv *Server) newServers(s settings.Settings, cfg *config.Config, grpcTLS, httpTLS *tlsx.Server) {
	grpcOpts := append(grpcServerOptions(s), grpcBoundOptions(s)...)
	if srv.tracer != nil {
		grpcOpts = append(grpcOpts, srv.tracer.ServerOptions()...)
	}
	if grpcTLS != nil {
		grpcOpts = append(grpcOpts, grpc.Creds(credentials.NewTLS(tlsx.RequireClientName(grpcTLS.Config(), s.GRPCTlsClientSan, srv.log))))
	}
	srv.grpc = grpc.NewServer(grpcOpts...)
	rlsv3.RegisterRateLimitServiceServer(srv.grpc, srv.service)
	if srv.quota != nil {
		rlqsv3.RegisterRateLimitQuotaServiceServer(srv.grpc, srv.quota)
	}
	healthpb.RegisterHealthServer(srv.grpc, srv.health.Server())
	reflection.Register(srv.grpc)
	mux := newHTTPHandler(srv.service, srv.health, srv.httpOptions(cfg))
	mux.Handle("/metrics", srv.metrics.Handler())
	var handler http.Handler = mux
	if httpTLS.Mutual() {
		handler = tlsx.RequireClientCert(handler, probePaths[:]...)
	}
	handler = listen.ProbesOnly(handler, probePaths[:]...)
	srv.http = &http.Server{
		Handler:        handler,
		ConnContext:    listen.MarkReserved,
		ReadTimeout:    s.HTTPReadTimeout,
		WriteTimeout:   s.HTTPWriteTimeout,
		IdleTimeout:    s.HTTPIdleTimeout,
		MaxHeaderBytes: s.HTTPMaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(srv.log.Handler(), slog.LevelDebug),
	}
	if httpTLS != nil {
		srv.http.TLSConfig = httpTLS.Config()
	}
	srv.releases.push(srv.stopServing)
}

// GRPCServerOptions returns the options every ratewarden gRPC server is built
// with (TLS aside): a pool of stream workers, one per CPU, so that calls run
// on goroutines whose stacks have already grown instead of a new goroutine
// per call. The load generator's no-op baseline is built with them too.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0)))}
}

// grpcServerOptions returns the options of GRPCServerOptions for a server
// on the backend s names. A call on the memory backend never waits, and a
// worker per CPU takes the calls of that CPU. A call on Redis waits a round
// trip and holds its worker meanwhile: with a worker per CPU, nearly every
// call found them all busy and got a new goroutine, which grew its stack
// from 8 to 16 KiB on its way down the request path (runtime.copystack, a
// tenth of the server's CPU on cold keys). A server on Redis keeps
// redisStreamWorkers per CPU instead.
func grpcServerOptions(s settings.Settings) []grpc.ServerOption {
	if s.Backend != settings.BackendRedis {
		return GRPCServerOptions()
	}
	return []grpc.ServerOption{grpc.NumStreamWorkers(uint32(redisStreamWorkers * runtime.GOMAXPROCS(0)))}
}

// redisStreamWorkers is how many stream workers per CPU a server on Redis
// keeps: room for the calls a CPU has waiting on Redis at once. A call
// that finds every worker busy gets a goroutine of its own, as before. An
// idle worker costs a parked goroutine, whose stack the garbage collector
// shrinks, and the stack growth of the call it next takes.
const redisStreamWorkers = 64

// GRPCAddr returns the address the gRPC listener is bound to.
func (srv *Server) GRPCAddr() net.Addr { return srv.grpcLis.Addr() }

// HTTPAddr returns the address the HTTP listener is bound to, or nil when
// HTTP is disabled.
func (srv *Server) HTTPAddr() net.Addr {
	if srv.httpLis == nil {
		return nil
	}
	return srv.httpLis.Addr()
}

// Serve serves gRPC and HTTP until ctx ends, then shuts down gracefully:
// health turns NOT_SERVING, after RLS_SHUTDOWN_DELAY new calls are refused,
// and in-flight calls get up to RLS_SHUTDOWN_TIMEOUT to finish.
func (srv *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2+len(srv.side))
	go func() { errc <- srv.grpc.Serve(srv.grpcServe) }()
	if srv.httpLis != nil {
		go func() {
			if srv.http.TLSConfig != nil {
				errc <- srv.http.ServeTLS(srv.httpServe, "", "")
				return
			}
			errc <- srv.http.Serve(srv.httpServe)
		}()
	}
	srv.serveSide(errc)
	srv.log.Info("serving", "grpc", srv.GRPCAddr().String(), "http", addrString(srv.HTTPAddr()), "metrics", addrString(srv.MetricsAddr()), "backend", srv.settings.Backend)
	if err := srv.writeAddrFile(); err != nil {
		srv.shutdown()
		return err
	}
	stopConfig := srv.config.follow(ctx)
	defer stopConfig()
	stopBackendWatch := srv.backendWatch.start()

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("server: %w", err)
	}
	stopBackendWatch()
	srv.shutdown()
	return err
}

// shutdown stops the server: health turns NOT_SERVING, and after
// RLS_SHUTDOWN_DELAY what New acquired is released, last first, within
// RLS_SHUTDOWN_TIMEOUT: the servers stop serving (stopServing), the
// listeners close, the request path gives back its leases, the backend
// closes, and the tracer exports its last spans.
func (srv *Server) shutdown() {
	srv.log.Info("shutting down")
	srv.health.Shutdown()
	time.Sleep(srv.settings.ShutdownDelay)

	ctx, cancel := context.WithTimeout(context.Background(), srv.settings.ShutdownTimeout)
	defer cancel()
	srv.releases.run(ctx)
	srv.log.Info("stopped")
}

// stopServing stops the gRPC, HTTP and side servers within ctx: they take
// no new calls or connections, and those in flight may finish, all at
// once (the quota service's streams end at once: their Envoys reopen them
// elsewhere); gRPC calls still in flight when ctx ends are closed.
func (srv *Server) stopServing(ctx context.Context) {
	if srv.quota != nil {
		srv.quota.Drain() // its streams last as long as their Envoys
	}
	done := make(chan struct{})
	go func() {
		srv.grpc.GracefulStop()
		close(done)
	}()
	if srv.httpLis != nil {
		if err := srv.http.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			srv.log.Warn("http shutdown", "err", err)
		}
	}
	srv.closeSide(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		srv.log.Warn("in-flight calls did not finish in time; closing them", "timeout", srv.settings.ShutdownTimeout)
		srv.grpc.Stop()
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
