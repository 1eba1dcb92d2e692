// Package redistest gives tests real redis-server processes, started by
// package proc: a standalone server, a six-node Redis Cluster (three
// masters, three replicas) and a Sentinel setup, each on free loopback
// ports, with no Docker.
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
// must never be skipped silently in continuous integration. The package
// reads CI, and PATH, from the process's environment; its own tests pass
// theirs to the unexported functions behind the exported ones.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

const (
	// freshNodeTimeout is the cluster-node-timeout of NewCluster: short, so
	// that a killed master's replica takes over within a few seconds.
	freshNodeTimeout = 1000 * time.Millisecond
	// sharedNodeTimeout is the cluster-node-timeout of SharedCluster: longer,
	// so that a node starved of CPU on a busy machine is not failed over
	// under the feet of other tests.
	sharedNodeTimeout = 5000 * time.Millisecond
	// waitTimeout bounds every wait for a cluster or Sentinels to settle.
	waitTimeout = 60 * time.Second
)

// Main runs the tests of m, then stops the processes that SharedStandalone
// and SharedCluster started, and returns m.Run's result, for a TestMain
// that exits by itself; one that returns exits with it anyway. A package
// whose tests use a Shared* function must call it from TestMain; the
// Shared* functions fail a test otherwise.
func Main(m *testing.M) int {
	shared.mainActive.Store(true)
	defer shared.stop()
	return m.Run()
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
		wg.Go(p.standalone.Close)
	}
	if p.cluster != nil {
		wg.Go(p.cluster.Close)
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
	shared.standaloneOnce.Do(func() {
		r, err := proc.StartRedis(proc.RedisConfig{})
		shared.standalone, shared.standaloneErr = &Server{r}, err
	})
	if shared.standaloneErr != nil {
		startFailed(t, os.LookupEnv, "shared standalone server", shared.standaloneErr)
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
	shared.clusterOnce.Do(func() {
		shared.cluster, shared.clusterErr = startCluster(sharedNodeTimeout)
		if shared.clusterErr == nil {
			t.Logf("redistest: shared cluster ready: %s", shared.cluster.Startup())
		}
	})
	if shared.clusterErr != nil {
		startFailed(t, os.LookupEnv, "shared cluster", shared.clusterErr)
	}
	return shared.cluster
}

// startFailed ends a test whose processes did not start. When a Redis
// program is missing (or built without TLS, for a test that needs it), it
// skips the test, or fails it when CI, read through lookup, is "true"; any
// other error fails it.
func startFailed(t testing.TB, lookup func(string) (string, bool), what string, err error) {
	t.Helper()
	if errors.Is(err, proc.ErrNotInstalled) || errors.Is(err, proc.ErrNoTLS) {
		missing(t, lookup, fmt.Sprintf("redistest: %s: %v (install redis-server with TLS to run the Redis tests)", what, err))
	}
	t.Fatalf("redistest: %s: %v", what, err)
}

// NeedProgram returns the path of the named program, which install says
// how to install ("apt-get install curl"). When it is not in PATH, it skips
// the test, or fails it when CI is "true", as for redis-server: every test
// that runs a program follows this one rule.
func NeedProgram(t testing.TB, name, install string) string {
	t.Helper()
	return NeedProgramIn(t, "", name, install)
}

// NeedProgramIn is NeedProgram looking in the directories that path lists,
// as PATH does, instead of PATH (an empty path means PATH): for a test
// that gives the programs it runs a PATH of their own.
func NeedProgramIn(t testing.TB, path, name, install string) string {
	t.Helper()
	return needProgram(t, os.LookupEnv, path, name, install)
}

// needProgram is NeedProgramIn reading CI through lookup.
func needProgram(t testing.TB, lookup func(string) (string, bool), path, name, install string) string {
	t.Helper()
	found, err := proc.LookPathIn(path, name, install)
	if err != nil {
		missing(t, lookup, "redistest: "+err.Error())
	}
	return found
}

// missing skips the test for a missing program, or fails it when CI, read
// through lookup, is "true": continuous integration must never skip a test
// silently.
func missing(t testing.TB, lookup func(string) (string, bool), msg string) {
	t.Helper()
	if ci, _ := lookup("CI"); ci != "true" {
		t.Skipf("%s", msg)
	}
	t.Fatalf("%s", msg)
}

// Server is one redis-server process (or a Sentinel) on 127.0.0.1: a
// proc.Redis with a client for tests.
type Server struct {
	*proc.Redis
}

// TLSFiles names the PEM files a redis-server serves TLS with.
type TLSFiles = proc.TLSFiles

// Standalone starts a fresh redis-server for this test and stops it, and
// removes its directory, when the test ends.
func Standalone(t testing.TB) *Server {
	t.Helper()
	return StartRedis(t, proc.RedisConfig{})
}

// StandaloneTLS starts a fresh redis-server that serves TLS on TLSAddr with
// the given files, besides plain TCP on Addr, and stops it when the test
// ends. When the installed redis-server was built without TLS, it skips the
// test, or fails it when CI is "true".
func StandaloneTLS(t testing.TB, files TLSFiles) *Server {
	t.Helper()
	return StartRedis(t, proc.RedisConfig{TLS: &files})
}

// StartRedis starts a fresh redis-server as cfg says and stops it, and
// removes its directory, when the test ends.
func StartRedis(t testing.TB, cfg proc.RedisConfig) *Server {
	t.Helper()
	return startRedis(t, os.LookupEnv, cfg)
}

// startRedis is StartRedis reading CI through lookup.
func startRedis(t testing.TB, lookup func(string) (string, bool), cfg proc.RedisConfig) *Server {
	t.Helper()
	r, err := proc.StartRedis(cfg)
	if err != nil {
		startFailed(t, lookup, "redis-server", err)
	}
	t.Cleanup(r.Close)
	return &Server{r}
}

// Client returns a go-redis client for the server's plain TCP address, closed
// when the test ends. Like ratewarden's own client it honours context
// deadlines, speaks RESP2 and sends no CLIENT SETINFO.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := s.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitContext returns a context that ends after waitTimeout or with the
// test.
func waitContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}
