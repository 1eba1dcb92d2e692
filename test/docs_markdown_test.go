package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = ".."

// markdownDoc is one documentation file: its fenced blocks, the anchors of its
// headings and its links.
type markdownDoc struct {
	// Path is the file's path from the repository root, such as
	// "docs/redis.md".
	Path    string
	Blocks  []fencedBlock
	Anchors map[string]bool
	Links   []markdownLink
	// Lines is the number of lines of the file.
	Lines int
}

// fencedBlock is one ``` block of a markdown file.
type fencedBlock struct {
	Doc string
	// Line is the line of the opening fence, 1-based.
	Line int
	// Lang is the info string: sh, console, json, yaml, text…
	Lang string
	Text string
	// Section is the heading the block is under ("" before the first).
	Section string
}

// String names the block for messages: "docs/redis.md:42 (```sh)".
func (b fencedBlock) String() string {
	return b.Doc + ":" + strconv.Itoa(b.Line) + " (```" + b.Lang + ")"
}

// markdownLink is one inline link [text](target).
type markdownLink struct {
	Line   int
	Target string
}

var (
	fenceLine   = regexp.MustCompile("^([ \\t]*)(```+)\\s*([A-Za-z0-9_-]*)\\s*$")
	headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// inlineLink matches [text](target), where text holds no brackets; an
	// image ![alt](src) matches too.
	inlineLink = regexp.MustCompile(`\[[^\[\]]*\]\(([^()\s]+)\)`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// readMarkdown reads one markdown file of the repository.
func readMarkdown(t *testing.T, path string) markdownDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err)
	return parseMarkdown(t, path, string(data))
}

// parseMarkdown splits text into fenced blocks, heading anchors and links. A
// fence that is never closed fails the test.
func parseMarkdown(t *testing.T, path, text string) markdownDoc {
	t.Helper()
	doc := markdownDoc{Path: path, Anchors: map[string]bool{}}
	lines := strings.Split(text, "\n")
	doc.Lines = len(lines)
	seen := map[string]int{}
	var open *fencedBlock
	var fence, indent string
	var body []string
	section := ""
	for i, line := range lines {
		if open != nil {
			if strings.TrimSpace(line) == fence {
				open.Text = strings.Join(body, "\n")
				doc.Blocks = append(doc.Blocks, *open)
				open, body = nil, nil
				continue
			}
			// A block in a list item is indented like its fence.
			body = append(body, strings.TrimPrefix(line, indent))
			continue
		}
		if m := fenceLine.FindStringSubmatch(line); m != nil {
			open = &fencedBlock{Doc: path, Line: i + 1, Lang: m[3], Section: section}
			indent, fence = m[1], m[2]
			continue
		}
		if m := headingLine.FindStringSubmatch(line); m != nil {
			section = m[2]
			slug := headingSlug(m[2])
			if n := seen[slug]; n > 0 {
				doc.Anchors[slug+"-"+strconv.Itoa(n)] = true
			} else {
				doc.Anchors[slug] = true
			}
			seen[slug]++
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			doc.Links = append(doc.Links, markdownLink{Line: i + 1, Target: m[1]})
		}
	}
	require.Nil(t, open, "%s: a fence opened at line %d is never closed", path, lineOf(open))
	return doc
}

func lineOf(b *fencedBlock) int {
	if b == nil {
		return 0
	}
	return b.Line
}

// headingSlug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, and only letters, digits, '-' and '_' kept.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// userDocs returns the documentation the docs test reads: README.md,
// CONTRIBUTING.md and every markdown file under docs/.
func userDocs(t *testing.T) []markdownDoc {
	t.Helper()
	paths := []string{"README.md", "CONTRIBUTING.md"}
	entries, err := os.ReadDir(filepath.Join(repoRoot, "docs"))
	require.NoError(t, err)
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
			paths = append(paths, "docs/"+e.Name())
		}
	}
	docs := make([]markdownDoc, 0, len(paths))
	for _, p := range paths {
		docs = append(docs, readMarkdown(t, p))
	}
	return docs
}

func TestDocsMarkdownParsing(t *testing.T) {
	doc := parseMarkdown(t, "x.md", strings.Join([]string{
		"# Failure modes",
		"See [the table](#failure-modes) and [Redis](docs/redis.md#keys), not `[code](nowhere.md)`.",
		"```sh",
		"# a comment, not a heading",
		"go run ./cmd/server",
		"```",
		"## `RLS_X` and the Y, again!",
		"## Failure modes",
		"```",
		"plain",
		"```",
		"1. In a list:",
		"   ```sh",
		"   docker build .",
		"   ```",
	}, "\n"))
	assert.Equal(t, map[string]bool{"failure-modes": true, "rls_x-and-the-y-again": true, "failure-modes-1": true}, doc.Anchors)
	assert.Equal(t, []markdownLink{{Line: 2, Target: "#failure-modes"}, {Line: 2, Target: "docs/redis.md#keys"}}, doc.Links)
	require.Len(t, doc.Blocks, 3)
	assert.Equal(t, fencedBlock{Doc: "x.md", Line: 3, Lang: "sh", Text: "# a comment, not a heading\ngo run ./cmd/server", Section: "Failure modes"}, doc.Blocks[0])
	assert.Equal(t, "", doc.Blocks[1].Lang)
	assert.Equal(t, "x.md:9 (```)", doc.Blocks[1].String())
	assert.Equal(t, fencedBlock{Doc: "x.md", Line: 13, Lang: "sh", Text: "docker build .", Section: "Failure modes"}, doc.Blocks[2])
}
