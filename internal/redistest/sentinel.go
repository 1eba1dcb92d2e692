package redistest

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/proc"
)

// SentinelMasterName is the name under which the Sentinels of a
// SentinelSetup monitor its master.
const SentinelMasterName = proc.SentinelMasterName

// SentinelSetup is a master, one replica and three Sentinels (quorum two)
// that monitor the master as SentinelMasterName, all on 127.0.0.1. Its
// methods are safe for concurrent use.
type SentinelSetup struct {
	s               *proc.SentinelSetup
	master, replica *Server
	sentinels       []*Server
}

// Sentinel starts a fresh Sentinel setup for this test and stops it when the
// test ends. It returns once the replica is in sync and every Sentinel
// monitors the master and knows the replica.
func Sentinel(t testing.TB) *SentinelSetup {
	t.Helper()
	begin := time.Now()
	ps, err := proc.StartSentinel(waitContext(t))
	if err != nil {
		startFailed(t, "sentinel setup", err)
	}
	t.Cleanup(ps.Close)
	t.Logf("redistest: sentinel setup ready in %v", time.Since(begin).Round(time.Millisecond))
	s := &SentinelSetup{s: ps, master: &Server{ps.Master()}, replica: &Server{ps.Replica()}}
	for _, sn := range ps.Sentinels() {
		s.sentinels = append(s.sentinels, &Server{sn})
	}
	return s
}

// MasterName returns the name under which the Sentinels monitor the master:
// SentinelMasterName.
func (s *SentinelSetup) MasterName() string { return s.s.MasterName() }

// SentinelAddrs returns the addresses of the three Sentinels.
func (s *SentinelSetup) SentinelAddrs() []string { return s.s.SentinelAddrs() }

// Sentinels returns the three Sentinel processes.
func (s *SentinelSetup) Sentinels() []*Server { return slices.Clone(s.sentinels) }

// Master returns the server that was master when the setup started.
// KillMaster returns the master that replaces it.
func (s *SentinelSetup) Master() *Server { return s.master }

// Replica returns the server that was the replica when the setup started.
func (s *SentinelSetup) Replica() *Server { return s.replica }

// Client returns a go-redis failover client that finds the master through
// the Sentinels, closed when the test ends. Like Server.Client it honours
// context deadlines and speaks RESP2.
func (s *SentinelSetup) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := s.s.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// KillMaster kills the current master with SIGKILL and waits until every
// Sentinel names the other server as master and that server says it is one;
// it returns the new master. It fails the test if the failover does not
// complete within a minute.
func (s *SentinelSetup) KillMaster(t testing.TB) *Server {
	t.Helper()
	next, err := s.s.KillMaster(waitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if next == s.master.Redis {
		return s.master
	}
	return s.replica
}
