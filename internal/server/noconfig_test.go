package server

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/metrics"
)

// healthOf returns the gRPC health of the server as a whole.
func healthOf(t *testing.T, s *started) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := healthpb.NewHealthClient(s.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	return resp.GetStatus()
}

// TestServerWaitsForConfiguration: a server whose RLS_CONFIG_PATH has
// nothing to load yet (a path that does not exist, or an empty directory,
// as when a volume is mounted late) starts, answers every request with
// envoyproxy/ratelimit's error before its first configuration, so that
// Envoy's failure mode decides, and is not ready; once files appear, it
// loads them and is.
func TestServerWaitsForConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) (path string, appear func())
	}{
		{"missing directory", func(t *testing.T) (string, func()) {
			dir := filepath.Join(t.TempDir(), "data", "ratelimit", "config")
			return dir, func() {
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, writeFile(filepath.Join(dir, "reload.yaml"), reloadYAML(4)))
			}
		}},
		{"empty directory", func(t *testing.T) (string, func()) {
			dir := t.TempDir()
			return dir, func() {
				sub := filepath.Join(dir, "team")
				require.NoError(t, os.Mkdir(sub, 0o755))
				require.NoError(t, writeFile(filepath.Join(sub, "reload.yaml"), reloadYAML(4)))
			}
		}},
		{"missing file", func(t *testing.T) (string, func()) {
			path := filepath.Join(t.TempDir(), "limits.yaml")
			return path, func() { require.NoError(t, writeFile(path, reloadYAML(4))) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, appear := tc.make(t)
			// Polling off: the files must be noticed through notifications.
			s := start(t, map[string]string{"RLS_CONFIG_PATH": path, "RLS_CONFIG_POLL_INTERVAL": "0s"})
			ctx := context.Background()

			assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, healthOf(t, s))
			code, _ := getBody(t, s.http+"/healthcheck")
			assert.Equal(t, http.StatusOK, code, "live while it waits for files")
			code, body := getBody(t, s.http+"/ready")
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.Contains(t, body, "no rate limit configuration loaded")
			code, _ = getBody(t, s.http+"/rlconfig")
			assert.Equal(t, http.StatusServiceUnavailable, code)
			assert.Equal(t, 0.0, scrapeMetrics(t, s.http)[metrics.ConfigLoaded], "no limits in force")
			for range 5 {
				_, err := s.client.ShouldRateLimit(ctx, reloadRequest("v"))
				assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
				assert.ErrorContains(t, err, "no rate limit configuration loaded")
			}

			appear()
			require.Eventually(t, func() bool {
				rpu, err := limitOf(ctx, s.client, "w")
				return err == nil && rpu == 4
			}, 5*time.Second, tick)
			// Readiness follows once the reload's hooks have run.
			require.Eventually(t, func() bool { return healthOf(t, s) == healthpb.HealthCheckResponse_SERVING }, 5*time.Second, tick)
			code, _ = getBody(t, s.http+"/healthcheck")
			assert.Equal(t, http.StatusOK, code)
			code, body = getBody(t, s.http+"/rlconfig")
			assert.Equal(t, http.StatusOK, code)
			assert.Contains(t, body, "requests_per_unit=4 ")
			assert.Equal(t, 1.0, scrapeMetrics(t, s.http)[metrics.ConfigLoaded])
		})
	}
}

// TestServerKeepsLimitsWhenFilesGo: once limits are in force, a path that
// loses its files is a failed reload, as a broken file is: the limits stay
// and the server stays ready.
func TestServerKeepsLimitsWhenFilesGo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.yaml")
	require.NoError(t, writeFile(file, reloadYAML(3)))
	s := start(t, map[string]string{"RLS_CONFIG_PATH": dir})
	reloads := &outcomes{}
	s.srv.OnConfigReload(reloads.add)

	require.NoError(t, os.Remove(file))
	require.Eventually(t, func() bool { return len(reloads.all()) == 1 }, 5*time.Second, tick)
	assert.Error(t, reloads.all()[0])
	rpu, err := limitOf(context.Background(), s.client, "v")
	require.NoError(t, err)
	assert.EqualValues(t, 3, rpu)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, healthOf(t, s))
}

// TestNothingToLoadWithoutWatchStopsStartup: without RLS_CONFIG_WATCH the
// files would never be read again, so a path with nothing to load is an
// error at the start.
func TestNothingToLoadWithoutWatchStopsStartup(t *testing.T) {
	err := startError(t, map[string]string{"RLS_CONFIG_PATH": t.TempDir(), "RLS_CONFIG_WATCH": "false"})
	assert.Contains(t, err.Error(), "RLS_CONFIG_PATH")
	assert.Contains(t, err.Error(), "no configuration files")
}

// startError builds a server with the environment env on top of the
// defaults, which must fail, and returns its error.
func startError(t *testing.T, env map[string]string) error {
	t.Helper()
	vars := map[string]string{"RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": ""}
	maps.Copy(vars, env)
	set, err := loadSettings(vars)
	require.NoError(t, err)
	srv, err := New(context.Background(), set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if srv != nil {
		srv.releases.run(context.Background())
	}
	require.Error(t, err)
	return err
}

// TestConfigSettings: the settings of how files are read reach the loader.
func TestConfigSettings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(filepath.Join(dir, "a.yaml"), "domain: reload\ndescriptors:\n  - {key: k, value: \"w*\", rate_limit: {unit: minute, requests_per_unit: 5}}\n"))
	require.NoError(t, writeFile(filepath.Join(dir, "b.yaml"), "domain: reload\ndescriptors:\n  - {key: k, value: \"wi*\", rate_limit: {unit: minute, requests_per_unit: 6}}\n"))
	require.NoError(t, writeFile(filepath.Join(dir, ".c.yaml"), "domain: dot\n"))

	err := startError(t, map[string]string{"RLS_CONFIG_PATH": dir})
	assert.Contains(t, err.Error(), `duplicate domain "reload"`, "one domain in two files")

	for _, tc := range []struct {
		env map[string]string
		rpu uint32
		dot bool
	}{
		{map[string]string{"RLS_CONFIG_MERGE_DOMAINS": "true"}, 5, false},
		{map[string]string{"RLS_CONFIG_MERGE_DOMAINS": "true", "RLS_WILDCARD_PRECEDENCE": "most_specific", "RLS_CONFIG_DOT_FILES": "true"}, 6, true},
	} {
		tc.env["RLS_CONFIG_PATH"] = dir
		s := start(t, tc.env)
		rpu, err := limitOf(context.Background(), s.client, "wild")
		require.NoError(t, err)
		assert.Equal(t, tc.rpu, rpu)
		_, body := getBody(t, s.http+"/rlconfig")
		assert.Equal(t, tc.dot, strings.Contains(body, `domain "dot"`))
		s.stop()
	}

	_, err = loadSettings(map[string]string{"RLS_WILDCARD_PRECEDENCE": "longest"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_WILDCARD_PRECEDENCE")
}
