package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWatcherSubdirectories: files in subdirectories are read, and their
// changes come through notifications, in subdirectories made after Run
// began too.
func TestWatcherSubdirectories(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "teams")
	require.NoError(t, os.Mkdir(sub, 0o755))
	write(t, sub, "a.yaml", limitsYAML("a", 1))
	r, cfg, _ := watch(t, dir, notifyOnly)
	assert.Equal(t, []string{"a=1"}, limits(cfg))

	replace(t, sub, "a.yaml", limitsYAML("a", 2))
	requireLimits(t, r, "a=2")

	// A new subdirectory, then a file in it once it is watched: only a
	// notification from inside the new directory tells of the file.
	deeper := filepath.Join(sub, "payments")
	require.NoError(t, os.Mkdir(deeper, 0o755))
	require.Eventually(t, func() bool { return r.watching(deeper) }, within, tick)
	write(t, deeper, "b.yaml", limitsYAML("b", 3))
	requireLimits(t, r, "a=2", "b=3")
	replace(t, deeper, "b.yaml", limitsYAML("b", 4))
	requireLimits(t, r, "a=2", "b=4")

	require.NoError(t, os.RemoveAll(deeper))
	requireLimits(t, r, "a=2")
	for _, rep := range r.all() {
		assert.NoError(t, rep.err)
	}
}

// TestWatcherWaitsForFiles: with WaitForFiles, a path that does not exist yet
// gives a Watcher without a Config, and the Config comes through
// notifications once the directory and its files appear.
func TestWatcherWaitsForFiles(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "config", "limits")
	_, _, err := newWatcher(dir, WatchOptions{Options: testOptions()})
	require.ErrorIs(t, err, ErrNoConfig)

	opts := notifyOnly
	opts.WaitForFiles = true
	r, cfg, _ := watch(t, dir, opts)
	assert.Nil(t, cfg)

	require.NoError(t, os.MkdirAll(dir, 0o755))
	// The empty directory is still nothing to load.
	require.Eventually(t, func() bool { return r.watching(dir) }, within, tick)
	write(t, dir, "a.yaml", limitsYAML("a", 1))
	requireLimits(t, r, "a=1")
	for i, rep := range r.all() {
		if rep.cfg == nil {
			assert.ErrorIs(t, rep.err, ErrNoConfig, "report %d", i)
		}
	}
}

// TestWatcherWaitsForFilesInAnEmptyDirectory, as when a ConfigMap volume
// is mounted before the ConfigMap holds anything.
func TestWatcherWaitsForFilesInAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	opts := notifyOnly
	opts.WaitForFiles = true
	r, cfg, _ := watch(t, dir, opts)
	assert.Nil(t, cfg)
	v := configMapVolume{t: t, dir: dir}
	v.update(map[string]string{"a.yaml": limitsYAML("a", 7)})
	requireLimits(t, r, "a=7")
	v.update(map[string]string{"a.yaml": limitsYAML("a", 8), "b.yaml": limitsYAML("b", 9)})
	requireLimits(t, r, "a=8", "b=9")
	for _, rep := range r.all() {
		assert.NoError(t, rep.err)
	}
}
