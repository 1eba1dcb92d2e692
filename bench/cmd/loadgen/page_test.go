package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarker(t *testing.T) {
	m := marker("x")
	assert.Equal(t, "<!-- x:begin -->\nbody\n<!-- x:end -->\n", m.wrap("\nbody\n\n"))
	assert.Equal(t, "<!-- x:begin -->\n<!-- x:end -->\n", m.wrap(""))

	page := "# T\n\nbefore\n\n" + m.wrap("old") + "\nafter\n"
	assert.Equal(t, "old", m.kept(page))
	assert.Equal(t, "# T\n\nbefore\n\n"+m.wrap("new")+"\nafter\n", m.replace(page, "new"), "only the block changes")
	assert.Equal(t, "# T\n\n"+m.wrap("new"), m.replace("# T\n", "new"), "a page without the block gets it at the end")
	assert.Equal(t, "", m.kept("<!-- x:begin -->\nno end"))
	assert.Equal(t, "", marker("y").kept(page))
}

func TestWriteOutputs(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeOutputs(dir, marker("a"), "## A\n\nfigures\n", outputFile{"benchmarks/a.md", []byte("detail\n")}))
	page, err := os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.Equal(t, pageTitle+marker("a").wrap("## A\n\nfigures"), string(page), "a new page has a title")
	detail, err := os.ReadFile(filepath.Join(dir, "benchmarks", "a.md"))
	require.NoError(t, err)
	assert.Equal(t, "detail\n", string(detail))

	require.NoError(t, writeOutputs(dir, marker("b"), "## B", outputFile{"benchmarks/b.md", nil}))
	require.NoError(t, writeOutputs(dir, marker("a"), "## A again"))
	page, err = os.ReadFile(filepath.Join(dir, pagePath))
	require.NoError(t, err)
	assert.Equal(t, pageTitle+marker("a").wrap("## A again")+"\n"+marker("b").wrap("## B"), string(page))
}

// TestReportRendersEveryJSON: `loadgen report` renders the page's four
// blocks and the four detail pages again from the JSON the generators keep,
// byte for byte, and leaves what is written by hand.
func TestReportRendersEveryJSON(t *testing.T) {
	dir := t.TempDir()
	frame := "# Benchmarks\n\nWritten by hand.\n\n" + benchMarker.wrap("") + "\n" + rediscostMarker.wrap("") + "\n" +
		overloadMarker.wrap("") + "\n" + rlqsMarker.wrap("") + "\n## Reproduce\n\nBy hand too.\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, pagePath), []byte(frame), 0o644))
	require.NoError(t, writeReportFiles(dir, sampleReport(), io.Discard))
	require.NoError(t, writeOverloadFiles(dir, sampleOverloadReport(), io.Discard))
	_, err := writeRedisCostFiles(dir, sampleRedisCostReport(), io.Discard)
	require.NoError(t, err)
	_, err = writeRLQSFiles(dir, sampleRLQSReport(), io.Discard)
	require.NoError(t, err)

	files := []string{pagePath, reportDetailPath, reportSVGPath, overloadDetailPath, rediscostDetailPath, rlqsDetailPath}
	want := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		want[f] = string(b)
	}
	assert.True(t, strings.HasPrefix(want[pagePath], "# Benchmarks\n\nWritten by hand.\n\n"+benchMarker.begin()+"\n## Throughput"))
	assert.True(t, strings.HasSuffix(want[pagePath], rlqsMarker.end()+"\n\n## Reproduce\n\nBy hand too.\n"))
	for _, m := range []marker{benchMarker, rediscostMarker, overloadMarker, rlqsMarker} {
		assert.Equal(t, 1, strings.Count(want[pagePath], m.begin()), m)
		assert.NotEmpty(t, m.kept(want[pagePath]), m)
	}

	// Empty the blocks and remove the detail pages: report writes them all
	// again.
	require.NoError(t, os.WriteFile(filepath.Join(dir, pagePath), []byte(frame), 0o644))
	for _, f := range files[1:] {
		require.NoError(t, os.Remove(filepath.Join(dir, f)))
	}
	require.NoError(t, reportCommand([]string{"-out", dir}, io.Discard))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, want[f], string(b), f)
	}
}

func TestReportNeedsJSON(t *testing.T) {
	assert.ErrorContains(t, reportCommand([]string{"-out", t.TempDir()}, io.Discard), "no JSON under")
	assert.ErrorContains(t, reportCommand([]string{"-out", t.TempDir(), "-in", "nowhere.json"}, io.Discard), "nowhere.json")
}
