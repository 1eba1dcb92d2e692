// Package xdstest runs an xDS management server for tests: go-control-plane's
// state-of-the-world server over a snapshot cache, as Envoy Gateway runs one
// for envoyproxy/ratelimit, on a loopback port. It records every request
// its clients send, so that a test can wait for an ACK or a NACK. It also
// builds what Envoy Gateway's translator builds from BackendTrafficPolicy
// rules: the RateLimitConfig resources, and the rate limits of each route,
// from which it computes the requests Envoy sends (gateway.go).
package xdstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// Server is a running management server. Its methods are safe for
// concurrent use.
type Server struct {
	t     testing.TB
	cache cachev3.SnapshotCache
	tls   *tls.Config
	addr  string

	mu       sync.Mutex
	grpc     *grpc.Server
	serving  chan struct{} // closed when grpc has stopped serving
	requests []Request
	streams  int
	changed  chan struct{} // closed and replaced at every new request
}

// Request is one DiscoveryRequest a client sent, with the stream it came on
// and the gRPC metadata that stream opened with.
type Request struct {
	*discoveryv3.DiscoveryRequest
	Stream   int64
	Metadata metadata.MD
}

// ACK reports whether r accepts the response with the given version.
func (r Request) ACK(version string) bool {
	return r.ResponseNonce != "" && r.ErrorDetail == nil && r.VersionInfo == version
}

// NACK reports whether r rejects a response.
func (r Request) NACK() bool { return r.ErrorDetail != nil }

// Start starts a server on 127.0.0.1 with a free port, serving over TLS when
// tlsConfig is not nil. It is stopped when the test ends.
func Start(t testing.TB, tlsConfig *tls.Config) *Server {
	t.Helper()
	s := &Server{
		t:       t,
		cache:   cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil),
		tls:     tlsConfig,
		changed: make(chan struct{}),
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("xdstest: %v", err)
	}
	s.addr = lis.Addr().String()
	s.serve(lis)
	t.Cleanup(s.Stop)
	return s
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.addr }

// serve serves lis with a new gRPC server.
func (s *Server) serve(lis net.Listener) {
	var opts []grpc.ServerOption
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	g := grpc.NewServer(opts...)
	metadataOf := map[int64]metadata.MD{}
	callbacks := serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, id int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			s.mu.Lock()
			defer s.mu.Unlock()
			s.streams++
			metadataOf[id] = md
			return nil
		},
		StreamRequestFunc: func(id int64, req *discoveryv3.DiscoveryRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.requests = append(s.requests, Request{DiscoveryRequest: req, Stream: id, Metadata: metadataOf[id]})
			close(s.changed)
			s.changed = make(chan struct{})
			return nil
		},
	}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(context.Background(), s.cache, callbacks))
	serving := make(chan struct{})
	go func() {
		defer close(serving)
		g.Serve(lis)
	}()
	s.mu.Lock()
	s.grpc, s.serving = g, serving
	s.mu.Unlock()
}

// Set serves resources to node as the snapshot of the given version.
func (s *Server) Set(node, version string, resources ...*rlsconfv3.RateLimitConfig) {
	s.t.Helper()
	rs := make([]types.Resource, len(resources))
	for i, r := range resources {
		rs[i] = r
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: rs})
	if err != nil {
		s.t.Fatalf("xdstest: %v", err)
	}
	if err := s.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		s.t.Fatalf("xdstest: %v", err)
	}
}

// Stop stops the server at once, ending every stream, as a management
// server that dies does. The snapshots stay for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	g, serving := s.grpc, s.serving
	s.grpc = nil
	s.mu.Unlock()
	if g != nil {
		g.Stop()
		<-serving
	}
}

// Restart serves again on the same address, after Stop.
func (s *Server) Restart() {
	s.t.Helper()
	var lis net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if lis, err = net.Listen("tcp", s.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("xdstest: listening on %s again: %v", s.addr, err)
	}
	s.serve(lis)
}

// Streams returns how many streams clients have opened.
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// Requests returns every request clients have sent, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ErrTimeout is what WaitFor returns when no request matched in time.
var ErrTimeout = errors.New("xdstest: no matching request in time")

// WaitFor returns the first request, among those sent already and those to
// come within timeout, for which match is true.
func (s *Server) WaitFor(timeout time.Duration, match func(Request) bool) (Request, error) {
	return s.WaitFrom(0, timeout, match)
}

// WaitFrom is WaitFor for the requests from the from-th on (0-based, in
// the order of Requests), so that a test can wait for what is sent after a
// point.
func (s *Server) WaitFrom(from int, timeout time.Duration, match func(Request) bool) (Request, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := from
	for {
		s.mu.Lock()
		reqs, changed := s.requests[seen:], s.changed
		seen = len(s.requests)
		s.mu.Unlock()
		for _, r := range reqs {
			if match(r) {
				return r, nil
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return Request{}, ErrTimeout
		}
	}
}

// MutualTLS returns the TLS configuration of a management server that serves
// the server certificate of certs and demands client certificates signed by
// their CA, as Envoy Gateway's does, and a pool holding that CA, for
// clients.
func MutualTLS(t testing.TB, certs redistest.Certs) (*tls.Config, *x509.CertPool) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certs.ServerCertFile, certs.ServerKeyFile)
	if err != nil {
		t.Fatalf("xdstest: %v", err)
	}
	pem, err := os.ReadFile(certs.CAFile)
	if err != nil {
		t.Fatalf("xdstest: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("xdstest: no certificate in %s", certs.CAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, pool
}
