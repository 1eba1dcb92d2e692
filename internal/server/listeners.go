package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/listen"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// bindSideListeners binds the side servers the settings ask for beside
// gRPC and HTTP: the metrics-only server on RLS_METRICS_ADDR and the debug
// server on RLS_DEBUG_ADDR. Each pushes its closing.
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
			return err
		}
	}
	return nil
}

// bindSide binds one side server, named by its variable env.
func (srv *Server) bindSide(env, addr string, h http.Handler) error {
	side, err := listen.BindSide(env, addr, h)
	if err != nil {
		return err
	}
	srv.side = append(srv.side, side)
	srv.releases.push(closeListener(side))
	return nil
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
		if l.Name() == "RLS_DEBUG_ADDR" {
			return l.Addr()
		}
	}
	return nil
}

// MetricsAddr returns the address the metrics-only listener is bound to, or
// nil without RLS_METRICS_ADDR.
func (srv *Server) MetricsAddr() net.Addr {
	for _, l := range srv.side {
		if l.Name() == "RLS_METRICS_ADDR" {
			return l.Addr()
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

// serveSide serves every side server, each sending its end to errc, which
// must have room for them all.
func (srv *Server) serveSide(errc chan<- error) {
	for _, l := range srv.side {
		go func() { errc <- l.Serve() }()
	}
}

// closeSide shuts the side servers down within ctx, or closes them.
func (srv *Server) closeSide(ctx context.Context) {
	for _, l := range srv.side {
		if err := l.Shutdown(ctx); err != nil {
			srv.log.Warn("side listener shutdown", "listener", l.Name(), "err", err)
		}
	}
}
