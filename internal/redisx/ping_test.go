package redisx_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"

	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestPingStandalone(t *testing.T) {
	srv := redistest.Standalone(t)
	client := newClient(t, redisx.Options{Addrs: []string{srv.Addr()}})
	require.NoError(t, redisx.Ping(context.Background(), client))

	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.Error(t, redisx.Ping(ctx, client))
}

// TestPingClusterWithOneMasterDown: a cluster stays reachable while any
// master answers, at every ping (whether or not a replica has taken over
// from the hung master yet), and is unreachable when none does.
func TestPingClusterWithOneMasterDown(t *testing.T) {
	cluster := redistest.NewCluster(t)
	client := newClient(t, redisx.Options{Mode: redisx.ModeCluster, Addrs: cluster.Addrs()})
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return redisx.Ping(ctx, client)
	}
	require.NoError(t, ping())

	masters := cluster.Masters(t)
	masters[0].Pause()
	t.Cleanup(masters[0].Resume)
	for i := range 10 {
		require.NoError(t, ping(), "ping %d with master %s paused", i, masters[0])
	}

	// Every node hung (the replicas too, so that none takes over): no
	// master answers.
	for _, n := range cluster.Nodes() {
		if n != masters[0] {
			n.Pause()
			t.Cleanup(n.Resume)
		}
	}
	err := ping()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no cluster master answers")
}

// checkWrites runs CheckWrites with a bound, as the server's health does.
func checkWrites(client redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return redisx.CheckWrites(ctx, client)
}

// TestCheckWritesStandalone: a Redis that answers PING but refuses writes
// (out of memory with noeviction, a read-only replica) fails CheckWrites,
// with Redis's own reply.
func TestCheckWritesStandalone(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	admin := srv.Client(t)
	client := newClient(t, redisx.Options{Addrs: []string{srv.Addr()}})
	require.NoError(t, checkWrites(client))
	keys, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)

	// maxmemory below what the server already uses.
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "100000").Err())
	require.NoError(t, redisx.Ping(ctx, client), "PING is still answered")
	err = checkWrites(client)
	require.ErrorIs(t, err, redisx.ErrWritesRefused)
	assert.Contains(t, err.Error(), "OOM command not allowed")
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	require.NoError(t, checkWrites(client))

	// A replica refuses writes.
	replica := redistest.Standalone(t)
	require.NoError(t, replica.Client(t).Do(ctx, "REPLICAOF", "127.0.0.1", srv.Port()).Err())
	err = checkWrites(newClient(t, redisx.Options{Addrs: []string{replica.Addr()}}))
	require.ErrorIs(t, err, redisx.ErrWritesRefused)
	assert.Contains(t, err.Error(), "READONLY")

	after, err := admin.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Equal(t, keys, after, "the check writes no key")
}

// TestCheckWritesAuthErrors: a missing or wrong password is reported with
// Redis's reply, by the check and by the scripts.
func TestCheckWritesAuthErrors(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Standalone(t)
	require.NoError(t, srv.Client(t).ConfigSet(ctx, "requirepass", "pw").Err())
	op := rate.Op{Key: rate.Key{Domain: "auth"}, Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Window: time.Second}, Hits: 1}
	for _, tc := range []struct{ password, want string }{
		{"", "NOAUTH Authentication required"},
		{"guess", "WRONGPASS"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			client := newClient(t, redisx.Options{Addrs: []string{srv.Addr()}, Password: tc.password})
			err := checkWrites(client)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotErrorIs(t, err, redisx.ErrWritesRefused)

			lim, err := redisx.NewLimiter(client, 2)
			require.NoError(t, err)
			t.Cleanup(lim.Close)
			_, err = lim.Do(ctx, []rate.Op{op})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCheckWritesClusterChecksEveryMaster: one master out of memory fails
// the check, which names it.
func TestCheckWritesClusterChecksEveryMaster(t *testing.T) {
	ctx := context.Background()
	cluster := redistest.NewCluster(t)
	client := newClient(t, redisx.Options{Mode: redisx.ModeCluster, Addrs: cluster.Addrs()})
	require.NoError(t, checkWrites(client))

	oom := cluster.Masters(t)[1]
	admin := oom.Client(t)
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "100000").Err())
	for i := range 5 { // whichever master go-redis would have asked
		require.NoError(t, redisx.Ping(ctx, client))
		err := checkWrites(client)
		require.ErrorIs(t, err, redisx.ErrWritesRefused, "check %d", i)
		assert.Contains(t, err.Error(), oom.Addr()+": OOM command not allowed")
	}
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "0").Err())
	require.NoError(t, checkWrites(client))
}
