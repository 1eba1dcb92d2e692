package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// processStopTimeout bounds a graceful stop before the process is killed.
const processStopTimeout = 15 * time.Second

// process is a child process the bench started: a redis-server, a
// ratewarden server or a no-op server. Its output is kept for error
// messages. Its methods are safe for concurrent use.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}

	mu  sync.Mutex
	out bytes.Buffer
}

// startProcess starts bin with args and, on top of the environment without
// any RLS_ variable, env. The process is killed when the bench dies.
func startProcess(name, dir, bin string, args []string, env map[string]string) (*process, error) {
	p := &process{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RLS_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout = p
	p.cmd.Stderr = p
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadgen: start %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Write collects the process's output.
func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// output returns the last lines the process wrote.
func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(strings.TrimRight(p.out.String(), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// processStopTimeout.
func (p *process) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(processStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("loadgen: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitServing waits until the gRPC health service at addr answers SERVING,
// the process exits, or timeout passes.
func waitServing(ctx context.Context, p *process, addr string, timeout time.Duration) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("loadgen: %s: %w", p.name, err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(timeout)
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := health.Check(callCtx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("loadgen: %s exited at start:\n%s", p.name, p.output())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadgen: %s not SERVING on %s within %s (%v):\n%s", p.name, addr, timeout, err, p.output())
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// portOf returns the port of a host:port address.
func portOf(addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("loadgen: %w", err)
	}
	return strconv.Atoi(port)
}
