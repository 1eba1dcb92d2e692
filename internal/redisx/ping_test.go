package redisx_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/redistest"
	"github.com/ratewarden/ratewarden/internal/redisx"
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
