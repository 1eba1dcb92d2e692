package config

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatic: a Static source gives the Config it was made with, and its
// Run returns at once, even with a context that never ends.
func TestStatic(t *testing.T) {
	cfg := mustParse(t, limitsYAML("edge", 3), testOptions())
	origin := Origin{Name: "built by a test"}
	s := NewStatic(origin, cfg)
	assert.Equal(t, origin, s.Origin())
	got, err := s.Load(context.Background())
	require.NoError(t, err)
	assert.Same(t, cfg, got)

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(context.Background(), func(u Update) { t.Errorf("an update from a Static source: %+v", u) })
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestWatcherIsASource: a Watcher names its path as the origin of files,
// and its Load is the first Check: Run reports nothing that Load read.
func TestWatcherIsASource(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	w := NewWatcher(path, WatchOptions{Options: testOptions()})
	assert.Equal(t, Origin{Name: path}, w.Origin())
	cfg, err := w.Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"edge=1"}, limits(cfg))
	_, changed, err := w.Check(context.Background())
	require.NoError(t, err)
	assert.False(t, changed, "Load read the files")

	missing := NewWatcher(filepath.Join(dir, "later"), WatchOptions{Options: testOptions(), WaitForFiles: true})
	cfg, err = missing.Load(context.Background())
	assert.NoError(t, err)
	assert.Nil(t, cfg, "no files yet")
}
