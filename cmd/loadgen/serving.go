package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/proc"
)

// servingTimeout bounds how long a started server may take to say SERVING.
const servingTimeout = 30 * time.Second

// startServing starts cfg's server (see proc.StartServer: its listeners on
// ports the kernel picks) and waits until its gRPC health says SERVING, so
// that a measurement starts against a server whose backend answers.
func startServing(ctx context.Context, cfg proc.ServerConfig) (*proc.Server, error) {
	s, err := proc.StartServer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	if err := waitServing(ctx, s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// waitServing waits until the gRPC health service of s answers SERVING, its
// process exits, or servingTimeout passes.
func waitServing(ctx context.Context, s *proc.Server) error {
	addr := s.Addrs[addrfile.GRPC]
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("loadgen: %s: %w", s, err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(servingTimeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if !s.Running() {
			return fmt.Errorf("loadgen: %s exited at start:\n%s", s, s.Tail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadgen: %s not SERVING on %s within %s (%v):\n%s", s, addr, servingTimeout, err, s.Tail(20))
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}
