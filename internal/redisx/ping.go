package redisx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrWritesRefused marks the error of CheckWrites when Redis answers but
// would refuse a write: out of memory under maxmemory-policy noeviction
// (OOM), a read-only replica (READONLY), a failed background save with
// stop-writes-on-bgsave-error (MISCONF), or too few replicas for
// min-replicas-to-write (NOREPLICAS).
var ErrWritesRefused = errors.New("redisx: Redis refuses writes")

// writeCheckScript is a script that declares it may write (a shebang
// without the no-writes flag) and writes nothing. Redis 7 and later decide
// before running such a script whether a write would be accepted, for every
// reason a rate limit script's write could be refused, and answer its error
// instead; otherwise the script returns 1 and leaves no trace.
const writeCheckScript = "#!lua\nreturn 1"

// Ping reports whether Redis is reachable through client. A standalone or
// Sentinel-managed master is reachable when it answers PING. A Redis Cluster
// is reachable while any of its masters answers: the limits on a dead
// master get the failure mode request by request, and the others are still
// decided. (go-redis sends a cluster PING to the master of a random slot, so
// one dead master of three would fail a third of the pings and make the
// health flap.) The error of an unreachable cluster names each master.
func Ping(ctx context.Context, client redis.UniversalClient) error {
	return check(ctx, client, func(ctx context.Context, node redis.Cmdable) error {
		return node.Ping(ctx).Err()
	})
}

// CheckWrites reports whether Redis would take the writes of the rate limit
// scripts through client: Ping, and more. Where Ping's PING is answered,
// CheckWrites runs a script that Redis refuses to start unless it would
// accept a write, and that writes nothing; its error wraps ErrWritesRefused
// when Redis answered with such a refusal. In a Redis Cluster every master
// is checked: the cluster is ready while any master answers and none of
// those that answer refuses writes; the error names the master at fault.
//
// Redis before 7.0 cannot run the script (it has no script flags): there,
// CheckWrites checks what Ping checks.
//
// Errors carry Redis's own reply, such as "NOAUTH Authentication required."
// or "WRONGPASS invalid username-password pair or user is disabled.".
func CheckWrites(ctx context.Context, client redis.UniversalClient) error {
	_, cluster := client.(*redis.ClusterClient)
	return check(ctx, client, func(ctx context.Context, node redis.Cmdable) error {
		err := node.Eval(ctx, writeCheckScript, nil).Err()
		switch {
		case err == nil:
			return nil
		case redis.HasErrorPrefix(err, "ERR Error compiling script"):
			// Redis before 7.0: no script flags; it answered, at least.
			return nil
		case redis.HasErrorPrefix(err, "OOM"), redis.HasErrorPrefix(err, "READONLY"),
			redis.HasErrorPrefix(err, "MISCONF"), redis.HasErrorPrefix(err, "NOREPLICAS"):
			if cluster {
				return &refusal{err: err}
			}
			return fmt.Errorf("%w: %w", ErrWritesRefused, err)
		}
		return err
	})
}

// refusal is a cluster master's refusal of writes, which fails the check
// of the whole cluster even while other masters accept them.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

// check runs probe on the server client talks to or, for a Redis Cluster,
// on each of its masters, as Ping and CheckWrites describe.
func check(ctx context.Context, client redis.UniversalClient, probe func(context.Context, redis.Cmdable) error) error {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return probe(ctx, client)
	}
	var (
		mu       sync.Mutex
		answered bool
		errs     []error
		refused  []error
	)
	// ForEachMaster first reloads the slot map from one node after
	// another, and a hung node holds that up until its context ends; it
	// then falls back to the map it has. The reload gets half the time, and
	// the masters' probes run under ctx, so they keep the other half.
	reloadCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		reloadCtx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	err := cluster.ForEachMaster(reloadCtx, func(_ context.Context, node *redis.Client) error {
		err := probe(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		var r *refusal
		switch {
		case errors.As(err, &r):
			answered = true
			refused = append(refused, fmt.Errorf("%s: %w", node.Options().Addr, r.err))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", node.Options().Addr, err))
		default:
			answered = true
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case len(refused) > 0:
		return fmt.Errorf("%w: %w", ErrWritesRefused, errors.Join(refused...))
	case answered:
		return nil
	case len(errs) == 0:
		return errors.New("redisx: the cluster has no known master")
	}
	return fmt.Errorf("redisx: no cluster master answers: %w", errors.Join(errs...))
}
