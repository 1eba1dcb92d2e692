package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/filehold"
)

// loadWithin runs LoadContext and fails the test if it does not return
// within a generous bound.
func loadWithin(t *testing.T, ctx context.Context, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := LoadContext(ctx, path, testOptions())
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("LoadContext(%s) still blocked after 10s", path)
		return nil
	}
}

func TestLoadRefusesANamedPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "limits.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))

	for _, path := range []string{fifo, dir} {
		err := loadWithin(t, context.Background(), path)
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, fifo, e.File)
		assert.Contains(t, e.Msg, "named pipe")
		assert.Contains(t, err.Error(), "not a regular file")
	}
}

func TestLoadGivesUpOnAHungRead(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", edgeYAML)
	held := write(t, dir, "b.yaml", otherYAML)
	filehold.Hold(t, held)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := loadWithin(t, ctx, dir)
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, held, e.File, "the error names the file being read")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "did not finish in time")
}

func TestWatcherSurvivesAHungRead(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	w, cfg, err := newWatcher(path, WatchOptions{Options: testOptions(), ReadTimeout: 100 * time.Millisecond, PollInterval: -1})
	require.NoError(t, err)
	require.Equal(t, []string{"edge=1"}, limits(cfg))

	release := filehold.Hold(t, path)
	_, changed, err := w.Check(context.Background())
	require.True(t, changed)
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, path, e.File)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	first := w.pending
	require.NotNil(t, first, "the hung read goes on")

	// While it hangs, a Check waits for it rather than starting another,
	// and reports nothing new.
	_, changed, err = w.Check(context.Background())
	assert.False(t, changed, "%v", err)
	assert.Same(t, first, w.pending)

	// Run returns at once when its context ends, hung read or not.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(Update) {})
	}()
	time.Sleep(200 * time.Millisecond) // Run's first check is under way
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return while a read hung")
	}

	// Once the volume answers, the next Check loads again.
	release()
	replace(t, dir, "limits.yaml", limitsYAML("edge", 2))
	require.Eventually(t, func() bool {
		cfg, changed, err := w.Check(context.Background())
		return changed && err == nil && cfg != nil && limits(cfg)[0] == "edge=2"
	}, within, tick)
}

func TestWatcherReportsANamedPipe(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, _, _ := watch(t, dir, WatchOptions{Options: testOptions(), PollInterval: 20 * time.Millisecond})
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	require.Eventually(t, func() bool {
		all := r.all()
		return len(all) > 0 && all[len(all)-1].err != nil
	}, 5*time.Second, tick)
	all := r.all()
	err := all[len(all)-1].err
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, path, e.File)
	assert.Contains(t, e.Msg, "named pipe")
}
