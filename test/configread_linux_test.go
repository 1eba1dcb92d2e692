package test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/filehold"
)

func TestStartupRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	p, exited := runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": fifo}, 10*time.Second, 0)
	require.True(t, exited, "the server waited for the named pipe:\n%s", p.Output())
	assert.Contains(t, p.Output(), fifo+": cannot read: a named pipe (FIFO), not a regular file")
}

func TestStartupGivesUpOnAHungConfigRead(t *testing.T) {
	dir := writeConfig(t, faultLimits)
	filehold.Hold(t, filepath.Join(dir, "limits.yaml"))
	p, exited := runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_READ_TIMEOUT": "500ms"}, 10*time.Second, 0)
	require.True(t, exited, "the server waited for the hung read:\n%s", p.Output())
	assert.Contains(t, p.Output(), filepath.Join(dir, "limits.yaml")+": cannot read: the read did not finish in time")

	// SIGTERM stops a start whose read hangs, whatever the timeout.
	p, exited = runUntilExit(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_READ_TIMEOUT": "1h"}, 5*time.Second, 500*time.Millisecond)
	require.True(t, exited, "SIGTERM did not stop the server while its config read hung:\n%s", p.Output())
}

func TestReloadOfANamedPipeKeepsTheLimits(t *testing.T) {
	dir := writeConfig(t, faultLimits)
	srv := startServer(t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_CONFIG_POLL_INTERVAL": "100ms", "RLS_LOG_LEVEL": "info"})
	path := filepath.Join(dir, "limits.yaml")
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	require.Eventually(t, func() bool {
		return strings.Contains(srv.Output(), "named pipe (FIFO), not a regular file")
	}, 10*time.Second, 20*time.Millisecond, "the reload error is logged")
	assert.Contains(t, srv.Output(), "the previous one stays in force")
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
	srv.Signal(syscall.SIGTERM)
	select {
	case <-srv.Exited():
		t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not stop within 10s of SIGTERM while a config read hung\n%s", srv.Output())
	}
}
