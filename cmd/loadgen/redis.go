package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// redisReadyTimeout bounds how long a redis-server may take to answer.
	redisReadyTimeout = 15 * time.Second
	// clusterReadyTimeout bounds cluster creation and convergence.
	clusterReadyTimeout = 60 * time.Second
	// clusterBusOffset is the distance from a node's port to its bus port.
	clusterBusOffset = 10000
	// clusterMasters is the number of masters of the bench's cluster.
	clusterMasters = 3
)

// redisServer is one redis-server process on 127.0.0.1.
type redisServer struct {
	*process
	addr   string
	client *redis.Client
}

// startRedis starts a redis-server on a free port in a directory of its own
// under dir, configured as DESIGN.md asks for rate limit state: no
// persistence, noeviction. A cluster node also gets cluster mode on.
func startRedis(ctx context.Context, dir string, cluster bool) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("loadgen: redis-server not found in PATH (Debian/Ubuntu: apt-get install redis-server redis-tools): %w", err)
	}
	var lastErr error
	for range 5 {
		port, err := redisPort(cluster)
		if err != nil {
			return nil, err
		}
		nodeDir := filepath.Join(dir, "redis-"+strconv.Itoa(port))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		args := []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
			"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction",
			"--dir", nodeDir, "--logfile", "redis.log",
		}
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "5000")
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startProcess("redis-server "+addr, nodeDir, bin, args, nil)
		if err != nil {
			return nil, err
		}
		s := &redisServer{process: p, addr: addr, client: redis.NewClient(&redis.Options{
			Addr:                     addr,
			DisableIdentity:          true,
			Protocol:                 2,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			MaxRetries:               -1,
			PoolSize:                 2,
		})}
		if lastErr = s.waitReady(ctx); lastErr == nil {
			return s, nil
		}
		s.stop()
	}
	return nil, lastErr
}

// redisPort picks a free port; for a cluster node one whose bus port is free
// too and below 65536.
func redisPort(cluster bool) (int, error) {
	for range 100 {
		addr, err := freeAddr()
		if err != nil {
			return 0, err
		}
		port, err := portOf(addr)
		if err != nil {
			return 0, err
		}
		if !cluster {
			return port, nil
		}
		if port+clusterBusOffset < 65536 {
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+clusterBusOffset))); err == nil {
				l.Close()
				return port, nil
			}
		}
	}
	return 0, errors.New("loadgen: found no free port pair for a cluster node")
}

// waitReady waits until the server answers PING.
func (s *redisServer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		err := s.client.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if !s.running() {
			return fmt.Errorf("loadgen: %s exited at start:\n%s", s.name, s.output())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loadgen: %s did not answer within %s: %w", s.name, redisReadyTimeout, err)
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// stop stops the server and closes its client.
func (s *redisServer) stop() {
	_ = s.client.Close()
	s.process.stop()
}

// version returns the server's redis_version.
func (s *redisServer) version(ctx context.Context) string {
	info, err := s.client.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	return infoField(info, "redis_version")
}

// redisCluster is a Redis Cluster of clusterMasters masters, each with the
// same number of replicas.
type redisCluster struct {
	nodes []*redisServer
}

// startCluster starts clusterMasters·(1+replicas) nodes and joins them with
// redis-cli --cluster create, then waits until every node agrees that the
// cluster is ok.
func startCluster(ctx context.Context, dir string, replicas int) (*redisCluster, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("loadgen: redis-cli not found in PATH: %w", err)
	}
	c := &redisCluster{}
	for range clusterMasters * (1 + replicas) {
		n, err := startRedis(ctx, dir, true)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	createCtx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	if out, err := exec.CommandContext(createCtx, cli, args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("loadgen: redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.waitOK(createCtx, replicas); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// waitOK polls until every node says cluster_state:ok and knows every
// other, and every replica is in sync.
func (c *redisCluster) waitOK(ctx context.Context, replicas int) error {
	var last error
	for {
		last = c.checkOK(ctx, replicas)
		if last == nil {
			return nil
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("loadgen: cluster not ready: %w", last)
		}
	}
}

func (c *redisCluster) checkOK(ctx context.Context, replicas int) error {
	for _, n := range c.nodes {
		info, err := n.client.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if v := infoField(info, "cluster_state"); v != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.addr, v)
		}
		if v := infoField(info, "cluster_known_nodes"); v != strconv.Itoa(len(c.nodes)) {
			return fmt.Errorf("%s: cluster_known_nodes:%s", n.addr, v)
		}
		if replicas > 0 {
			repl, err := n.client.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
				return fmt.Errorf("%s: replica not in sync", n.addr)
			}
		}
	}
	return nil
}

// addrs returns the addresses of every node.
func (c *redisCluster) addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return addrs
}

// stop stops every node.
func (c *redisCluster) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

// flushMasters empties every master among servers, so that each measured
// run starts from an empty Redis. Replicas are skipped: they follow.
func flushMasters(ctx context.Context, servers []*redisServer) error {
	for _, s := range servers {
		repl, err := s.client.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("loadgen: %s: %w", s.addr, err)
		}
		if infoField(repl, "role") != "master" {
			continue
		}
		if err := s.client.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("loadgen: FLUSHALL on %s: %w", s.addr, err)
		}
	}
	return nil
}
