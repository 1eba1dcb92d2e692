package redisx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ping reports whether Redis is reachable through client. A standalone or
// Sentinel-managed master is reachable when it answers PING. A Redis Cluster
// is reachable while any of its masters answers: the limits on a dead
// master get the failure mode request by request, and the others are still
// decided. (go-redis sends a cluster PING to the master of a random slot, so
// one dead master of three would fail a third of the pings and make the
// health flap.) The error of an unreachable cluster names each master.
func Ping(ctx context.Context, client redis.UniversalClient) error {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return client.Ping(ctx).Err()
	}
	var (
		mu       sync.Mutex
		answered bool
		errs     []error
	)
	// ForEachMaster first reloads the slot map from one node after
	// another, and a hung node holds that up until its context ends; it
	// then falls back to the map it has. The reload gets half the time, and
	// the masters' PINGs run under ctx, so they keep the other half.
	reloadCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		reloadCtx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	err := cluster.ForEachMaster(reloadCtx, func(_ context.Context, node *redis.Client) error {
		err := node.Ping(ctx).Err()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", node.Options().Addr, err))
		} else {
			answered = true
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case answered:
		return nil
	case len(errs) == 0:
		return errors.New("redisx: the cluster has no known master")
	}
	return fmt.Errorf("redisx: no cluster master answers: %w", errors.Join(errs...))
}
