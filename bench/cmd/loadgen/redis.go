package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

// clusterMasters is the number of masters of the bench's cluster.
const clusterMasters = 3

// clusterNodeTimeout is the cluster-node-timeout of the bench's cluster:
// long enough that a node starved of CPU under load is not failed over.
const clusterNodeTimeout = 5 * time.Second

// startBenchCluster starts a Redis Cluster of clusterMasters masters with
// replicas each.
func startBenchCluster(ctx context.Context, replicas int) (*proc.Cluster, error) {
	return proc.StartCluster(ctx, proc.ClusterConfig{Masters: clusterMasters, Replicas: replicas, NodeTimeout: clusterNodeTimeout})
}

// flushMasters empties every master among servers, so that each measured
// run starts from an empty Redis. Replicas are skipped: they follow.
func flushMasters(ctx context.Context, servers []*proc.Redis) error {
	for _, s := range servers {
		repl, err := s.Info(ctx, "replication")
		if err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
		if repl["role"] != "master" {
			continue
		}
		if _, err := s.Do(ctx, "FLUSHALL"); err != nil {
			return fmt.Errorf("loadgen: FLUSHALL: %w", err)
		}
	}
	return nil
}

// redisProcs returns the servers' processes, for the CPU meter.
func redisProcs(servers []*proc.Redis) []cpuProc {
	procs := make([]cpuProc, len(servers))
	for i, s := range servers {
		procs[i] = cpuProc{name: cpuRedis, pid: s.Pid()}
	}
	return procs
}
