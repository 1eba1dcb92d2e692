package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/filehold"
)

// runUntilExit runs the server binary with env until it exits by itself
// (or is killed after within) and returns its output and whether it exited
// in time.
func runUntilExit(t *testing.T, env map[string]string, within time.Duration, signalAfter time.Duration) (string, bool) {
	t.Helper()
	cmd := exec.Command(serverBinary)
	cmd.Env = os.Environ()
	vars := map[string]string{"RLS_GRPC_ADDR": freeAddr(t), "RLS_HTTP_ADDR": freeAddr(t)}
	for k, v := range env {
		vars[k] = v
	}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	if signalAfter > 0 {
		select {
		case <-exited:
			return out.String(), true
		case <-time.After(signalAfter):
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	}
	select {
	case <-exited:
		return out.String(), true
	case <-time.After(within):
		cmd.Process.Kill()
		<-exited
		return out.String(), false
	}
}

func TestStartupRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	out, exited := runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": fifo}, 10*time.Second, 0)
	require.True(t, exited, "the server waited for the named pipe:\n%s", out)
	assert.Contains(t, out, fifo+": cannot read: a named pipe (FIFO), not a regular file")
}

func TestStartupGivesUpOnAHungConfigRead(t *testing.T) {
	dir := writeConfig(t, faultLimits)
	filehold.Hold(t, filepath.Join(dir, "limits.yaml"))
	out, exited := runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_READ_TIMEOUT": "500ms"}, 10*time.Second, 0)
	require.True(t, exited, "the server waited for the hung read:\n%s", out)
	assert.Contains(t, out, filepath.Join(dir, "limits.yaml")+": cannot read: the read did not finish in time")

	// SIGTERM stops a start whose read hangs, whatever the timeout.
	out, exited = runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_READ_TIMEOUT": "1h"}, 5*time.Second, 500*time.Millisecond)
	require.True(t, exited, "SIGTERM did not stop the server while its config read hung:\n%s", out)
}

func TestReloadOfANamedPipeKeepsTheLimits(t *testing.T) {
	dir := writeConfig(t, faultLimits)
	srv := startServer(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_POLL_INTERVAL": "100ms", "RLS_LOG_LEVEL": "info"})
	path := filepath.Join(dir, "limits.yaml")
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	require.Eventually(t, func() bool {
		return strings.Contains(srv.Logs(), "named pipe (FIFO), not a regular file")
	}, 10*time.Second, 20*time.Millisecond, "the reload error is logged")
	assert.Contains(t, srv.Logs(), "the previous one stays in force")
	for i := range 5 {
		a := ask(srv, "error", faultRequest("user", "fifo"))
		require.True(t, a.decided, "request %d: %s", i, a.problem)
		require.Equal(t, "OK", a.code)
	}
	assert.Equal(t, "OVER_LIMIT", ask(srv, "error", faultRequest("user", "fifo")).code, "the limits in force stay")
}

func TestSIGTERMDuringAHungReload(t *testing.T) {
	dir := writeConfig(t, faultLimits)
	srv := startServer(t, map[string]string{
		"RLS_CONFIG_PATH":          dir,
		"RLS_CONFIG_POLL_INTERVAL": "50ms",
		"RLS_CONFIG_READ_TIMEOUT":  "1h",
	})
	filehold.Hold(t, filepath.Join(dir, "limits.yaml"))
	time.Sleep(500 * time.Millisecond) // several polls: a reload is hung

	// The server still answers while its reload hangs.
	a := ask(srv, "error", faultRequest("user", "hung"))
	require.True(t, a.decided, a.problem)

	start := time.Now()
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-srv.exited:
		t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not stop within 10s of SIGTERM while a config read hung\n%s", srv.Logs())
	}
}
