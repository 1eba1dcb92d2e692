package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every reload in these tests must arrive well within the 2 s the server
// promises; polls are short, and no test sleeps to wait for a result.
const (
	within = 2 * time.Second
	tick   = 5 * time.Millisecond
)

// limitsYAML is a one-rule file for domain allowing rpu hits a minute.
func limitsYAML(domain string, rpu int) string {
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", domain, rpu)
}

// replace writes dir/name the way editors do, through a temporary file
// renamed over it, so that no reader ever sees it half written.
func replace(t *testing.T, dir, name, data string) {
	t.Helper()
	tmp := write(t, dir, "."+name+".tmp", data)
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, name)))
}

// report is one call of Run's callback.
type report struct {
	cfg *Config
	err error
}

// reports collects the callbacks of a running Watcher.
type reports struct {
	w   *Watcher
	mu  sync.Mutex
	got []report
}

// watching reports whether the Watcher watched dir after its last check.
func (r *reports) watching(dir string) bool {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return slices.Contains(r.w.watching, filepath.Clean(dir))
}

func (r *reports) add(u Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, report{u.Config, u.Err})
}

func (r *reports) all() []report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]report(nil), r.got...)
}

// lastLimits returns "domain=rpu" for every limited rule of the last
// report's Config, sorted; nil when there is no report or it is an error.
func (r *reports) lastLimits() []string {
	all := r.all()
	if len(all) == 0 || all[len(all)-1].cfg == nil {
		return nil
	}
	return limits(all[len(all)-1].cfg)
}

func limits(c *Config) []string {
	var out []string
	for _, rule := range c.Rules() {
		for _, l := range rule.Limits {
			out = append(out, fmt.Sprintf("%s=%d", rule.Domain, l.Limit.Requests))
		}
	}
	sort.Strings(out)
	return out
}

// newWatcher returns a Watcher of path and what its Load returned.
func newWatcher(path string, opts WatchOptions) (*Watcher, *Config, error) {
	w := NewWatcher(path, opts)
	cfg, err := w.Load(context.Background())
	return w, cfg, err
}

// watch runs a Watcher on path until the test ends, and checks that Run
// then returns. It returns once Run has made its first check, so that what
// the test changes next can only be seen through notifications or polls,
// with the number of checks Run has made so far.
func watch(t *testing.T, path string, opts WatchOptions) (*reports, *Config, *atomic.Int64) {
	t.Helper()
	w, cfg, err := newWatcher(path, opts)
	require.NoError(t, err)
	checks := new(atomic.Int64)
	w.afterCheck = func() { checks.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r := &reports{w: w}
	go func() {
		defer close(done)
		w.Run(ctx, r.add)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	require.Eventually(t, func() bool { return checks.Load() > 0 }, within, tick, "Run's first check")
	require.Empty(t, r.all(), "nothing changed since Load")
	return r, cfg, checks
}

// notifyOnly turns polling off, so that only file system notifications
// can trigger a reload.
var notifyOnly = WatchOptions{Options: testOptions(), PollInterval: -1}

func requireLimits(t *testing.T, r *reports, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return fmt.Sprint(r.lastLimits()) == fmt.Sprint(want) },
		within, tick, "want %v, reports %d, last %v", want, len(r.all()), r.lastLimits())
}

func TestWatcherFileEditedInPlace(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, cfg, _ := watch(t, path, notifyOnly)
	assert.Equal(t, []string{"edge=1"}, limits(cfg))

	// What `cp new.yaml limits.yaml` does: truncate, then write.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString(limitsYAML("edge", 2))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	requireLimits(t, r, "edge=2")
}

func TestWatcherFileRenamedOver(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, _, _ := watch(t, path, notifyOnly)

	// What editors do: write a temporary file, rename it over the original.
	replace(t, dir, "limits.yaml", limitsYAML("edge", 3))
	requireLimits(t, r, "edge=3")
	require.Len(t, r.all(), 1)
}

func TestWatcherDirectoryFilesAddedAndRemoved(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a.yaml", limitsYAML("a", 1))
	r, _, _ := watch(t, dir, notifyOnly)

	write(t, dir, "b.yml", limitsYAML("b", 2))
	requireLimits(t, r, "a=1", "b=2")
	require.NoError(t, os.Remove(a))
	requireLimits(t, r, "b=2")
	write(t, dir, ".notes.txt", "not yaml at all: [")
	write(t, dir, "b.yml", limitsYAML("b", 5))
	requireLimits(t, r, "b=5")
	for _, rep := range r.all() {
		assert.NoError(t, rep.err)
	}
}

