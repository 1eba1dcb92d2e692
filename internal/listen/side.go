package listen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// sideReadHeaderTimeout bounds the time a side server waits for a
// request's headers.
const sideReadHeaderTimeout = 10 * time.Second

// Side is an HTTP server beside the main ones, such as the metrics-only
// server on RLS_METRICS_ADDR or the debug server on RLS_DEBUG_ADDR: bound
// by BindSide, then served by Serve until Shutdown, or closed by Close if
// it never serves.
type Side struct {
	name string
	lis  net.Listener
	http *http.Server
}

// BindSide binds addr for a side server of h, named name: the variable
// that names its address, which its errors begin with.
func BindSide(name, addr string, h http.Handler) (*Side, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", name, err)
	}
	return &Side{
		name: name,
		lis:  lis,
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: sideReadHeaderTimeout,
		},
	}, nil
}

// Name returns the side server's name.
func (s *Side) Name() string { return s.name }

// Addr returns the address the side server is bound to.
func (s *Side) Addr() net.Addr { return s.lis.Addr() }

// Serve serves until Shutdown, then returns nil; it returns any other end
// as an error that begins with the server's name.
func (s *Side) Serve() error {
	if err := s.http.Serve(s.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

// Shutdown shuts the side server down gracefully within ctx; when it
// cannot, it closes the server and its connections, and returns why.
func (s *Side) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	return err
}

// Close closes the listener of a side server that does not serve.
func (s *Side) Close() error { return s.lis.Close() }
