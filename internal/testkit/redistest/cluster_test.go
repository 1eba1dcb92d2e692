package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSharedClusterLayout(t *testing.T) {
	c := SharedCluster(t)
	assert.Same(t, c, SharedCluster(t), "one cluster per test binary")
	require.Len(t, c.Nodes(), 6)
	require.Len(t, c.Addrs(), 6)

	masters := c.Masters(t)
	require.Len(t, masters, 3)
	ctx := context.Background()
	for _, n := range c.Nodes() {
		info, err := n.Client(t).ClusterInfo(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok\r\n", n.String())
		assert.Contains(t, info, "cluster_slots_ok:16384\r\n", n.String())
		role := infoField(t, n, "replication", "role")
		if slices.Contains(masters, n) {
			assert.Equal(t, "master", role, n.String())
		} else {
			assert.Equal(t, "slave", role, n.String())
		}
	}

	// The three masters own every slot between them.
	//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis version; CLUSTER SHARDS needs 7.0.
	slots, err := masters[0].Client(t).ClusterSlots(ctx).Result()
	require.NoError(t, err)
	covered := 0
	for _, s := range slots {
		covered += s.End - s.Start + 1
		assert.Contains(t, c.Addrs(), s.Nodes[0].Addr)
	}
	assert.Equal(t, 16384, covered)

	// Each master has one replica.
	for _, m := range masters {
		replicas := 0
		for _, n := range c.Nodes() {
			if infoField(t, n, "replication", "master_port") == strconv.Itoa(m.Port()) {
				replicas++
			}
		}
		assert.Equal(t, 1, replicas, "replicas of %s", m)
	}
	for _, key := range []string{"a", "b", "c", "{tenant}x"} {
		assert.Contains(t, masters, c.MasterForKey(t, key), "key %s", key)
	}
}

func TestSharedClusterMasterForKey(t *testing.T) {
	c := SharedCluster(t)
	ctx := context.Background()
	cc := c.Client(t)
	prefix := t.Name() + ":"
	for i := range 20 {
		key := fmt.Sprintf("%s{tenant%d}:count", prefix, i)
		slot, err := cc.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		got, err := c.KeySlot(ctx, key)
		require.NoError(t, err)
		require.Equal(t, int(slot), got)

		require.NoError(t, cc.Set(ctx, key, i, time.Minute).Err())
		m := c.MasterForKey(t, key)
		// The master named for the key holds it, without a redirect.
		v, err := m.Client(t).Get(ctx, key).Int()
		require.NoError(t, err, "GET %s on %s", key, m)
		assert.Equal(t, i, v)
	}
	// Keys with the same hash tag share a master.
	assert.Equal(t, c.MasterForKey(t, prefix+"{same}a"), c.MasterForKey(t, prefix+"{same}b"))
}

func TestClusterKillMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("failover takes seconds")
	}
	c := NewCluster(t)
	ctx := context.Background()
	cc := c.Client(t)
	key := "{failover}k"
	require.NoError(t, cc.Set(ctx, key, "v", 0).Err())
	old := c.MasterForKey(t, key)
	// Make sure the replica has the key before its master dies.
	require.NoError(t, old.Client(t).Do(ctx, "WAIT", 1, 5000).Err())

	begin := time.Now()
	promoted := c.KillMaster(t, old)
	t.Logf("failover took %v", time.Since(begin).Round(time.Millisecond))
	assert.NotEqual(t, old, promoted)
	assert.False(t, old.Running())
	assert.Equal(t, promoted, c.MasterForKey(t, key))
	assert.Len(t, c.Masters(t), 3)
	v, err := promoted.Client(t).Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)

	// The old master comes back as a replica of the promoted one.
	require.NoError(t, old.Start())
	require.Eventually(t, func() bool {
		return infoField(t, old, "replication", "master_link_status") == "up"
	}, time.Minute, 50*time.Millisecond, "the old master syncs with the promoted one")
	assert.Equal(t, "slave", infoField(t, old, "replication", "role"))
	assert.Equal(t, promoted, c.MasterForKey(t, key))
}

// infoField returns one field of the INFO section of s.
func infoField(t *testing.T, s *Server, section, name string) string {
	t.Helper()
	info, err := s.Info(context.Background(), section)
	require.NoError(t, err)
	return info[name]
}
