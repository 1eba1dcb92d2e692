// Package test holds ratewarden's black-box tests: the real server binary,
// real redis-server processes and real gRPC clients.
package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/testkit/proc"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// serverBinary is the server built once for the whole test binary.
var serverBinary string

// TestMain runs the tests of the package (see suite), or, when the test
// binary runs as docsStandIn, that.
func TestMain(m *testing.M) {
	testscript.Main(suite{m}, map[string]func(){docsStandInName: docsStandIn})
}

// suite runs the package's tests: it builds the server first, and stops
// the shared Redis processes after.
type suite struct{ m *testing.M }

func (s suite) Run() int {
	dir, err := os.MkdirTemp("", "ratewarden-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	serverBinary = filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", serverBinary, "../cmd/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "test: building the server:", err)
		return 2
	}
	return redistest.Main(s.m)
}

// serverProcess is one running server binary with gRPC clients of it.
type serverProcess struct {
	*proc.Server
	t        testing.TB
	GRPCAddr string
	HTTPAddr string // empty when HTTP is off
	conn     *grpc.ClientConn
	Client   rlsv3.RateLimitServiceClient
	Health   healthpb.HealthClient
}

// startServer starts the server binary with the example configuration and
// env (RLS_* variables) on top; see startServerAt.
func startServer(t testing.TB, env map[string]string) *serverProcess {
	t.Helper()
	vars := map[string]string{"RLS_CONFIG_PATH": "../config"}
	for k, v := range env {
		vars[k] = v
	}
	return startServerAt(t, "", vars)
}

// startServerAt starts the server binary in dir (the test's own directory
// when empty) with warn-level logs (unless env sets envoyproxy/ratelimit's
// LOG_LEVEL, which then decides) and env, as `go run ./cmd/server` would
// start there. Its listeners are on ports the kernel picks (unless env
// names others), and it returns once the server has named them in
// RLS_ADDR_FILE, which it does once it serves. It is stopped with SIGTERM
// when the test ends.
func startServerAt(t testing.TB, dir string, env map[string]string) *serverProcess {
	t.Helper()
	return startServerWith(t, dir, env, insecure.NewCredentials())
}

// startServerWith is startServerAt for a server whose gRPC clients connect
// with creds: TLS when env makes the server serve gRPC over TLS.
func startServerWith(t testing.TB, dir string, env map[string]string, creds credentials.TransportCredentials) *serverProcess {
	t.Helper()
	p, err := launchServer(t, dir, env, creds)
	require.NoError(t, err)
	return p
}

// launchServer is startServerWith, returning the error that would fail the
// test.
func launchServer(t testing.TB, dir string, env map[string]string, creds credentials.TransportCredentials) (*serverProcess, error) {
	vars := map[string]string{}
	if _, theirs := env["LOG_LEVEL"]; !theirs {
		vars["RLS_LOG_LEVEL"] = "warn"
	}
	for k, v := range env {
		vars[k] = v
	}
	srv, err := proc.StartServer(t.Context(), proc.ServerConfig{Name: "server", Bin: serverBinary, Dir: dir, Env: vars})
	if err != nil {
		return nil, err
	}
	p := &serverProcess{Server: srv, t: t, GRPCAddr: srv.Addrs[addrfile.GRPC], HTTPAddr: srv.Addrs[addrfile.HTTP]}
	t.Cleanup(p.Stop)
	if p.conn, err = grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(creds)); err != nil {
		return nil, err
	}
	p.Client = rlsv3.NewRateLimitServiceClient(p.conn)
	p.Health = healthpb.NewHealthClient(p.conn)
	// One health call, answered whatever the backend's state, brings the
	// connection up, so the test's first call does not pay for it.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := p.Health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		return nil, fmt.Errorf("the server's gRPC health does not answer: %w\n%s", err, p.Output())
	}
	return p, nil
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 10s).
// The server's output is logged when the test failed.
func (p *serverProcess) Stop() {
	if p.conn != nil {
		p.conn.Close()
	}
	p.Close()
	if p.t.Failed() {
		p.t.Logf("server %s output:\n%s", p.GRPCAddr, p.Output())
	}
}

// Serving reports whether the server's gRPC health says SERVING.
func (p *serverProcess) Serving(ctx context.Context) bool {
	resp, err := p.Health.Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// runUntilExit runs the server binary with env, on ports the kernel picks,
// until it exits by itself or is killed after within; with signalAfter, it
// is sent SIGTERM after that long. It returns the process, for its output
// and exit code, and whether it exited in time.
func runUntilExit(t testing.TB, env map[string]string, within, signalAfter time.Duration) (*proc.Process, bool) {
	t.Helper()
	vars := map[string]string{"RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		vars[k] = v
	}
	p, err := proc.Start(proc.Command{Name: "server", Bin: serverBinary, Env: proc.Environ(vars)})
	require.NoError(t, err)
	if signalAfter > 0 {
		select {
		case <-p.Exited():
			return p, true
		case <-time.After(signalAfter):
		}
		p.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.Exited():
		return p, true
	case <-time.After(within):
		p.Kill()
		return p, false
	}
}

// writeConfig writes a limits file into a new directory and returns the
// directory, for RLS_CONFIG_PATH.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(strings.TrimLeft(yaml, "\n")), 0o644))
	return dir
}
