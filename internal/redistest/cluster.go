package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// clusterSize is the number of nodes: three masters and three replicas.
	clusterSize = 6
	// clusterSlots is the number of hash slots in a Redis Cluster.
	clusterSlots = 16384

	// freshNodeTimeout is the cluster-node-timeout of NewCluster: short, so
	// that a killed master's replica takes over within a few seconds.
	freshNodeTimeout = 1000 * time.Millisecond
	// sharedNodeTimeout is the cluster-node-timeout of SharedCluster: longer,
	// so that a node starved of CPU on a busy machine is not failed over
	// under the feet of other tests.
	sharedNodeTimeout = 5000 * time.Millisecond

	// clusterTimeout bounds cluster creation and every wait for the cluster
	// to settle.
	clusterTimeout = 60 * time.Second
)

// Cluster is a Redis Cluster of six nodes on 127.0.0.1: three masters that
// own all 16384 slots, each with one replica. Its methods are safe for
// concurrent use.
type Cluster struct {
	nodes   []*Server
	startup string // how long creation took, phase by phase
}

// NewCluster starts a fresh Redis Cluster for this test and stops it when the
// test ends. Its cluster-node-timeout is one second, so a killed master's
// replica is promoted within a few seconds: use it for tests that kill, stop
// or pause nodes.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	server := lookBinary(t, "redis-server")
	cli := lookBinary(t, "redis-cli")
	c, err := startCluster(server, cli, freshNodeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.destroy)
	t.Logf("redistest: cluster ready: %s", c.startup)
	return c
}

// startCluster starts six nodes in parallel, joins them with
// redis-cli --cluster create and waits until the cluster is healthy.
func startCluster(server, cli string, nodeTimeout time.Duration) (*Cluster, error) {
	begin := time.Now()
	nodes := make([]*Server, clusterSize)
	errs := make([]error, clusterSize)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = startServer(server, serverConfig{cluster: true, nodeTimeout: nodeTimeout})
		})
	}
	wg.Wait()
	c := &Cluster{}
	for _, n := range nodes {
		if n != nil {
			c.nodes = append(c.nodes, n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.destroy()
		return nil, err
	}
	started := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.destroy()
		return nil, fmt.Errorf("redistest: redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	created := time.Now()

	if err := poll(ctx, c.checkCreated); err != nil {
		c.destroy()
		return nil, fmt.Errorf("redistest: cluster did not become healthy: %w", err)
	}
	ready := time.Now()
	c.startup = fmt.Sprintf("%v (6 processes %v, redis-cli --cluster create %v, convergence %v)",
		ready.Sub(begin).Round(time.Millisecond), started.Sub(begin).Round(time.Millisecond),
		created.Sub(started).Round(time.Millisecond), ready.Sub(created).Round(time.Millisecond))
	return c, nil
}

// destroy stops every node for good, in parallel.
func (c *Cluster) destroy() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.destroy)
	}
	wg.Wait()
}

