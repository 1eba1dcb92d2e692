package test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocsQuoteTheMeasuredFootprint: the memory figures that README.md and
// docs/sizing.md quote are docs/redis.md's, which internal/redisx's
// TestFootprint and TestLogFootprintAsDocumented hold to a real Redis: the
// bytes per active limit of the algorithms but the log, the bytes per hit of
// a log (the table's least and most, and the two the page plans with), and
// the sums sizing.md works out from them.
func TestDocsQuoteTheMeasuredFootprint(t *testing.T) {
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join(repoRoot, path))
		require.NoError(t, err)
		return strings.Join(strings.Fields(string(data)), " ")
	}
	redis, readme, sizing := read("docs/redis.md"), read("README.md"), read("docs/sizing.md")
	number := func(s string) int64 {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, " ", ""), 10, 64)
		require.NoError(t, err)
		return n
	}

	m := regexp.MustCompile(`keeps (\d+) to (\d+) bytes per active limit`).FindStringSubmatch(redis)
	require.NotNil(t, m, "docs/redis.md quotes no bytes per active limit")
	least, most := m[1], m[2]

	// The per-hit column of the log's table, and the plan under it.
	var perHit []int64
	for _, row := range regexp.MustCompile(`\| ([\d ]+) \| ([\d ]+)(?: \([^)]*\))? \| (listpack|skiplist) \| ([\d ]+) \| (\d+) \|`).FindAllStringSubmatch(redis, -1) {
		perHit = append(perHit, number(row[5]))
	}
	require.NotEmpty(t, perHit, "docs/redis.md has no table of a log's bytes")
	plan := regexp.MustCompile(`Plan (\d+) bytes per hit up to (\d+) hits, (\d+) past them`).FindStringSubmatch(redis)
	require.NotNil(t, plan, "docs/redis.md gives no plan per hit")

	for _, want := range []string{
		fmt.Sprintf("the other algorithms keep %s to %s bytes per limit", least, most),
		fmt.Sprintf("about %d to %d bytes each", slices.Min(perHit), slices.Max(perHit)),
	} {
		assert.Contains(t, readme, want, "README.md")
	}
	for _, want := range []string{
		fmt.Sprintf("keeps %s to %s bytes per active limit", least, most),
		fmt.Sprintf("50 000 tenants × %s bytes = %.1f MB", most, 50_000*float64(number(most))/1e6),
		fmt.Sprintf("about %s bytes each up to %s entries and %s beyond", plan[1], plan[2], plan[3]),
		fmt.Sprintf("50 000 × 1 000 × %s bytes = %.0f GB", plan[3], 50_000*1_000*float64(number(plan[3]))/1e9),
	} {
		assert.Contains(t, sizing, want, "docs/sizing.md")
	}
}
