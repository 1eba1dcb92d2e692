package test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratewarden/ratewarden/internal/config"
)

// TestDocs reads README.md and every file under docs/ as a user would, top to
// bottom, and checks every fenced block:
//
//   - sh, bash: every command runs, as written, against a real server the
//     test starts (see docSession.run), or is one of docsCovered, which this
//     machine cannot run and which named tests check instead. Any other
//     command fails the test, naming it.
//   - console: the same, and what is shown under each "$ " command is what
//     it prints (see matchOutput).
//   - json: the answer of the command block just above it, in shape and
//     values (see jsonMismatches).
//   - yaml: a limits file the server loads, or the environment of a
//     Compose service or Kubernetes container, which the server accepts.
//   - text: one of the outputs textCheckers reproduces: traces of the
//     algorithms, matches of descriptors, configuration errors, /rlconfig's
//     header and Redis keys.
//
// A block in any other language, or without one, fails: nothing in the docs
// escapes the test. What the prose says about a block's outputs, beyond the
// JSON shown, is checked where proseClaims lists it.
func TestDocs(t *testing.T) {
	used, claims := map[int]bool{}, map[int]bool{}
	docs, ran := userDocs(t), 0
	for _, doc := range docs {
		t.Run(strings.ReplaceAll(doc.Path, "/", "_"), func(t *testing.T) {
			ran++
			s := &docSession{t: t, doc: doc, lastBlock: -1, coveredUsed: used, claimsChecked: claims}
			defer s.stopServer()
			for i := range doc.Blocks {
				s.check(i)
			}
		})
	}
	if ran < len(docs) {
		return // -run chose some documents only
	}
	for i, c := range docsCovered {
		assert.True(t, used[i], "docsCovered[%d] (%s) covers no documented command: remove it", i, strings.Join(c.prefix, " "))
	}
	for i, c := range proseClaims {
		assert.True(t, claims[i], "proseClaims[%d] finds no %s block in %s's section %q", i, c.program, c.doc, c.section)
	}
}

// docSession is the state of reading one document: the server its last
// server command started, and the output of its last command.
type docSession struct {
	t   *testing.T
	doc markdownDoc
	srv *docServer
	// lastOutput is the output of the last command of block lastBlock.
	lastOutput string
	lastBlock  int
	// limits is the last limits file of the document, which match traces
	// are checked against.
	limits *config.Config
	// coveredUsed records which docsCovered entries matched a command, and
	// claimsChecked which proseClaims were checked.
	coveredUsed, claimsChecked map[int]bool
}

// proseClaim is what the prose of a document says about the outputs of a
// command block, beyond the JSON answer shown under it.
type proseClaim struct {
	// doc, section and program find the blocks: those of that section whose
	// first command runs program.
	doc, section, program string
	says                  string
	check                 func(outputs []string) error
}

// proseClaims are checked on the outputs of the blocks they describe; each
// must find its block.
var proseClaims = []proseClaim{{
	doc: "README.md", section: "Try it", program: "grpcurl",
	says:  "that the first five answers are OK with limitRemaining counting down from 4, and the sixth OVER_LIMIT with a retry-after",
	check: checkTryItLoop,
}}

func checkTryItLoop(outputs []string) error {
	if len(outputs) != 6 {
		return fmt.Errorf("%d answers, not 6", len(outputs))
	}
	for i, out := range outputs {
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
			return fmt.Errorf("answer %d: %w", i+1, err)
		}
		st := resp.GetStatuses()
		if len(st) != 1 {
			return fmt.Errorf("answer %d has %d statuses", i+1, len(st))
		}
		if i < 5 {
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st[0].GetLimitRemaining() != uint32(4-i) {
				return fmt.Errorf("answer %d is %s with limitRemaining %d", i+1, resp.GetOverallCode(), st[0].GetLimitRemaining())
			}
			continue
		}
		headers := resp.GetResponseHeadersToAdd()
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || len(headers) != 1 || headers[0].GetKey() != "retry-after" {
			return fmt.Errorf("answer 6 is %s with headers %v", resp.GetOverallCode(), headers)
		}
	}
	return nil
}

