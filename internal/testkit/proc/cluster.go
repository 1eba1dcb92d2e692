package proc

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
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// clusterSlots is the number of hash slots in a Redis Cluster.
	clusterSlots = 16384
	// clusterTimeout bounds cluster creation when the caller's context
	// does not.
	clusterTimeout = 60 * time.Second
)

// ClusterConfig says what Redis Cluster StartCluster creates.
type ClusterConfig struct {
	// Masters is the number of masters, which share the 16384 slots; at
	// least 3, as redis-cli --cluster create demands.
	Masters int
	// Replicas is the number of replicas of each master.
	Replicas int
	// NodeTimeout is every node's cluster-node-timeout: how long a master
	// may be unreachable before one of its replicas takes over.
	NodeTimeout time.Duration
}

// Cluster is a Redis Cluster on 127.0.0.1: masters that own all 16384
// slots, each with the same number of replicas. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg     ClusterConfig
	nodes   []*Redis
	startup string // how long creation took, phase by phase
}

// StartCluster starts cfg's nodes in parallel, joins them with
// redis-cli --cluster create, and waits until the cluster is healthy, every
// node knows every other and every replica is in sync. Close stops it.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	cli, err := LookPath("redis-cli", "apt-get install redis-tools")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	begin := time.Now()
	size := cfg.Masters * (1 + cfg.Replicas)
	nodes := make([]*Redis, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			nodes[i], errs[i] = StartRedis(RedisConfig{Cluster: true, NodeTimeout: cfg.NodeTimeout})
		})
	}
	wg.Wait()
	c := &Cluster{cfg: cfg}
	for _, n := range nodes {
		if n != nil {
			c.nodes = append(c.nodes, n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	started := time.Now()

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.Replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("proc: redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	created := time.Now()

	if err := poll(ctx, c.checkCreated); err != nil {
		c.Close()
		return nil, fmt.Errorf("proc: cluster did not become healthy: %w", err)
	}
	ready := time.Now()
	c.startup = fmt.Sprintf("%v (%d processes %v, redis-cli --cluster create %v, convergence %v)",
		ready.Sub(begin).Round(time.Millisecond), size, started.Sub(begin).Round(time.Millisecond),
		created.Sub(started).Round(time.Millisecond), ready.Sub(created).Round(time.Millisecond))
	return c, nil
}

// Startup says how long StartCluster took, phase by phase.
func (c *Cluster) Startup() string { return c.startup }

// Close stops every node for good, in parallel.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.Close)
	}
	wg.Wait()
}

// Addrs returns the addresses of all nodes, in a fixed order.
func (c *Cluster) Addrs() []string { return Addrs(c.nodes) }

// Nodes returns all nodes, in the order of Addrs. Which of them are
// masters changes with failovers; Masters tells.
func (c *Cluster) Nodes() []*Redis { return slices.Clone(c.nodes) }

// NewClient returns a go-redis cluster client seeded with every node; the
// caller closes it. Like Redis.NewClient it honours context deadlines and
// speaks RESP2.
func (c *Cluster) NewClient() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                    c.Addrs(),
		ContextTimeoutEnabled:    true,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
}

// MasterForKey returns the node that serves key now; the key's slot comes
// from CLUSTER KEYSLOT, so hash tags count as Redis counts them.
func (c *Cluster) MasterForKey(ctx context.Context, key string) (*Redis, error) {
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.masterForSlot(ctx, slot)
}

// KeySlot returns key's hash slot as CLUSTER KEYSLOT on a running node
// computes it.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	var errs []error
	for _, n := range c.answering() {
		v, err := n.Do(ctx, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		slot, ok := v.(int64)
		if !ok {
			return 0, fmt.Errorf("proc: CLUSTER KEYSLOT answered %T", v)
		}
		return int(slot), nil
	}
	return 0, fmt.Errorf("proc: no node computed the slot of %q: %w", key, errors.Join(errs...))
}

// Masters returns the nodes that serve slots now, in the order of Nodes.
func (c *Cluster) Masters(ctx context.Context) ([]*Redis, error) {
	owners, err := c.slotOwners(ctx)
	if err != nil {
		return nil, err
	}
	var masters []*Redis
	for _, n := range c.nodes {
		if slices.Contains(owners, n) {
			masters = append(masters, n)
		}
	}
	return masters, nil
}

