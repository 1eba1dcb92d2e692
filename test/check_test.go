package test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckSaysWhatTheServerSays: on limits the server refuses to start
// with, `server check` exits 1 and reports, line for line, the message the
// server stops with; on limits the server starts with, it exits 0.
func TestCheckSaysWhatTheServerSays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   map[string]string
	}{
		{"several errors in one file", map[string]string{
			"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n  - key: j\n    bogus: 1\n  - key: k\n",
		}, nil},
		{"errors in several files", map[string]string{
			"a.yaml":     "domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: -1}}\n",
			"b.yaml":     "domain: a\n",
			"sub/c.yaml": "domain: c\ndescriptors: [\n",
		}, nil},
		{"a duplicate descriptor of merged files", map[string]string{
			"a.yaml": "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n",
			"b.yaml": "domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 2}}\n",
		}, map[string]string{"RLS_CONFIG_MERGE_DOMAINS": "true"}},
		{"more bytes than RLS_CONFIG_MAX_BYTES", map[string]string{
			"a.yaml": "domain: a\n", "b.yaml": "domain: b\ndescriptors: []\n",
		}, map[string]string{"RLS_CONFIG_MAX_BYTES": "20"}},
		{"a dot file read", map[string]string{
			"a.yaml": "domain: a\n", ".b.yaml": "domain: a\n",
		}, map[string]string{"RLS_CONFIG_DOT_FILES": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, content := range tc.files {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			env := with(tc.env, "RLS_CONFIG_PATH", dir)
			p, exited := runUntilExit(t, env, 20*time.Second, 0)
			require.True(t, exited && p.ExitCode() == 1, "the server refuses the limits; it said:\n%s", p.Output())
			out := p.Output()
			at := strings.LastIndex("\n"+out, "\nratewarden: ")
			require.GreaterOrEqual(t, at, 0, out)
			serverSays := strings.TrimSuffix(out[at+len("ratewarden: "):], "\n")

			code, checkSays := runCheckCommand(t, env)
			require.Equal(t, 1, code, checkSays)
			lines := strings.Split(strings.TrimSuffix(checkSays, "\n"), "\n")
			require.True(t, strings.HasPrefix(lines[len(lines)-1], "failed: "), checkSays)
			assert.Equal(t, serverSays, strings.Join(lines[:len(lines)-1], "\n"))
		})
	}

	// Limits the server starts with pass.
	code, out := runCheckCommand(t, map[string]string{"RLS_CONFIG_PATH": filepath.Join(repoRoot, "config")})
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "ok: 2 domains in 2 files")
}

// runCheckCommand runs `server check` with the variables env and returns
// its exit code and what it printed.
func runCheckCommand(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	cmd := exec.Command(serverBinary, "check")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}
