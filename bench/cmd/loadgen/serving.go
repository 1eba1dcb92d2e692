package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// servingTimeout bounds how long a started server may take to say SERVING.
const servingTimeout = 30 * time.Second

// startServing starts cfg's server (see proc.StartServer: its listeners on
// ports the kernel picks) and waits until its gRPC health says SERVING, so
// that a measurement starts against a server whose backend answers.
func startServing(ctx context.Context, cfg proc.ServerConfig) (*proc.Server, error) {
	ctx, cancel := context.WithTimeout(ctx, servingTimeout)
	defer cancel()
	s, err := proc.StartServer(ctx, cfg)
	if err == nil {
		err = s.WaitServing(ctx)
		if err != nil {
			s.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	return s, nil
}
