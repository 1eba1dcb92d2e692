package addrfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "addrs.json")
	_, err := Read(path)
	require.ErrorIs(t, err, ErrNotWritten)

	require.NoError(t, Write(path, Addrs{GRPC: "127.0.0.1:41001", HTTP: "127.0.0.1:41002"}))
	// A second Write replaces the first whole, and leaves no temporary file.
	require.NoError(t, Write(path, Addrs{GRPC: "[::1]:41003"}))
	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, Addrs{GRPC: "[::1]:41003"}, got)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1)

	require.NoError(t, os.WriteFile(path, []byte("grpc 127.0.0.1:1\n"), 0o600))
	_, err = Read(path)
	require.Error(t, err, "another format")
	assert.NotErrorIs(t, err, ErrNotWritten)
}
