package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The most words the pages under docs/ may hold, counted as wc -w counts
// them (code blocks and tables included): together, and one page alone.
// Measurements live in BENCHMARKS.md and benchmarks/, proofs beside the
// code they justify; the docs link to them.
const (
	docsMostWords = 15_000
	pageMostWords = 4_000
)

// TestDocsAReaderFinishes holds docs/ to a length a reader finishes.
func TestDocsAReaderFinishes(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	total := 0
	for _, p := range pages {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		n := len(strings.Fields(string(data)))
		total += n
		assert.Less(t, n, pageMostWords, "docs/%s has %d words", filepath.Base(p), n)
	}
	assert.Less(t, total, docsMostWords, "docs/ has %d words", total)
	t.Logf("docs/: %d words in %d pages", total, len(pages))
}
