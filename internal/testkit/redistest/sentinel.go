package redistest

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// SentinelMasterName is the name under which the Sentinels of a
// SentinelSetup monitor its master.
const SentinelMasterName = proc.SentinelMasterName

// SentinelSetup is a master, one replica and three Sentinels (quorum two)
// that monitor the master as SentinelMasterName, all on 127.0.0.1. Its
// methods, proc.SentinelSetup's with Servers for processes and the test for
// errors, are safe for concurrent use.
type SentinelSetup struct {
	*proc.SentinelSetup
	master, replica *Server
}

// Sentinel starts a fresh Sentinel setup for this test and stops it when the
// test ends. It returns once the replica is in sync and every Sentinel
// monitors the master and knows the replica.
func Sentinel(t testing.TB) *SentinelSetup {
	t.Helper()
	begin := time.Now()
	ps, err := proc.StartSentinel(waitContext(t))
	if err != nil {
		startFailed(t, os.LookupEnv, "sentinel setup", err)
	}
	t.Cleanup(ps.Close)
	t.Logf("redistest: sentinel setup ready in %v", time.Since(begin).Round(time.Millisecond))
	return &SentinelSetup{SentinelSetup: ps, master: &Server{ps.Master()}, replica: &Server{ps.Replica()}}
}

// Sentinels returns the three Sentinel processes.
func (s *SentinelSetup) Sentinels() []*Server {
	var out []*Server
	for _, sn := range s.SentinelSetup.Sentinels() {
		out = append(out, &Server{sn})
	}
	return out
}

// Master returns the server that was master when the setup started.
// KillMaster returns the master that replaces it.
func (s *SentinelSetup) Master() *Server { return s.master }

// Replica returns the server that was the replica when the setup started.
func (s *SentinelSetup) Replica() *Server { return s.replica }

// Client returns a go-redis failover client that finds the master through
// the Sentinels, closed when the test ends.
func (s *SentinelSetup) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := s.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// KillMaster kills the current master and returns the new one, once every
// Sentinel names it and it says it is master.
func (s *SentinelSetup) KillMaster(t testing.TB) *Server {
	t.Helper()
	next, err := s.SentinelSetup.KillMaster(waitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if next == s.master.Redis {
		return s.master
	}
	return s.replica
}
