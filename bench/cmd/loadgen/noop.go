package main

import (
	"context"
	"fmt"
	"io"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/server"
)

// noopService answers every ShouldRateLimit with OK and one OK status per
// descriptor, doing nothing else: the ceiling of what any rate limit service
// can answer through the same gRPC path. It is safe for concurrent use.
type noopService struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit admits req.
func (noopService) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range statuses {
		statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: statuses}, nil
}

// newNoopServer returns a gRPC server of the no-op service and of health
// (always SERVING), built with the options ratewarden's own is built with.
func newNoopServer() *grpc.Server {
	srv := grpc.NewServer(server.GRPCServerOptions()...)
	rlsv3.RegisterRateLimitServiceServer(srv, noopService{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	return srv
}

// serveNoop serves the no-op service on addr until ctx ends. With addrFile,
// it names the address it is bound to there, as the server does in
// RLS_ADDR_FILE, so the bench starts both alike.
func serveNoop(ctx context.Context, addr, addrFile string, stderr io.Writer) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("loadgen: noop: %w", err)
	}
	srv := newNoopServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	fmt.Fprintf(stderr, "loadgen: no-op RateLimitService on %s\n", lis.Addr())
	if addrFile != "" {
		if err := addrfile.Write(addrFile, addrfile.Addrs{addrfile.GRPC: lis.Addr().String()}); err != nil {
			srv.Stop()
			<-errc
			return fmt.Errorf("loadgen: noop: %w", err)
		}
	}
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("loadgen: noop: %w", err)
	}
}
