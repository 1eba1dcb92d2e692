package proc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/addrfile"
)

// shell returns a ServerConfig that runs script with sh in place of a
// server binary.
func shell(script string) ServerConfig {
	return ServerConfig{Name: "script", Bin: "sh", Args: []string{"-c", script}}
}

func TestStartServerReadsTheAddrFile(t *testing.T) {
	t.Parallel()
	cfg := shell(`printf '{"grpc":"%s","http":"%s","metrics":"%s","debug":"%s"}' "$RLS_GRPC_ADDR" "${RLS_FROM_THE_CALLER:-unset}" "$RLS_METRICS_ADDR" "$CALLER" >"$RLS_ADDR_FILE.tmp" &&
		mv "$RLS_ADDR_FILE.tmp" "$RLS_ADDR_FILE" && exec sleep 60`)
	cfg.BaseEnv = append(os.Environ(), "RLS_FROM_THE_CALLER=leaked", "CALLER=kept")
	cfg.Env = map[string]string{"RLS_METRICS_ADDR": "127.0.0.1:0"}
	s, err := StartServer(context.Background(), cfg)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, addrfile.Addrs{
		addrfile.GRPC:    "127.0.0.1:0", // the default the script was given
		addrfile.HTTP:    "unset",       // the caller's RLS_ variables stay out
		addrfile.Metrics: "127.0.0.1:0", // cfg.Env
		addrfile.Debug:   "kept",        // the caller's other variables go in
	}, s.Addrs)
	assert.True(t, s.Running())
	s.Close()
	assert.False(t, s.Running())
}

func TestStartServerThatExits(t *testing.T) {
	_, err := StartServer(context.Background(), shell(`echo "RLS_SOMETHING is wrong" >&2; exit 3`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "script exited at start")
	assert.Contains(t, err.Error(), "RLS_SOMETHING is wrong", "the error carries the output")
}

func TestStartServerThatNamesNoAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := StartServer(ctx, shell(`echo waiting; exec sleep 60`))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "waiting")
	assert.Less(t, time.Since(begin), 5*time.Second, "the process is stopped, not waited for")
}

// TestStartServerWithoutAddrFile: a server built before RLS_ADDR_FILE gets
// loopback ports of its own, and StartServer waits for its health there
// rather than for a file it will never write.
func TestStartServerWithoutAddrFile(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "seen")
	cfg := shell(`echo "$RLS_GRPC_ADDR $RLS_HTTP_ADDR" >` + seen + `; exec sleep 60`)
	cfg.NoAddrFile = true
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := StartServer(ctx, cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing answers health there")
	b, err := os.ReadFile(seen)
	require.NoError(t, err)
	addrs := strings.Fields(string(b))
	require.Len(t, addrs, 2)
	assert.NotEqual(t, addrs[0], addrs[1])
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
		assert.NotEqual(t, "0", port, "a port of its own, not one the kernel picks at bind")
	}
}
