package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/ratewarden/ratewarden/internal/addrfile"
	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// envoyproxy/ratelimit's server, which `loadgen rediscost` runs beside
// ratewarden's: the package go install builds, at the version it installs.
const (
	peerPackage = "github.com/envoyproxy/ratelimit/src/service_cmd"
	peerVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// installPeer builds envoyproxy/ratelimit's server at peerVersion into dir
// with go install (from the Go module proxy) and returns the binary's path.
func installPeer(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "install", peerPackage+"@"+peerVersion)
	cmd.Dir = dir // outside any module, as go install pkg@version wants
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("loadgen: go install %s@%s: %w\n%s", peerPackage, peerVersion, err, out)
	}
	return filepath.Join(dir, "service_cmd"), nil
}

// peerBuildVersion returns what bin, a build of envoyproxy/ratelimit's
// server, says it was built from: its module's version, or else the commit
// of the checkout, or else its path.
func peerBuildVersion(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "the build at " + bin
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return "commit " + s.Value
		}
	}
	return "the build at " + bin
}

// peerLimits returns the peer's limits file: loadgen's fixed_window
// descriptor as envoyproxy/ratelimit reads it (its configuration knows no
// algorithm), with the limits that writeLimits gives ratewarden for live and
// hot values.
func peerLimits() string {
	return fmt.Sprintf(`domain: %s
descriptors:
  - key: %s
    rate_limit: {unit: day, requests_per_unit: %d}
  - key: %[2]s
    value: %[4]q
    rate_limit: {unit: second, requests_per_unit: %[5]d}
`, defaultDomain, algorithms.FixedWindow, liveLimit(algorithms.FixedWindow), hotValuePrefix+"*", hotLimit(algorithms.FixedWindow))
}

// writePeerConfig writes the peer's runtime directory under dir, as its
// RUNTIME_ROOT, and returns it.
func writePeerConfig(dir string) (string, error) {
	root := filepath.Join(dir, "peer-runtime")
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
		return "", fmt.Errorf("loadgen: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "limits.yaml"), []byte(peerLimits()), 0o644); err != nil {
		return "", fmt.Errorf("loadgen: %w", err)
	}
	return root, nil
}

// startPeer starts envoyproxy/ratelimit's server bin on the standalone Redis
// at redisAddr with the limits under runtimeRoot, on loopback ports picked
// for it (it cannot listen on port 0 and say where), and waits until its
// gRPC health says SERVING.
func startPeer(ctx context.Context, bin, runtimeRoot, redisAddr string) (*proc.Server, error) {
	ports, err := proc.FreePorts(3)
	if err != nil {
		return nil, err
	}
	defer proc.ReleasePorts(ports...)
	env := proc.Environ(map[string]string{
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": redisAddr,
		"RUNTIME_ROOT": runtimeRoot, "RUNTIME_SUBDIRECTORY": ".", "RUNTIME_WATCH_ROOT": "false",
		// No stats sink at all: its cheapest setting. With statsd off and no
		// other sink it would log every timer of every request instead.
		"DISABLE_STATS": "true", "LOG_LEVEL": "warn",
		"HOST": "127.0.0.1", "PORT": strconv.Itoa(ports[0]),
		"GRPC_HOST": "127.0.0.1", "GRPC_PORT": strconv.Itoa(ports[1]),
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": strconv.Itoa(ports[2]),
	})
	p, err := proc.Start(proc.Command{Name: "envoyproxy/ratelimit server", Bin: bin, Dir: runtimeRoot, Env: env})
	if err != nil {
		return nil, err
	}
	s := &proc.Server{Process: p, Addrs: addrfile.Addrs{
		addrfile.HTTP: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		addrfile.GRPC: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
	}}
	ctx, cancel := context.WithTimeout(ctx, servingTimeout)
	defer cancel()
	if err := s.WaitServing(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	return s, nil
}