// KillMaster kills master with SIGKILL and waits until one of its replicas
// has taken over and the cluster is healthy again (every running node says
// cluster_state:ok, all agree on which running master serves each slot, and
// every running replica is in sync); it
// returns the promoted replica. It fails if master is not a master with a
// replica, or if the failover does not complete before ctx ends.
func (c *Cluster) KillMaster(ctx context.Context, master *Redis) (*Redis, error) {
	replicas, err := c.replicasOf(ctx, master)
	if err != nil {
		return nil, err
	}
	if len(replicas) == 0 {
		return nil, fmt.Errorf("proc: %s has no replica to take over", master)
	}
	master.Kill()
	var promoted *Redis
	err = poll(ctx, func(ctx context.Context) error {
		if promoted == nil {
			for _, r := range replicas {
				if role, err := r.role(ctx); err == nil && role == "master" {
					promoted = r
				}
			}
			if promoted == nil {
				return fmt.Errorf("proc: no replica of %s has taken over yet", master)
			}
		}
		return c.checkHealthy(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("proc: failover after killing %s: %w", master, err)
	}
	return promoted, nil
}

// checkCreated reports whether a new cluster is complete: healthy, with all
// nodes known to each other, and as many masters and replicas as configured.
func (c *Cluster) checkCreated(ctx context.Context) error {
	if err := c.checkHealthy(ctx); err != nil {
		return err
	}
	for _, n := range c.nodes {
		info, err := n.fields(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if info["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
			return fmt.Errorf("proc: %s knows %s nodes, want %d", n, info["cluster_known_nodes"], len(c.nodes))
		}
		if info["cluster_size"] != strconv.Itoa(c.cfg.Masters) {
			return fmt.Errorf("proc: %s sees %s masters with slots, want %d", n, info["cluster_size"], c.cfg.Masters)
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
	if want := c.cfg.Masters * c.cfg.Replicas; replicas != want {
		return fmt.Errorf("proc: %d replicas, want %d", replicas, want)
	}
	return nil
}

// checkHealthy implements WaitHealthy's test once.
func (c *Cluster) checkHealthy(ctx context.Context) error {
	running := c.answering()
	if len(running) == 0 {
		return errors.New("proc: no node is running")
	}
	var want []slotRange
	for i, n := range running {
		info, err := n.fields(ctx, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if info["cluster_state"] != "ok" {
			return fmt.Errorf("proc: %s: cluster_state:%s", n, info["cluster_state"])
		}
		if info["cluster_slots_ok"] != strconv.Itoa(clusterSlots) {
			return fmt.Errorf("proc: %s: cluster_slots_ok:%s", n, info["cluster_slots_ok"])
		}
		ranges, err := c.slotRanges(ctx, n)
		if err != nil {
			return err
		}
		if i == 0 {
			want = ranges
		} else if !slices.Equal(ranges, want) {
			return fmt.Errorf("proc: %s and %s disagree on the slot map", running[0], n)
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
			return fmt.Errorf("proc: slots %d-%d belong to unknown node %s", r.start, r.end, r.master)
		}
		if !n.answering() {
			return fmt.Errorf("proc: slots %d-%d still belong to %s, which is down", r.start, r.end, n)
		}
	}
	if covered != clusterSlots {
		return fmt.Errorf("proc: CLUSTER SLOTS covers %d slots, want %d", covered, clusterSlots)
	}
	return nil
}

// slotRange is one line of CLUSTER SLOTS: slots start..end served by master.
type slotRange struct {
	start, end int
	master     string
}

// slotRanges returns n's view of the slot map, sorted by first slot.
func (c *Cluster) slotRanges(ctx context.Context, n *Redis) ([]slotRange, error) {
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis version; CLUSTER SHARDS needs 7.0.
	slots, err := n.admin.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("proc: %s: CLUSTER SLOTS: %w", n, err)
	}
	ranges := make([]slotRange, 0, len(slots))
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			return nil, fmt.Errorf("proc: %s: slots %d-%d have no node", n, s.Start, s.End)
		}
		ranges = append(ranges, slotRange{start: s.Start, end: s.End, master: s.Nodes[0].Addr})
	}
	slices.SortFunc(ranges, func(a, b slotRange) int { return a.start - b.start })
	return ranges, nil
}

// slotMap returns the slot map as the first running node that answers
// sees it.
func (c *Cluster) slotMap(ctx context.Context) ([]slotRange, error) {
	var errs []error
	for _, n := range c.answering() {
		ranges, err := c.slotRanges(ctx, n)
		if err == nil {
			return ranges, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("proc: no node told who serves the slots: %w", errors.Join(errs...))
}

// masterForSlot returns the node that serves slot now, as CLUSTER SLOTS on
// the first running node that answers says.
func (c *Cluster) masterForSlot(ctx context.Context, slot int) (*Redis, error) {
	if slot < 0 || slot >= clusterSlots {
		return nil, fmt.Errorf("proc: slot %d out of range [0, %d)", slot, clusterSlots)
	}
	ranges, err := c.slotMap(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range ranges {
		if r.start <= slot && slot <= r.end {
			if m := c.nodeByAddr(r.master); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("proc: slot %d belongs to unknown node %s", slot, r.master)
		}
	}
	return nil, fmt.Errorf("proc: slot %d is not served", slot)
}

// slotOwners returns the nodes that serve slots, as the first running node
// that answers sees it.
func (c *Cluster) slotOwners(ctx context.Context) ([]*Redis, error) {
	ranges, err := c.slotMap(ctx)
	if err != nil {
		return nil, err
	}
	var owners []*Redis
	for _, r := range ranges {
		m := c.nodeByAddr(r.master)
		if m == nil {
			return nil, fmt.Errorf("proc: slots %d-%d belong to unknown node %s", r.start, r.end, r.master)
		}
		if !slices.Contains(owners, m) {
			owners = append(owners, m)
		}
	}
	return owners, nil
}

// replicasOf returns the running nodes that replicate master, as their own
// INFO says (other nodes learn it by gossip, a little later).
func (c *Cluster) replicasOf(ctx context.Context, master *Redis) ([]*Redis, error) {
	var replicas []*Redis
	for _, n := range c.answering() {
		info, err := n.Info(ctx, "replication")
		if err != nil {
			return nil, err
		}
		if info["role"] == "slave" && info["master_port"] == strconv.Itoa(master.port) {
			replicas = append(replicas, n)
		}
	}
	return replicas, nil
}

// nodeByAddr returns the node listening on addr's port, or nil.
func (c *Cluster) nodeByAddr(addr string) *Redis {
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
func (c *Cluster) answering() []*Redis {
	var ns []*Redis
	for _, n := range c.nodes {
		if n.answering() {
			ns = append(ns, n)
		}
	}
	return ns
}
