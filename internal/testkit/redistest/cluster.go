package redistest

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// Cluster is a Redis Cluster of six nodes on 127.0.0.1: three masters that
// own all 16384 slots, each with one replica. Its methods, proc.Cluster's
// with Servers for nodes and the test for errors, are safe for concurrent
// use.
type Cluster struct {
	*proc.Cluster
	nodes []*Server // the nodes, in the order of Addrs
}

// NewCluster starts a fresh Redis Cluster for this test and stops it when the
// test ends. Its cluster-node-timeout is one second, so a killed master's
// replica is promoted within a few seconds: use it for tests that kill, stop
// or pause nodes.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := startCluster(freshNodeTimeout)
	if err != nil {
		startFailed(t, os.LookupEnv, "cluster", err)
	}
	t.Cleanup(c.Close)
	t.Logf("redistest: cluster ready: %s", c.Startup())
	return c
}

func startCluster(nodeTimeout time.Duration) (*Cluster, error) {
	pc, err := proc.StartCluster(context.Background(), proc.ClusterConfig{Masters: 3, Replicas: 1, NodeTimeout: nodeTimeout})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Cluster: pc}
	for _, n := range pc.Nodes() {
		c.nodes = append(c.nodes, &Server{n})
	}
	return c, nil
}

// servers returns the Servers of nodes, failing the test on an error.
func (c *Cluster) servers(t testing.TB, err error, nodes ...*proc.Redis) []*Server {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Server, len(nodes))
	for i, n := range nodes {
		out[i] = c.nodes[slices.IndexFunc(c.nodes, func(s *Server) bool { return s.Redis == n })]
	}
	return out
}

// Nodes returns all six nodes, in the order of Addrs. Which of them are
// masters changes with failovers; Masters tells.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Client returns a go-redis cluster client seeded with every node, closed
// when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := c.NewClient()
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterForKey returns the node that serves key now.
func (c *Cluster) MasterForKey(t testing.TB, key string) *Server {
	t.Helper()
	n, err := c.Cluster.MasterForKey(waitContext(t), key)
	return c.servers(t, err, n)[0]
}

// Masters returns the nodes that serve slots now, in the order of Nodes.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	ms, err := c.Cluster.Masters(waitContext(t))
	return c.servers(t, err, ms...)
}

// KillMaster kills master and returns the replica that took over, once the
// cluster is healthy again; only for clusters from NewCluster.
func (c *Cluster) KillMaster(t testing.TB, master *Server) *Server {
	t.Helper()
	if c == shared.cluster {
		t.Fatal("redistest: KillMaster on the shared cluster would break other tests; use NewCluster")
	}
	promoted, err := c.Cluster.KillMaster(waitContext(t), master.Redis)
	return c.servers(t, err, promoted)[0]
}
