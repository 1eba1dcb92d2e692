package server

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReleasesRunLastFirst: run releases in the reverse order of push,
// once each.
func TestReleasesRunLastFirst(t *testing.T) {
	var r releases
	var order []string
	for _, name := range []string{"tracer", "backend", "leases", "listener"} {
		r.push(func(context.Context) { order = append(order, name) })
	}
	r.run(context.Background())
	assert.Equal(t, []string{"listener", "leases", "backend", "tracer"}, order)
	r.run(context.Background())
	assert.Len(t, order, 4, "run empties the list")
}

// freeAddr returns a loopback address that nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestFailedNewReleasesWhatItBound: when the last listener cannot be
// bound, New returns its error and every listener it had bound is closed
// again.
func TestFailedNewReleasesWhatItBound(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addrs := map[string]string{"RLS_GRPC_ADDR": freeAddr(t), "RLS_HTTP_ADDR": freeAddr(t), "RLS_METRICS_ADDR": freeAddr(t)}
	env := map[string]string{"RLS_CONFIG_PATH": "../../config", "RLS_DEBUG_ADDR": taken.Addr().String()}
	maps.Copy(env, addrs)
	s, err := loadSettings(env)
	require.NoError(t, err)
	_, err = New(t.Context(), s, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "server: RLS_DEBUG_ADDR: ")
	for name, addr := range addrs {
		l, err := net.Listen("tcp", addr)
		if assert.NoError(t, err, "%s is still bound", name) {
			l.Close()
		}
	}
}
