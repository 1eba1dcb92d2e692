package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/ratewarden/ratewarden/internal/server"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// serveProfiled runs ratewarden's server exactly as cmd/server does (settings
// from the RLS_* environment, server.New, Serve until ctx ends) while
// recording a CPU profile into cpuPath; when allocsPath is not empty it also
// writes the allocation profile there on the way out. The server serves
// /debug/pprof/ on RLS_DEBUG_ADDR too, but a CPU profile taken there covers the
// seconds it is asked for; this one covers the server's whole run, which is
// what the bench's profiled cells report.
func serveProfiled(ctx context.Context, cpuPath, allocsPath string, stderr io.Writer) (err error) {
	if cpuPath == "" {
		return errors.New("loadgen: serve needs -cpuprofile")
	}
	s, err := settings.Load(os.LookupEnv)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, s, s.NewLogger(stderr))
	if err != nil {
		return err
	}
	f, err := os.Create(cpuPath)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("loadgen: %w", cerr)
		}
	}()
	if err := pprof.StartCPUProfile(f); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	serveErr := srv.Serve(ctx)
	pprof.StopCPUProfile()
	if allocsPath != "" {
		if err := writeAllocs(allocsPath); err != nil {
			return errors.Join(serveErr, err)
		}
	}
	return serveErr
}

// writeAllocs writes the allocation profile (every allocation since the
// process started) to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("loadgen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return nil
}
