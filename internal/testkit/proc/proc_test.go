package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLookPathIn looks for a program in the directories a PATH of the
// caller's lists, as exec.LookPath looks in PATH.
func TestLookPathIn(t *testing.T) {
	t.Parallel()
	empty, bin := t.TempDir(), t.TempDir()
	prog := filepath.Join(bin, "prog")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(empty, "data"), nil, 0o644))
	path := empty + string(os.PathListSeparator) + bin

	got, err := LookPathIn(path, "prog", "make it")
	require.NoError(t, err)
	assert.Equal(t, prog, got)

	_, err = LookPathIn(path, "data", "make it")
	assert.ErrorIs(t, err, ErrNotInstalled, "a file that is not executable is no program")
	assert.ErrorIs(t, err, exec.ErrNotFound)
	assert.ErrorContains(t, err, "install it: make it")

	_, err = LookPathIn(bin+string(os.PathListSeparator)+".", "nothing", "x")
	assert.ErrorIs(t, err, exec.ErrNotFound)

	wd, err := os.Getwd()
	require.NoError(t, err)
	relative, err := filepath.Rel(wd, bin)
	require.NoError(t, err)
	_, err = LookPathIn(relative, "prog", "x")
	assert.ErrorIs(t, err, exec.ErrDot, "a program found through a relative directory is refused, as exec.LookPath refuses it")
	assert.ErrorIs(t, err, ErrNotInstalled)

	sh, err := LookPathIn("", "sh", "apt-get install dash")
	require.NoError(t, err, "an empty path is PATH")
	want, _ := exec.LookPath("sh")
	assert.Equal(t, want, sh)
}
