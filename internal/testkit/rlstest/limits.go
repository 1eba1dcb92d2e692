package rlstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/config"
)

// Limits parses yaml as one file of limits, test.yaml, with the default
// options, and fails tb when it is not valid.
func Limits(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(yaml)}}, config.Options{})
	require.NoError(tb, err)
	return cfg
}
