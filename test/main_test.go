// Package test holds ratewarden's black-box tests: the real server binary,
// real redis-server processes and real gRPC clients.
package test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/redistest"
)

// serverBinary is the server built once for the whole test binary.
var serverBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratewarden-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(2)
	}
	serverBinary = filepath.Join(dir, "server")
	build := exec.Command("go", "build", "-o", serverBinary, "../cmd/server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "test: building the server:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	redistest.Main(m)
	os.RemoveAll(dir)
}

// serverProcess is one running server binary.
type serverProcess struct {
	t        testing.TB
	cmd      *exec.Cmd
	GRPCAddr string
	HTTPAddr string
	conn     *grpc.ClientConn
	Client   rlsv3.RateLimitServiceClient
	Health   healthpb.HealthClient

	mu     sync.Mutex
	logs   bytes.Buffer
	exited chan struct{}
}

// startServer starts the server binary on free loopback ports with the
// example configuration and env (RLS_* variables) on top, and waits until
// its gRPC port answers. It is stopped with SIGTERM when the test ends.
func startServer(t testing.TB, env map[string]string) *serverProcess {
	t.Helper()
	vars := map[string]string{"RLS_CONFIG_PATH": "../config"}
	for k, v := range env {
		vars[k] = v
	}
	return startServerAt(t, "", vars)
}

// startServerAt starts the server binary in dir (the test's own directory
// when empty) with free loopback ports, warn-level logs (unless env sets
// envoyproxy/ratelimit's LOG_LEVEL, which then decides) and env, as
// `go run ./cmd/server` would start there, and waits until it answers a
// gRPC health check. It is stopped with SIGTERM when the test ends.
//
// A port that was free when it was picked can be taken before the server
// binds it (an outgoing connection's ephemeral port, a Redis cluster bus),
// so a start that fails with "address already in use" is tried again on
// new ports.
func startServerAt(t testing.TB, dir string, env map[string]string) *serverProcess {
	t.Helper()
	return startServerWith(t, dir, env, insecure.NewCredentials())
}

// startServerWith is startServerAt for a server whose gRPC clients, the
// test's and the health checks that wait for it, connect with creds: TLS
// when env makes the server serve gRPC over TLS.
func startServerWith(t testing.TB, dir string, env map[string]string, creds credentials.TransportCredentials) *serverProcess {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, inUse := launchServer(t, dir, env, creds)
		if p != nil {
			return p
		}
		if !inUse || attempt == 5 {
			t.Fatalf("server did not start after %d attempts", attempt)
		}
		t.Logf("server start %d: a port was taken before the server bound it; trying new ports", attempt)
	}
}

// launchServer makes one attempt of startServerAt. It returns nil and true
// when the server exited because one of its ports was already in use.
func launchServer(t testing.TB, dir string, env map[string]string, creds credentials.TransportCredentials) (*serverProcess, bool) {
	t.Helper()
	p := &serverProcess{t: t, GRPCAddr: freeAddr(t), HTTPAddr: freeAddr(t), exited: make(chan struct{})}
	vars := map[string]string{
		"RLS_GRPC_ADDR": p.GRPCAddr,
		"RLS_HTTP_ADDR": p.HTTPAddr,
	}
	if _, theirs := env["LOG_LEVEL"]; !theirs {
		vars["RLS_LOG_LEVEL"] = "warn"
	}
	for k, v := range env {
		vars[k] = v
	}
	p.cmd = exec.Command(serverBinary)
	p.cmd.Dir = dir
	p.cmd.Env = os.Environ()
	for k, v := range vars {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout = p
	p.cmd.Stderr = p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start())
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()

	// Readiness is a gRPC health answer, not an open port: the kernel
	// accepts on the gRPC port from the moment it is bound, before the
	// HTTP port is, and something else may hold a port that looks open.
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	p.conn = conn
	p.Client = rlsv3.NewRateLimitServiceClient(conn)
	p.Health = healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := p.Health.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		select {
		case <-p.exited:
			conn.Close()
			if strings.Contains(p.Logs(), "address already in use") {
				return nil, true
			}
			t.Fatalf("server exited at start: %v\n%s", p.cmd.ProcessState, p.Logs())
		default:
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
			break // any answer from the server, even NOT_SERVING
		}
		if time.Now().After(deadline) {
			p.Stop()
			t.Fatalf("server did not answer health checks on %s within 15s: %v\n%s", p.GRPCAddr, err, p.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(p.Stop)
	return p, false
}

// Write collects the server's output.
func (p *serverProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.Write(b)
}

// Logs returns what the server has written so far.
func (p *serverProcess) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after 10s).
// The server's output is logged when the test failed.
func (p *serverProcess) Stop() {
	if p.conn != nil {
		p.conn.Close()
	}
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if p.t.Failed() {
		p.t.Logf("server %s output:\n%s", p.GRPCAddr, p.Logs())
	}
}

// Serving reports whether the server's gRPC health says SERVING.
func (p *serverProcess) Serving(ctx context.Context) bool {
	resp, err := p.Health.Check(ctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// writeConfig writes a limits file into a new directory and returns the
// directory, for RLS_CONFIG_PATH.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "limits.yaml"), []byte(strings.TrimLeft(yaml, "\n")), 0o644))
	return dir
}
