package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelpListsEveryVariable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, &out, &out))
	for _, name := range []string{"RLS_GRPC_ADDR", "RLS_HTTP_ADDR", "RLS_CONFIG_PATH", "RLS_BACKEND", "RLS_DEFAULT_ALGORITHM", "RLS_FAILURE_MODE", "RLS_BACKEND_TIMEOUT", "RLS_SHADOW_MODE", "RLS_REFUND_ON_DENY", "RLS_LOG_LEVEL"} {
		assert.Contains(t, out.String(), name)
	}
}

func TestUnknownArgumentIsAnError(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--port=1"}, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_")
}

func TestInvalidSettingStopsStartup(t *testing.T) {
	t.Setenv("RLS_FAILURE_MODE", "sometimes")
	var out bytes.Buffer
	err := run(context.Background(), nil, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_FAILURE_MODE")
}

// TestReadmeListsEveryVariable keeps the README's environment table in step
// with the variables the server reads.
func TestReadmeListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-h"}, &out, &out))
	names := regexp.MustCompile(`(?m)^(RLS_[A-Z0-9_]+)\s`).FindAllStringSubmatch(out.String(), -1)
	require.NotEmpty(t, names)
	for _, m := range names {
		assert.Contains(t, string(readme), "| `"+m[1]+"` |", "README's environment table lacks %s", m[1])
	}
}
