package listen

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSideServesUntilShutdown: a side server answers once bound and
// served, and Serve returns nil once it is shut down.
func TestSideServesUntilShutdown(t *testing.T) {
	side, err := BindSide("RLS_METRICS_ADDR", "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "metrics\n")
	}))
	require.NoError(t, err)
	assert.Equal(t, "RLS_METRICS_ADDR", side.Name())
	served := make(chan error, 1)
	go func() { served <- side.Serve() }()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + side.Addr().String() + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "metrics\n", string(body))

	require.NoError(t, side.Shutdown(t.Context()))
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestBindSideNamesTheVariable: an address that cannot be bound is an
// error that names the variable; a side server that never serves is
// closed.
func TestBindSideNamesTheVariable(t *testing.T) {
	side, err := BindSide("RLS_DEBUG_ADDR", "127.0.0.1:0", http.NotFoundHandler())
	require.NoError(t, err)
	_, err = BindSide("RLS_METRICS_ADDR", side.Addr().String(), http.NotFoundHandler())
	assert.ErrorContains(t, err, "server: RLS_METRICS_ADDR: listen tcp "+side.Addr().String())
	require.NoError(t, side.Close())
}
