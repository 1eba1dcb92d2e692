package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSentinelSetup(t *testing.T) {
	s := Sentinel(t)
	ctx := context.Background()
	require.Len(t, s.SentinelAddrs(), 3)
	assert.Equal(t, SentinelMasterName, s.MasterName())

	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	v, err := s.Master().Client(t).Get(ctx, "k").Result()
	require.NoError(t, err, "the failover client writes to the master")
	assert.Equal(t, "v", v)
	assert.Equal(t, "slave", infoField(t, s.Replica(), "replication", "role"))
}

func TestSentinelKillMaster(t *testing.T) {
	if testing.Short() {
		t.Skip("failover takes seconds")
	}
	s := Sentinel(t)
	ctx := context.Background()
	begin := time.Now()
	next := s.KillMaster(t)
	t.Logf("failover took %v", time.Since(begin).Round(time.Millisecond))
	assert.Equal(t, s.Replica(), next)
	assert.False(t, s.Master().Running())

	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	v, err := next.Client(t).Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
}