// Addrs returns the addresses of all six nodes, in a fixed order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns all six nodes, in the order of Addrs. Which of them are
// masters changes with failovers; Masters tells.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Client returns a go-redis cluster client seeded with every node, closed
// when the test ends. Like Server.Client it honours context deadlines and
// speaks RESP2.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    c.Addrs(),
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterForSlot returns the node that serves slot now, as CLUSTER SLOTS on a
// running node says. It fails the test if no node can tell.
func (c *Cluster) MasterForSlot(t testing.TB, slot int) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	n, err := c.masterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// MasterForKey returns the node that serves key now; the key's slot comes
// from CLUSTER KEYSLOT, so hash tags count as Redis counts them. It fails the
// test if no node can tell.
func (c *Cluster) MasterForKey(t testing.TB, key string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.masterForSlot(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// KeySlot returns key's hash slot as CLUSTER KEYSLOT on a running node
// computes it.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	var errs []error
	for _, n := range c.answering() {
		v, err := n.do(ctx, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		slot, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("redistest: CLUSTER KEYSLOT answered %T", v)
		}
		return int(slot), nil
	}
	return 0, fmt.Errorf("redistest: no node computed the slot of %q: %w", key, errors.Join(errs...))
}

// Masters returns the nodes that serve slots now, in the order of Nodes.
func (c *Cluster) Masters(t testing.TB) []*Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	owners, err := c.slotOwners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var masters []*Server
	for _, n := range c.nodes {
		if slices.Contains(owners, n) {
			masters = append(masters, n)
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	replicas, err := c.replicasOf(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	if len(replicas) == 0 {
		t.Fatalf("redistest: %s has no replica to take over", master)
	}
	master.Kill()
	var promoted *Server
	err = poll(ctx, func(ctx context.Context) error {
		if promoted == nil {
			for _, r := range replicas {
				if role, err := r.role(ctx); err == nil && role == "master" {
					promoted = r
				}
			}
			if promoted == nil {
				return fmt.Errorf("redistest: no replica of %s has taken over yet", master)
			}
		}
		return c.checkHealthy(ctx)
	})
	if err != nil {
		t.Fatalf("redistest: failover after killing %s: %v", master, err)
	}
	return promoted
}

// WaitHealthy waits until every running node says cluster_state:ok, all of
// them agree on which master serves each of the 16384 slots, every such
// master is running, and every running replica is in sync with its master.
// It fails the test after a minute. Use it after restarting or resuming
// nodes.
func (c *Cluster) WaitHealthy(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := poll(ctx, c.checkHealthy); err != nil {
		t.Fatalf("redistest: cluster not healthy: %v", err)
	}
}

// checkCreated reports whether a new cluster is complete: healthy, with all
// six nodes known to each other, three masters and three replicas in sync.
func (c *Cluster) checkCreated(ctx context.Context) error {
	if err := c.checkHealthy(ctx); err != nil {
		return err
	}
	for _, n := range c.nodes {
		info, err := n.fields(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if info["cluster_known_nodes"] != strconv.Itoa(clusterSize) {
			return fmt.Errorf("redistest: %s knows %s nodes, want %d", n, info["cluster_known_nodes"], clusterSize)
		}
		if info["cluster_size"] != "3" {
			return fmt.Errorf("redistest: %s sees %s masters with slots, want 3", n, info["cluster_size"])
		}
	}
	// Count replicas by their own word: another node's view of them lags by
	// a gossip round or two, which nothing here needs to wait for.
	replicas := 0
	for _, n := range c.nodes {
		role, err := n.role(ctx)
		if err != nil {
			return err
		}
		if role == "slave" {
			replicas++
		}
	}
	if replicas != clusterSize/2 {
		return fmt.Errorf("redistest: %d replicas, want %d", replicas, clusterSize/2)
	}
	return nil
}

// checkHealthy implements WaitHealthy's test once.
func (c *Cluster) checkHealthy(ctx context.Context) error {
	running := c.answering()
	if len(running) == 0 {
		return errors.New("redistest: no node is running")
	}
	var want []slotRange
	for i, n := range running {
		info, err := n.fields(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if info["cluster_state"] != "ok" {
			return fmt.Errorf("redistest: %s: cluster_state:%s", n, info["cluster_state"])
		}
		if info["cluster_slots_ok"] != strconv.Itoa(clusterSlots) {
			return fmt.Errorf("redistest: %s: cluster_slots_ok:%s", n, info["cluster_slots_ok"])
		}
		ranges, err := c.slotRanges(ctx, n)
		if err != nil {
			return err
		}
		if i == 0 {
			want = ranges
		} else if !slices.Equal(ranges, want) {
			return fmt.Errorf("redistest: %s and %s disagree on the slot map", running[0], n)
		}
		if err := n.replicaInSync(ctx); err != nil {
			return err
		}
	}
	covered := 0
	for _, r := range want {
		covered += r.end - r.start + 1
		n := c.nodeByAddr(r.master)
		if n == nil {
			return fmt.Errorf("redistest: slots %d-%d belong to unknown node %s", r.start, r.end, r.master)
		}
		if !n.answering() {
			return fmt.Errorf("redistest: slots %d-%d still belong to %s, which is down", r.start, r.end, n)
		}
	}
	if covered != clusterSlots {
		return fmt.Errorf("redistest: CLUSTER SLOTS covers %d slots, want %d", covered, clusterSlots)
	}
	return nil
}

// slotRange is one line of CLUSTER SLOTS: slots start..end served by master.
type slotRange struct {
	start, end int
	master     string
}

// slotRanges returns n's view of the slot map, sorted by first slot.
func (c *Cluster) slotRanges(ctx context.Context, n *Server) ([]slotRange, error) {
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis version; CLUSTER SHARDS needs 7.0.
	slots, err := n.admin.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redistest: %s: CLUSTER SLOTS: %w", n, err)
	}
	ranges := make([]slotRange, 0, len(slots))
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			return nil, fmt.Errorf("redistest: %s: slots %d-%d have no node", n, s.Start, s.End)
		}
		ranges = append(ranges, slotRange{start: s.Start, end: s.End, master: s.Nodes[0].Addr})
	}
	slices.SortFunc(ranges, func(a, b slotRange) int { return a.start - b.start })
	return ranges, nil
}

// masterForSlot asks running nodes, in turn, who serves slot.
func (c *Cluster) masterForSlot(ctx context.Context, slot int) (*Server, error) {
	if slot < 0 || slot >= clusterSlots {
		return nil, fmt.Errorf("redistest: slot %d out of range [0, %d)", slot, clusterSlots)
	}
	var errs []error
	for _, n := range c.answering() {
		ranges, err := c.slotRanges(ctx, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range ranges {
			if r.start <= slot && slot <= r.end {
				if m := c.nodeByAddr(r.master); m != nil {
					return m, nil
				}
				return nil, fmt.Errorf("redistest: slot %d belongs to unknown node %s", slot, r.master)
			}
		}
		return nil, fmt.Errorf("redistest: %s: slot %d is not served", n, slot)
	}
	return nil, fmt.Errorf("redistest: no node told who serves slot %d: %w", slot, errors.Join(errs...))
}

// slotOwners returns the nodes that serve slots, as the first running node
// that answers sees it.
func (c *Cluster) slotOwners(ctx context.Context) ([]*Server, error) {
	var errs []error
	for _, n := range c.answering() {
		ranges, err := c.slotRanges(ctx, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var owners []*Server
		for _, r := range ranges {
			m := c.nodeByAddr(r.master)
			if m == nil {
				return nil, fmt.Errorf("redistest: slots %d-%d belong to unknown node %s", r.start, r.end, r.master)
			}
			if !slices.Contains(owners, m) {
				owners = append(owners, m)
			}
		}
		return owners, nil
	}
	return nil, fmt.Errorf("redistest: no node told who serves the slots: %w", errors.Join(errs...))
}

// replicasOf returns the running nodes that replicate master, as their own
// ROLE says (other nodes learn it by gossip, a little later).
func (c *Cluster) replicasOf(ctx context.Context, master *Server) ([]*Server, error) {
	var replicas []*Server
	for _, n := range c.answering() {
		port, err := n.masterPort(ctx)
		if err != nil {
			return nil, err
		}
		if port == master.port {
			replicas = append(replicas, n)
		}
	}
	return replicas, nil
}

// nodeByAddr returns the node listening on addr's port, or nil.
func (c *Cluster) nodeByAddr(addr string) *Server {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil
	}
	for _, n := range c.nodes {
		if n.port == port {
			return n
		}
	}
	return nil
}

// answering returns the nodes that run and are not paused.
func (c *Cluster) answering() []*Server {
	var ns []*Server
	for _, n := range c.nodes {
		if n.answering() {
			ns = append(ns, n)
		}
	}
	return ns
}
