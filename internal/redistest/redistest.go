// Package redistest runs real redis-server processes for tests: a standalone
// server, a six-node Redis Cluster (three masters, three replicas) and a
// Sentinel setup, each on free loopback ports, with no Docker.
//
// A test asks for a fresh process with Standalone, NewCluster or Sentinel; it
// is stopped when the test ends. Tests that only read and write keys can share
// one process per test binary with SharedStandalone and SharedCluster and
// isolate themselves by key prefix; a package that uses them must stop them
// when its test binary exits by calling Main from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Every process is also started with a parent-death signal (on Linux), so a
// test binary that crashes or is killed leaves no redis-server behind.
//
// When redis-server is not installed, tests that need it are skipped, unless
// the environment variable CI is "true": then they fail, because Redis tests
// must never be skipped silently in continuous integration.
package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Main runs the tests of m and then stops the processes that SharedStandalone
// and SharedCluster started. A package whose tests use a Shared* function
// must call it from TestMain; the Shared* functions fail a test otherwise.
func Main(m *testing.M) {
	shared.mainActive.Store(true)
	defer shared.stop()
	m.Run() // The test wrapper exits with m.Run's result when TestMain returns.
}

// shared holds the processes that live as long as the test binary. It is the
// package's only state, and exists because sharing across tests is its job.
var shared sharedProcesses

type sharedProcesses struct {
	mainActive atomic.Bool

	standaloneOnce sync.Once
	standalone     *Server
	standaloneErr  error

	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
}

func (p *sharedProcesses) stop() {
	var wg sync.WaitGroup
	if p.standalone != nil {
		wg.Go(p.standalone.destroy)
	}
	if p.cluster != nil {
		wg.Go(p.cluster.destroy)
	}
	wg.Wait()
}

func requireMain(t testing.TB, fn string) {
	t.Helper()
	if !shared.mainActive.Load() {
		t.Fatalf("redistest: %s needs the package's TestMain to call redistest.Main(m), which stops shared processes when the test binary exits", fn)
	}
}

// SharedStandalone returns the standalone redis-server shared by every test of
// the test binary, starting it on first use. Tests must isolate themselves by
// key prefix and must not stop, pause or reconfigure it. The package's
// TestMain must call Main. It is safe for concurrent use.
func SharedStandalone(t testing.TB) *Server {
	t.Helper()
	requireMain(t, "SharedStandalone")
	bin := lookBinary(t, "redis-server")
	shared.standaloneOnce.Do(func() {
		shared.standalone, shared.standaloneErr = startServer(bin, serverConfig{})
	})
	if shared.standaloneErr != nil {
		t.Fatalf("redistest: shared standalone server: %v", shared.standaloneErr)
	}
	return shared.standalone
}

// SharedCluster returns the Redis Cluster shared by every test of the test
// binary, starting it on first use. Tests must isolate themselves by key
// prefix and must not kill, stop or pause its nodes; a test that does needs
// NewCluster. The package's TestMain must call Main. It is safe for
// concurrent use.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	requireMain(t, "SharedCluster")
	server := lookBinary(t, "redis-server")
	cli := lookBinary(t, "redis-cli")
	shared.clusterOnce.Do(func() {
		shared.cluster, shared.clusterErr = startCluster(server, cli, sharedNodeTimeout)
		if shared.clusterErr == nil {
			t.Logf("redistest: shared cluster ready: %s", shared.cluster.startup)
		}
	})
	if shared.clusterErr != nil {
		t.Fatalf("redistest: shared cluster: %v", shared.clusterErr)
	}
	return shared.cluster
}

// lookBinary returns the path of the named Redis program. When it is missing,
// it fails the test if CI is "true" and skips it otherwise.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("redistest: %s not found in PATH: install redis-server (Debian/Ubuntu: apt-get install redis-server redis-tools) to run the Redis tests", name)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// versions caches the major version of each redis-server binary.
var versions sync.Map // path -> majorVersion

type majorVersion struct {
	major int
	err   error
}

var versionPattern = regexp.MustCompile(`v=(\d+)\.`)

// serverMajor returns the major version of the redis-server at bin.
func serverMajor(bin string) (int, error) {
	if v, ok := versions.Load(bin); ok {
		mv := v.(majorVersion)
		return mv.major, mv.err
	}
	var mv majorVersion
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		mv.err = fmt.Errorf("redistest: %s --version: %w", bin, err)
	} else if m := versionPattern.FindSubmatch(out); m == nil {
		mv.err = fmt.Errorf("redistest: no version in %q", out)
	} else {
		mv.major, _ = strconv.Atoi(string(m[1]))
	}
	versions.Store(bin, mv)
	return mv.major, mv.err
}
