package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// sideListener is an HTTP server beside the main ones: the metrics-only
// server on RLS_METRICS_ADDR.
type sideListener struct {
	env  string // the variable that names its address
	lis  net.Listener
	http *http.Server
}

// bindSideListeners binds the listeners the settings ask for beside gRPC and
// HTTP. On error, whatever it bound is closed again.
func (srv *Server) bindSideListeners(s Settings) error {
	if s.MetricsAddr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", s.MetricsAddr)
	if err != nil {
		return fmt.Errorf("server: RLS_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(s.MetricsPath, srv.metrics.Handler())
	srv.side = append(srv.side, &sideListener{
		env: "RLS_METRICS_ADDR",
		lis: lis,
		http: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
		},
	})
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
