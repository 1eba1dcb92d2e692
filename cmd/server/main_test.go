package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/check"
)

func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, nil, nil, &out, &out))
	for _, name := range []string{"RLS_GRPC_ADDR", "RLS_HTTP_ADDR", "RLS_CONFIG_PATH", "RLS_BACKEND", "RLS_DEFAULT_ALGORITHM", "RLS_FAILURE_MODE", "RLS_BACKEND_TIMEOUT", "RLS_SHADOW_MODE", "RLS_REFUND_ON_DENY", "RLS_LOG_LEVEL"} {
		assert.Contains(t, out.String(), name)
	}
}

func TestUnknownArgumentIsAnError(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--port=1"}, nil, nil, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_")
}

// TestVersionFlag: -version prints the version and commit the release build
// stamps, and names a binary built otherwise as such.
func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-version"}, nil, nil, &out, &out))
	assert.Regexp(t, `^ratewarden \S+ \(commit \S+, go\S+ \w+/\w+\)\n$`, out.String())

	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "1.2.3", "4fa8b16"
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"--version"}, nil, nil, &out, &out))
	assert.Equal(t, fmt.Sprintf("ratewarden 1.2.3 (commit 4fa8b16, %s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH), out.String())
}

func TestInvalidSettingStopsStartup(t *testing.T) {
	t.Parallel()
	lookup := func(name string) (string, bool) {
		if name == "RLS_FAILURE_MODE" {
			return "sometimes", true
		}
		return "", false
	}
	var out bytes.Buffer
	err := run(context.Background(), nil, lookup, nil, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_FAILURE_MODE")
}

// TestDocsListEveryVariable keeps the environment tables of
// docs/settings.md in step with the variables the server reads: one row
// per variable, with the default that -h prints, and no row for a variable
// the server does not read.
func TestDocsListEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/settings.md")
	require.NoError(t, err)
	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(RLS_[A-Z0-9_]+)` \\| ([^|]*)\\|").FindAllStringSubmatch(string(doc), -1) {
		_, dup := documented[m[1]]
		assert.False(t, dup, "docs/settings.md lists %s twice", m[1])
		documented[m[1]] = strings.Trim(strings.TrimSpace(m[2]), "`")
	}

	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, nil, nil, &out, &out))
	lines := strings.Split(out.String(), "\n")
	header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "VARIABLE") })
	require.GreaterOrEqual(t, header, 0, "-h prints a header")
	defaultAt, meaningAt := strings.Index(lines[header], "DEFAULT"), strings.Index(lines[header], "MEANING")
	served := map[string]bool{}
	for _, l := range lines[header+1:] {
		if !strings.HasPrefix(l, "RLS_") {
			continue
		}
		name := strings.Fields(l)[0]
		served[name] = true
		def, ok := documented[name]
		if !assert.True(t, ok, "docs/settings.md's environment tables lack %s", name) {
			continue
		}
		assert.Equal(t, strings.TrimSpace(l[defaultAt:meaningAt]), def, "the default of %s", name)
	}
	require.NotEmpty(t, served)
	for name := range documented {
		assert.True(t, served[name], "docs/settings.md lists %s, which the server does not read", name)
	}
}

// TestCheckCommand: `server check` checks limits without serving, and
// ends with the check's exit code.
func TestCheckCommand(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"check", "../../config"}, func(string) (string, bool) { return "", false }, nil, &out, &out))
	assert.Contains(t, out.String(), "ok: 2 domains in 2 files")

	out.Reset()
	err := run(context.Background(), []string{"check", "../../config/nope"}, func(string) (string, bool) { return "", false }, nil, &out, &out)
	var exit *check.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, check.ExitFailed, exit.Code)

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-h"}, nil, nil, &out, &out))
	assert.Contains(t, out.String(), "server check [flags] [PATH]")
}
