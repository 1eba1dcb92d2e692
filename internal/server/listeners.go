package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// sideListener is an HTTP server beside the main ones: the metrics-only
// server on RLS_METRICS_ADDR, the debug server on RLS_DEBUG_ADDR.
type sideListener struct {
	env  string // the variable that names its address
	lis  net.Listener
	http *http.Server
}

// bindSideListeners binds the listeners the settings ask for beside gRPC and
// HTTP. On error, whatever it bound is closed again.
func (srv *Server) bindSideListeners(s settings.Settings) error {
	if s.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle(s.MetricsPath, srv.metrics.Handler())
		if err := srv.bindSide("RLS_METRICS_ADDR", s.MetricsAddr, mux); err != nil {
			return err
		}
	}
	if s.DebugAddr != "" {
		if err := srv.bindSide("RLS_DEBUG_ADDR", s.DebugAddr, srv.debugHandler()); err != nil {
			srv.closeSideListeners()
			return err
		}
	}
	return nil
}

// bindSide binds one side listener, named by its variable env.
func (srv *Server) bindSide(env, addr string, h http.Handler) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %s: %w", env, err)
	}
	srv.side = append(srv.side, &sideListener{
		env: env,
		lis: lis,
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
		},
	})
	return nil
}

// closeSideListeners closes the side listeners before they serve.
func (srv *Server) closeSideListeners() {
	for _, l := range srv.side {
		l.lis.Close()
	}
	srv.side = nil
}

// debugEndpoints are what the debug server serves, with what they are, as
// its index lists them.
var debugEndpoints = []struct{ path, help string }{
	{"/rlconfig", "the limits in force, as on the HTTP port"},
	{"/metrics", "the metrics, as on the HTTP port"},
	{"/debug/pprof/", "the Go profiles: heap, goroutine, allocs, ... (profile for CPU, trace for an execution trace)"},
}

// debugHandler serves the debug endpoints, as envoyproxy/ratelimit's debug
// port does: the limits in force, the metrics, and the Go profiles.
func (srv *Server) debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/rlconfig", newHTTPHandler(srv.service, srv.health, httpOptions{configStatus: srv.config.Status}))
	mux.Handle("/metrics", srv.metrics.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, e := range debugEndpoints {
			fmt.Fprintf(w, "%s: %s\n", e.path, e.help)
		}
	})
	return mux
}

// DebugAddr returns the address the debug listener is bound to, or nil
// without RLS_DEBUG_ADDR.
func (srv *Server) DebugAddr() net.Addr {
	for _, l := range srv.side {
		if l.env == "RLS_DEBUG_ADDR" {
			return l.lis.Addr()
		}
	}
	return nil
}

// MetricsAddr returns the address the metrics-only listener is bound to, or
// nil without RLS_METRICS_ADDR.
func (srv *Server) MetricsAddr() net.Addr {
	for _, l := range srv.side {
		if l.env == "RLS_METRICS_ADDR" {
			return l.lis.Addr()
		}
	}
	return nil
}

// writeAddrFile writes the addresses of the listeners to RLS_ADDR_FILE,
// when it is set.
func (srv *Server) writeAddrFile() error {
	path := srv.settings.AddrFile
	if path == "" {
		return nil
	}
	addrs := addrfile.Addrs{}
	for name, a := range map[string]net.Addr{
		addrfile.GRPC:    srv.GRPCAddr(),
		addrfile.HTTP:    srv.HTTPAddr(),
		addrfile.Metrics: srv.MetricsAddr(),
		addrfile.Debug:   srv.DebugAddr(),
	} {
		if a != nil {
			addrs[name] = a.String()
		}
	}
	if err := addrfile.Write(path, addrs); err != nil {
		return fmt.Errorf("server: RLS_ADDR_FILE: %w", err)
	}
	return nil
}

// serveSide serves every side listener, each sending its end to errc, which
// must have room for them all.
func (srv *Server) serveSide(errc chan<- error) {
	for _, l := range srv.side {
		go func() {
			if err := l.http.Serve(l.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", l.env, err)
				return
			}
			errc <- nil
		}()
	}
}

// closeSide shuts the side listeners down within ctx, or closes them.
func (srv *Server) closeSide(ctx context.Context) {
	for _, l := range srv.side {
		if err := l.http.Shutdown(ctx); err != nil {
			srv.log.Warn("side listener shutdown", "listener", l.env, "err", err)
			l.http.Close()
		}
	}
}
