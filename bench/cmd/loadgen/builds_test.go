package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFindServerRoot: from the repository's root and from anywhere in its
// bench module, -root's default is the root, whose go.mod is the server's;
// where no such go.mod is above, there is none.
func TestFindServerRoot(t *testing.T) {
	root := t.TempDir()
	module := func(dir, path string) {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+path+"\n\ngo 1.26.0\n"), 0o644))
	}
	module(root, serverModule)
	module(filepath.Join(root, "bench"), serverModule+"/bench")
	loadgen := filepath.Join(root, "bench", "cmd", "loadgen")
	require.NoError(t, os.MkdirAll(loadgen, 0o755))
	for _, dir := range []string{root, filepath.Join(root, "bench"), loadgen} {
		got, err := findServerRoot(dir)
		require.NoError(t, err, dir)
		assert.Equal(t, root, got, dir)
	}

	_, err := findServerRoot(t.TempDir())
	assert.ErrorContains(t, err, "name the server's module with -root")
}

// TestServerRootOfThisRepository: run from this package's directory, as go
// test runs it, the default -root is the repository's root, where
// cmd/server is; a -root given is kept.
func TestServerRootOfThisRepository(t *testing.T) {
	root, err := orServerRoot("")
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wd, "..", "..", ".."), root)
	_, err = os.Stat(filepath.Join(root, "cmd", "server", "main.go"))
	assert.NoError(t, err)

	root, err = orServerRoot("../elsewhere")
	require.NoError(t, err)
	assert.Equal(t, "../elsewhere", root)
}
