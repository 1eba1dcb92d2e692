package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// load reads and parses the configuration at path as the server's loader
// does, waiting for the files at most 10s.
func load(path string, opts Options) (*Config, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return LoadContext(ctx, path, opts)
}

// write creates the file dir/name holding data.
func write(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	return path
}

const (
	edgeYAML  = "domain: edge\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n"
	otherYAML = "domain: other\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 2}}\n"
)

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "limits.conf", edgeYAML) // a named file loads whatever its extension
	c, err := load(path, Options{DefaultAlgorithm: algorithms.FixedWindow})
	require.NoError(t, err)
	assert.Equal(t, []string{"edge"}, c.Domains())
	assert.Equal(t, []string{path}, c.Files())
	require.Len(t, c.Rules(), 1)
	assert.Equal(t, algorithms.FixedWindow, c.Rules()[0].Limits[0].Limit.Algorithm)
	assert.Equal(t, path, c.Rules()[0].File)
}

// TestLoadDirectory reads the files envoyproxy/ratelimit's runtime loader
// reads with RUNTIME_IGNOREDOTFILES: every file of the directory and its
// subdirectories, whatever its name, but not those whose names start with
// '.', nor what a symlink to a directory holds.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b.yml", otherYAML)
	write(t, dir, "a.yaml", edgeYAML)
	write(t, dir, "limits", "domain: noext\n")
	sub := filepath.Join(dir, "team", "payments")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	write(t, sub, "deep.conf", "domain: deep\n")
	write(t, dir, ".hidden.yaml", "domain: hidden\n")
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".git"), 0o755))
	write(t, filepath.Join(dir, ".git"), "config.yaml", "domain: git\n")
	require.NoError(t, os.Symlink("team", filepath.Join(dir, "linked")))

	c, err := load(dir, testOptions())
	require.NoError(t, err)
	assert.Equal(t, []string{"deep", "edge", "noext", "other"}, c.Domains())
	assert.Equal(t, []string{
		filepath.Join(dir, "a.yaml"),
		filepath.Join(dir, "b.yml"),
		filepath.Join(dir, "limits"),
		filepath.Join(sub, "deep.conf"),
	}, c.Files())

	c, err = load(dir, Options{DefaultAlgorithm: testAlgorithm, DotFiles: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"deep", "edge", "git", "hidden", "noext", "other"}, c.Domains())
}

func TestLoadKubernetesConfigMap(t *testing.T) {
	// A ConfigMap volume: the files live in a timestamped directory, ..data
	// links to it, and each key is a link through ..data.
	dir := t.TempDir()
	real := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	require.NoError(t, os.Mkdir(real, 0o755))
	write(t, real, "edge.yaml", edgeYAML)
	write(t, real, "other.yml", otherYAML)
	require.NoError(t, os.Symlink(filepath.Base(real), filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "edge.yaml"), filepath.Join(dir, "edge.yaml")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "other.yml"), filepath.Join(dir, "other.yml")))

	c, err := load(dir, testOptions())
	require.NoError(t, err)
	assert.Equal(t, []string{"edge", "other"}, c.Domains())
	assert.Equal(t, []string{filepath.Join(dir, "edge.yaml"), filepath.Join(dir, "other.yml")}, c.Files())
	m, ok := c.Match("other", entries("k=v"))
	require.True(t, ok)
	assert.Equal(t, filepath.Join(dir, "other.yml"), m.Rule.File)
}

// TestLoadPathThatLinksToADirectory: a path that is itself a symlink to a
// directory (a ConfigMap's ..data, a link to a checkout's config/) is read
// as that directory, its files named under the path.
func TestLoadPathThatLinksToADirectory(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	write(t, real, "edge.yaml", edgeYAML)
	link := filepath.Join(dir, "..data")
	require.NoError(t, os.Symlink("real", link))

	c, err := load(link, testOptions())
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(link, "edge.yaml")}, c.Files())

	s := scan(link, false, 1<<20, func(string) {})
	require.NoError(t, s.err)
	assert.Equal(t, []string{link}, s.dirs)
}

func TestLoadErrors(t *testing.T) {
	t.Run("missing path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope")
		_, err := load(path, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, path, e.File)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, err, ErrNoConfig)
		assert.Contains(t, err.Error(), path)
		assert.Contains(t, err.Error(), "no such file or directory")
	})
	t.Run("directory without files", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, ".x.yaml", "domain: x\n")
		require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
		_, err := load(dir, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, &Error{File: dir, Msg: "no configuration files in directory", Err: ErrNoConfig}, e)
		assert.NotErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("a file that is not YAML", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", edgeYAML)
		notes := write(t, dir, "notes.txt", "not: [yaml")
		_, err := load(dir, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, notes, e.File)
		assert.NotErrorIs(t, err, ErrNoConfig)
	})
	t.Run("broken symlink", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", edgeYAML)
		link := filepath.Join(dir, "gone.yaml")
		require.NoError(t, os.Symlink(filepath.Join(dir, "..data", "gone.yaml"), link))
		_, err := load(dir, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, link, e.File)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
	t.Run("an invalid file names its path and line", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", edgeYAML)
		bad := write(t, dir, "b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n")
		_, err := load(dir, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, bad, e.File)
		assert.Equal(t, 4, e.Line)
		assert.Equal(t, "descriptors[0].rate_limit.unit", e.Field)
	})
	t.Run("the same domain in two files", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "a.yaml", edgeYAML)
		second := write(t, dir, "b.yaml", "# again\n"+edgeYAML)
		_, err := load(dir, testOptions())
		var e *Error
		require.True(t, errors.As(err, &e), "%v", err)
		assert.Equal(t, second, e.File)
		assert.Equal(t, 2, e.Line)
		assert.Equal(t, "domain", e.Field)
		assert.Contains(t, e.Msg, "duplicate domain \"edge\"")
	})
}

// TestLoadRefusesMoreThanMaxBytes: the files of a configuration may hold at
// most Options.MaxBytes together; past that, loading is an error naming the
// file that went past it, the sizes and the setting, and nothing is parsed.
func TestLoadRefusesMoreThanMaxBytes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", edgeYAML)
	last := write(t, dir, "b.yaml", otherYAML)
	both := int64(len(edgeYAML) + len(otherYAML))

	c, err := load(dir, Options{DefaultAlgorithm: testAlgorithm, MaxBytes: both})
	require.NoError(t, err)
	assert.Len(t, c.Domains(), 2)

	_, err = load(dir, Options{DefaultAlgorithm: testAlgorithm, MaxBytes: both - 1})
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, last, e.File)
	assert.Equal(t, fmt.Sprintf("%s: cannot read: the limits files hold %d bytes up to this one, more than the %d they may hold (RLS_CONFIG_MAX_BYTES)", last, both, both-1), err.Error())

	_, err = load(last, Options{DefaultAlgorithm: testAlgorithm, MaxBytes: 10})
	assert.ErrorContains(t, err, fmt.Sprintf("hold %d bytes up to this one, more than the 10 they may hold (RLS_CONFIG_MAX_BYTES)", len(otherYAML)))

	// A zero MaxBytes sets no bound.
	c, err = load(dir, testOptions())
	require.NoError(t, err)
	assert.Len(t, c.Domains(), 2)
	assert.Equal(t, int64(math.MaxInt64), testOptions().maxBytes())
}