// configMapVolume lays out and updates a directory the way kubelet's atomic
// writer does for a ConfigMap volume: the files live in a timestamped
// directory, ..data links to it, each key is a link through ..data, and an
// update writes a new timestamped directory, points ..data_tmp at it and
// renames ..data_tmp over ..data.
type configMapVolume struct {
	t   *testing.T
	dir string
}

func (v configMapVolume) update(files map[string]string) {
	t := v.t
	data := filepath.Join(v.dir, "..data")
	old, _ := os.Readlink(data) // "" on the first update

	// A new timestamped directory with the payload.
	ts, err := os.MkdirTemp(v.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	require.NoError(t, err)
	require.NoError(t, os.Chmod(ts, 0o755))
	for name, content := range files {
		write(t, ts, name, content)
	}
	// ..data_tmp points at it, and is renamed over ..data in one step.
	tmp := filepath.Join(v.dir, "..data_tmp")
	require.NoError(t, os.Symlink(filepath.Base(ts), tmp))
	require.NoError(t, os.Rename(tmp, data))
	// The visible files are links through ..data: new keys get one, keys
	// that went away lose theirs.
	for name := range files {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, fs.ErrNotExist) {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), link))
		}
	}
	entries, err := os.ReadDir(v.dir)
	require.NoError(t, err)
	for _, e := range entries {
		if _, keep := files[e.Name()]; !keep && e.Name()[0] != '.' {
			require.NoError(t, os.Remove(filepath.Join(v.dir, e.Name())))
		}
	}
	// The previous timestamped directory goes.
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(v.dir, old)))
	}
}

func TestWatcherConfigMapVolume(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(dir string) string
	}{
		{"directory", func(dir string) string { return dir }},
		{"one file of it", func(dir string) string { return filepath.Join(dir, "edge.yaml") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := configMapVolume{t, t.TempDir()}
			v.update(map[string]string{"edge.yaml": limitsYAML("edge", 1)})
			r, cfg, _ := watch(t, tc.path(v.dir), notifyOnly)
			assert.Equal(t, []string{"edge=1"}, limits(cfg))

			v.update(map[string]string{"edge.yaml": limitsYAML("edge", 2)})
			requireLimits(t, r, "edge=2")
			v.update(map[string]string{"edge.yaml": limitsYAML("edge", 3)})
			requireLimits(t, r, "edge=3")
			require.Len(t, r.all(), 2)
		})
	}
	t.Run("keys added and removed", func(t *testing.T) {
		v := configMapVolume{t, t.TempDir()}
		v.update(map[string]string{"edge.yaml": limitsYAML("edge", 1)})
		r, _, _ := watch(t, v.dir, notifyOnly)
		v.update(map[string]string{"edge.yaml": limitsYAML("edge", 1), "api.yaml": limitsYAML("api", 9)})
		requireLimits(t, r, "api=9", "edge=1")
		v.update(map[string]string{"api.yaml": limitsYAML("api", 9)})
		requireLimits(t, r, "api=9")
	})
}

func TestWatcherBrokenFileIsReportedThenFixed(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, _, _ := watch(t, path, notifyOnly)

	write(t, dir, "limits.yaml", "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	require.Eventually(t, func() bool { return len(r.all()) == 1 }, within, tick)
	err := r.all()[0].err
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, path, e.File)
	assert.Equal(t, 4, e.Line)
	assert.Equal(t, "descriptors[0].rate_limit.unit", e.Field)
	assert.Contains(t, err.Error(), path+":4:24: ")

	write(t, dir, "limits.yaml", "domain: edge\ndescriptors: [\n")
	require.Eventually(t, func() bool { return len(r.all()) == 2 }, within, tick)
	require.Error(t, r.all()[1].err)
	assert.Contains(t, r.all()[1].err.Error(), path+":")

	write(t, dir, "limits.yaml", limitsYAML("edge", 4))
	requireLimits(t, r, "edge=4")
	require.Len(t, r.all(), 3)
}

func TestWatcherBurstOfWritesLoadsOnce(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	// A long debounce, so that a slow machine cannot split the burst.
	r, _, _ := watch(t, path, WatchOptions{Options: testOptions(), PollInterval: -1, Debounce: 500 * time.Millisecond})

	for i := 100; i <= 120; i++ {
		write(t, dir, "limits.yaml", limitsYAML("edge", i))
	}
	requireLimits(t, r, "edge=120")
	// Reports come in order: a reload the burst caused late would come
	// before this one.
	write(t, dir, "limits.yaml", limitsYAML("edge", 7))
	requireLimits(t, r, "edge=7")
	assert.Len(t, r.all(), 2)
}

