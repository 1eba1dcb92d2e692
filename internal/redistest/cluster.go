package redistest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/proc"
)

// Cluster is a Redis Cluster of six nodes on 127.0.0.1: three masters that
// own all 16384 slots, each with one replica. Its methods are safe for
// concurrent use.
type Cluster struct {
	c     *proc.Cluster
	nodes []*Server // c's nodes, in its order
}

// NewCluster starts a fresh Redis Cluster for this test and stops it when the
// test ends. Its cluster-node-timeout is one second, so a killed master's
// replica is promoted within a few seconds: use it for tests that kill, stop
// or pause nodes.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(freshNodeTimeout)
	if err != nil {
		startFailed(t, "cluster", err)
	}
	t.Cleanup(c.c.Close)
	t.Logf("redistest: cluster ready: %s", c.c.Startup())
	return c
}

func startCluster(nodeTimeout time.Duration) (*Cluster, error) {
	pc, err := proc.StartCluster(context.Background(), proc.ClusterConfig{Masters: 3, Replicas: 1, NodeTimeout: nodeTimeout})
	if err != nil {
		return nil, err
	}
	c := &Cluster{c: pc}
	for _, n := range pc.Nodes() {
		c.nodes = append(c.nodes, &Server{n})
	}
	return c, nil
}

// node returns the Server of one of the cluster's nodes.
func (c *Cluster) node(t testing.TB, n *proc.Redis) *Server {
	t.Helper()
	i := slices.IndexFunc(c.nodes, func(s *Server) bool { return s.Redis == n })
	if i < 0 {
		t.Fatalf("redistest: %s is not a node of the cluster", n)
	}
	return c.nodes[i]
}

// Addrs returns the addresses of all six nodes, in a fixed order.
func (c *Cluster) Addrs() []string { return c.c.Addrs() }

// Nodes returns all six nodes, in the order of Addrs. Which of them are
// masters changes with failovers; Masters tells.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Client returns a go-redis cluster client seeded with every node, closed
// when the test ends. Like Server.Client it honours context deadlines and
// speaks RESP2.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := c.c.NewClient()
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterForSlot returns the node that serves slot now, as CLUSTER SLOTS on a
// running node says. It fails the test if no node can tell.
func (c *Cluster) MasterForSlot(t testing.TB, slot int) *Server {
	t.Helper()
	n, err := c.c.MasterForSlot(waitContext(t), slot)
	if err != nil {
		t.Fatal(err)
	}
	return c.node(t, n)
}

// MasterForKey returns the node that serves key now; the key's slot comes
// from CLUSTER KEYSLOT, so hash tags count as Redis counts them. It fails the
// test if no node can tell.
func (c *Cluster) MasterForKey(t testing.TB, key string) *Server {
	t.Helper()
	n, err := c.c.MasterForKey(waitContext(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return c.node(t, n)
}

// KeySlot returns key's hash slot as CLUSTER KEYSLOT on a running node
// computes it.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	return c.c.KeySlot(ctx, key)
}

// Masters returns the nodes that serve slots now, in the order of Nodes.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	ms, err := c.c.Masters(waitContext(t))
	if err != nil {
		t.Fatal(err)
	}
	masters := make([]*Server, len(ms))
	for i, m := range ms {
		masters[i] = c.node(t, m)
	}
	return masters
}

// KillMaster kills master with SIGKILL and waits until one of its replicas
// has taken over and the cluster is healthy again (see WaitHealthy); it
// returns the promoted replica. It fails the test if master is not a master
// with a replica, or if the failover does not complete within a minute.
// Only for clusters from NewCluster.
func (c *Cluster) KillMaster(t testing.TB, master *Server) *Server {
	t.Helper()
	if c == shared.cluster {
		t.Fatal("redistest: KillMaster on the shared cluster would break other tests; use NewCluster")
	}
	promoted, err := c.c.KillMaster(waitContext(t), master.Redis)
	if err != nil {
		t.Fatal(err)
	}
	return c.node(t, promoted)
}

// WaitHealthy waits until every running node says cluster_state:ok, all of
// them agree on which master serves each of the 16384 slots, every such
// master is running, and every running replica is in sync with its master.
// It fails the test after a minute. Use it after restarting or resuming
// nodes.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	if err := c.c.WaitHealthy(waitContext(t)); err != nil {
		t.Fatal(err)
	}
}
