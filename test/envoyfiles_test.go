package test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// envoyFile returns the path of a file of envoy/, the configuration files
// these tests check.
func envoyFile(name string) string {
	return filepath.Join(repoRoot, "envoy", name)
}

// frontProxy loads envoy.yaml and returns its one HTTP listener.
func frontProxy(t *testing.T) envoymodel.HTTPListener {
	t.Helper()
	b, err := envoymodel.LoadBootstrap(envoyFile("envoy.yaml"))
	require.NoError(t, err)
	ls, err := envoymodel.HTTPListeners(b)
	require.NoError(t, err)
	require.Len(t, ls, 1, "envoy.yaml has one HTTP listener")
	return ls[0]
}

// exampleLimits loads the example limits in config/.
func exampleLimits(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.LoadContext(context.Background(), filepath.Join(repoRoot, "config"), config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)
	return c
}

// yamlDocuments decodes every document of a YAML file.
func yamlDocuments(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return decodeYAMLDocuments(t, path, data)
}

// decodeYAMLDocuments decodes every document of data, which path names in
// errors, leaving out empty documents.
func decodeYAMLDocuments(t *testing.T, path string, data []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s: document %d", path, len(docs)+1)
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

// at walks a decoded YAML value along keys (map keys, or list indexes as
// ints) and fails the test when the path is missing.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v: not a mapping", path[:i])
			v, ok = m[k]
			require.True(t, ok, "%v: no %q", path[:i], k)
		case int:
			l, ok := v.([]any)
			require.True(t, ok, "%v: not a list", path[:i])
			require.Less(t, k, len(l), "%v: no item %d", path[:i], k)
			v = l[k]
		}
	}
	return v
}