func TestWatcherSteadyWritesCannotPutOffAReload(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, _, _ := watch(t, path, WatchOptions{Options: testOptions(), PollInterval: -1, Debounce: 200 * time.Millisecond})

	// A write every 50 ms never leaves the file quiet for 200 ms; the
	// reload still comes, at most 5 debounces after the first write.
	deadline := time.Now().Add(5 * time.Second)
	for i := 2; len(r.all()) == 0 && time.Now().Before(deadline); i++ {
		replace(t, dir, "limits.yaml", limitsYAML("edge", i))
		time.Sleep(50 * time.Millisecond) // paces the writes; nothing is asserted on time
	}
	require.NotEmpty(t, r.all(), "no reload while the file kept changing")
	assert.NoError(t, r.all()[0].err)
}

func TestWatcherIgnoresUnchangedContent(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	r, _, checks := watch(t, path, WatchOptions{Options: testOptions(), PollInterval: 20 * time.Millisecond})

	replace(t, dir, "limits.yaml", limitsYAML("edge", 1)) // same bytes
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(path, later, later)) // touch
	write(t, dir, "other.txt", "next to it")
	// Two checks begun after the writes ended: both polls and debounced
	// notifications have seen them.
	n := checks.Load()
	require.Eventually(t, func() bool { return checks.Load() >= n+2 }, within, tick)
	assert.Empty(t, r.all())

	replace(t, dir, "limits.yaml", limitsYAML("edge", 2))
	requireLimits(t, r, "edge=2")
	assert.Len(t, r.all(), 1)
}

func TestWatcherPollsWhatNotificationsMiss(t *testing.T) {
	// The directory holds a link to a file elsewhere: writing that file
	// sends no notification about the watched directory, so only polling
	// sees it (as on volume mounts that send no notifications at all).
	dir, elsewhere := t.TempDir(), t.TempDir()
	real := write(t, elsewhere, "real.yaml", limitsYAML("edge", 1))
	require.NoError(t, os.Symlink(real, filepath.Join(dir, "edge.yaml")))
	r, _, _ := watch(t, dir, WatchOptions{Options: testOptions(), PollInterval: 50 * time.Millisecond})

	write(t, elsewhere, "real.yaml", limitsYAML("edge", 2))
	requireLimits(t, r, "edge=2")
}

func TestWatcherCheck(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.yaml", limitsYAML("edge", 1))
	w, cfg, err := newWatcher(path, WatchOptions{Options: testOptions()})
	require.NoError(t, err)
	assert.Equal(t, path, w.Path())
	assert.Equal(t, []string{"edge=1"}, limits(cfg))

	type want struct {
		changed bool
		limits  []string // of the new Config
		err     string   // part of the error
	}
	for _, step := range []struct {
		name   string
		change func()
		want   want
	}{
		{"nothing", func() {}, want{}},
		{"same bytes", func() { write(t, dir, "limits.yaml", limitsYAML("edge", 1)) }, want{}},
		{"new limit", func() { write(t, dir, "limits.yaml", limitsYAML("edge", 2)) }, want{changed: true, limits: []string{"edge=2"}}},
		{"invalid", func() { write(t, dir, "limits.yaml", "domain: edge\nbogus: 1\n") }, want{changed: true, err: path + ":2:1: bogus: "}},
		{"invalid again, unchanged", func() {}, want{}},
		{"removed", func() { require.NoError(t, os.Remove(path)) }, want{changed: true, err: "no such file or directory"}},
		{"still removed", func() {}, want{}},
		{"back as it was last loaded", func() { write(t, dir, "limits.yaml", limitsYAML("edge", 2)) }, want{changed: true, limits: []string{"edge=2"}}},
	} {
		step.change()
		cfg, changed, err := w.Check(context.Background())
		assert.Equal(t, step.want.changed, changed, step.name)
		if step.want.err != "" {
			assert.Nil(t, cfg, step.name)
			var e *Error
			if assert.True(t, errors.As(err, &e), "%s: %v", step.name, err) {
				assert.Contains(t, err.Error(), step.want.err, step.name)
			}
			continue
		}
		assert.NoError(t, err, step.name)
		if step.want.limits == nil {
			assert.Nil(t, cfg, step.name)
		} else if assert.NotNil(t, cfg, step.name) {
			assert.Equal(t, step.want.limits, limits(cfg), step.name)
		}
	}
}

func TestWatcherFileRenamedIsAChange(t *testing.T) {
	// Names are part of the content: the rules and errors quote them.
	dir := t.TempDir()
	a := write(t, dir, "a.yaml", limitsYAML("edge", 1))
	w, _, err := newWatcher(dir, WatchOptions{Options: testOptions()})
	require.NoError(t, err)
	b := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.Rename(a, b))
	cfg, changed, err := w.Check(context.Background())
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, []string{b}, cfg.Files())
}

func TestWatcherLoadFailsAsLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, _, err := newWatcher(path, WatchOptions{Options: testOptions()})
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, path, e.File)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}