// check checks block i of the document.
func (s *docSession) check(i int) {
	b := s.doc.Blocks[i]
	switch b.Lang {
	case "sh", "bash":
		cmds, err := parseShell(b.Text)
		if err != nil {
			s.t.Errorf("%s: %v", b, err)
			return
		}
		var outputs []string
		for _, c := range cmds {
			out, err := s.run(c)
			if err != nil {
				s.t.Errorf("%s: command %q: %v", b, c.String(), err)
				continue
			}
			s.lastOutput, s.lastBlock = out, i
			outputs = append(outputs, out)
		}
		for j, claim := range proseClaims {
			if claim.doc == b.Doc && claim.section == b.Section && len(cmds) > 0 && cmds[0].Stages[0].Args[0] == claim.program {
				s.claimsChecked[j] = true
				if err := claim.check(outputs); err != nil {
					s.t.Errorf("%s: the text around it says %s: %v", b, claim.says, err)
				}
			}
		}
	case "console":
		cmds, err := parseConsole(b.Text)
		if err != nil {
			s.t.Errorf("%s: %v", b, err)
			return
		}
		for _, c := range cmds {
			out, err := s.run(c.shellCommand)
			if err != nil && out == "" {
				s.t.Errorf("%s: command %q: %v", b, c.String(), err)
				continue
			}
			if problem := matchOutput(c.Output, out); problem != "" {
				s.t.Errorf("%s: command %q: the documented output does not match: %s\nit printed:\n%s", b, c.String(), problem, out)
			}
			s.lastOutput, s.lastBlock = out, i
		}
	case "json":
		if i == 0 || s.lastBlock != i-1 || !slices.Contains([]string{"sh", "bash"}, s.doc.Blocks[i-1].Lang) {
			s.t.Errorf("%s: a JSON answer must follow the sh block of the command that gives it", b)
			return
		}
		if problems := jsonAnswerMismatches(b.Text, s.lastOutput); len(problems) > 0 {
			s.t.Errorf("%s: not what the command above it answers:\n  %s\nit answered:\n%s", b, strings.Join(problems, "\n  "), s.lastOutput)
		}
	case "yaml":
		s.checkYAML(b)
	case "text":
		s.checkText(b)
	default:
		s.t.Errorf("%s: a block must say its language: sh, bash or console for commands, json, yaml or text", b)
	}
}

// TestDocsReadmeOpensWithTheTwoCommands keeps the front door as it is: what
// ratewarden is, then how to start it and how to test it, before any
// section.
func TestDocsReadmeOpensWithTheTwoCommands(t *testing.T) {
	readme := readMarkdown(t, "README.md")
	require.GreaterOrEqual(t, len(readme.Blocks), 2)
	// Both under the title, before any section.
	assert.Equal(t, fencedBlock{Doc: "README.md", Line: readme.Blocks[0].Line, Lang: "sh", Text: "go run ./cmd/server", Section: "ratewarden"}, readme.Blocks[0])
	assert.Equal(t, fencedBlock{Doc: "README.md", Line: readme.Blocks[1].Line, Lang: "sh", Text: "scripts/test", Section: "ratewarden"}, readme.Blocks[1])
}

// TestDocsLinks checks that every relative link of the docs points to a file
// of the repository, and every #anchor to a heading of its document, and
// that the README links to every document under docs/.
func TestDocsLinks(t *testing.T) {
	docs := userDocs(t)
	byPath := map[string]markdownDoc{}
	for _, d := range docs {
		byPath[d.Path] = d
	}
	readmeLinks := map[string]bool{}
	for _, d := range docs {
		for _, l := range d.Links {
			target := l.Target
			if strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			where := fmt.Sprintf("%s:%d: link %q", d.Path, l.Line, target)
			if path == "" {
				assert.True(t, d.Anchors[anchor], "%s: no heading of %s has that anchor", where, d.Path)
				continue
			}
			full := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(d.Path), path)))
			if d.Path == "README.md" {
				readmeLinks[full] = true
			}
			if _, err := os.Stat(filepath.Join(repoRoot, full)); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if anchor == "" {
				continue
			}
			linked, ok := byPath[full]
			if !ok {
				t.Errorf("%s: an anchor into %s, which is not a document the test reads", where, full)
				continue
			}
			assert.True(t, linked.Anchors[anchor], "%s: no heading of %s has that anchor", where, full)
		}
	}
	for _, d := range docs {
		if d.Path != "README.md" {
			assert.True(t, readmeLinks[d.Path], "README.md links to no part of %s", d.Path)
		}
	}
}
