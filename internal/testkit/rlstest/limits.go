package rlstest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
)

// Config returns the config.Options that the tests parse their limits
// with: a limit that names no algorithm is a sliding_window_counter. They
// are the tests' own; the server's come from its settings.
func Config() config.Options {
	return config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter}
}

// Limits parses yaml as one file of limits, test.yaml, with Config's
// options, and fails tb when it is not valid.
func Limits(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse([]config.File{{Name: "test.yaml", Data: []byte(yaml)}}, Config())
	require.NoError(tb, err)
	return cfg
}
