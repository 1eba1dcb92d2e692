package test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The documentation's shell blocks are read by a small reader of the shell
// that users type: words with single and double quotes and backslashes,
// line continuations, comments, NAME=value prefixes, pipes, ';' and for
// loops over literal words. Everything else (variables, substitutions,
// redirections, globs, &&, background jobs) is refused with a message naming
// the command, so that a block the docs test cannot run as written fails.

// simpleCommand is one command of a pipeline: its NAME=value prefixes and its
// words.
type simpleCommand struct {
	Env  map[string]string
	Args []string
}

// shellCommand is one pipeline as documented, with where it was written.
type shellCommand struct {
	Stages []simpleCommand
	// Source is the command as written, continuation lines included.
	Source string
	// Line is the line of the block (0-based) the command starts on.
	Line int
}

// String returns the command's first line, for messages.
func (c shellCommand) String() string {
	first, _, _ := strings.Cut(c.Source, "\n")
	return strings.TrimSpace(first)
}

// errIncomplete reports text that ends inside quotes or after a backslash.
var errIncomplete = errors.New("the command is incomplete: an open quote or a trailing backslash")

type tokenKind uint8

const (
	wordToken tokenKind = iota + 1
	// sepToken is ';' or a newline; pipeToken is '|'.
	sepToken
	pipeToken
)

type shellToken struct {
	kind       tokenKind
	word       string
	start, end int
}

// lexShell splits text into words and separators.
func lexShell(text string) ([]shellToken, error) {
	var toks []shellToken
	var word strings.Builder
	inWord, start := false, 0
	emit := func(end int) {
		if inWord {
			toks = append(toks, shellToken{kind: wordToken, word: word.String(), start: start, end: end})
			word.Reset()
			inWord = false
		}
	}
	begin := func(i int) {
		if !inWord {
			inWord, start = true, i
		}
	}
	rs := []rune(text)
	// pos maps rune indexes to byte offsets, for Source.
	pos := make([]int, len(rs)+1)
	off := 0
	for i, r := range rs {
		pos[i] = off
		off += len(string(r))
	}
	pos[len(rs)] = off
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 == len(rs) {
				return nil, errIncomplete
			}
			if rs[i+1] == '\n' {
				// A continuation: as if neither character were there.
				i++
				if i+1 == len(rs) {
					return nil, errIncomplete
				}
				continue
			}
			begin(pos[i])
			i++
			word.WriteRune(rs[i])
		case r == '\'':
			begin(pos[i])
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, errIncomplete
			}
			word.WriteString(string(rs[i+1 : j]))
			i = j
		case r == '"':
			begin(pos[i])
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				switch rs[j] {
				case '$', '`':
					return nil, fmt.Errorf("%q inside double quotes: substitutions are not supported", rs[j])
				case '\\':
					if j+1 < len(rs) && strings.ContainsRune("\"\\\n", rs[j+1]) {
						j++
						if rs[j] == '\n' {
							continue
						}
					}
				}
				word.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, errIncomplete
			}
			i = j
		case r == '#' && !inWord:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			i--
		case r == ' ' || r == '\t':
			emit(pos[i])
		case r == '\n' || r == ';':
			emit(pos[i])
			toks = append(toks, shellToken{kind: sepToken, start: pos[i], end: pos[i+1]})
		case r == '|':
			emit(pos[i])
			if i+1 < len(rs) && rs[i+1] == '|' {
				return nil, errors.New("'||' is not supported")
			}
			toks = append(toks, shellToken{kind: pipeToken, start: pos[i], end: pos[i+1]})
		case strings.ContainsRune("$`&<>(){}*?[~", r) && !(r == '~' && inWord) && !(strings.ContainsRune("{}", r) && inWord):
			return nil, fmt.Errorf("%q outside quotes: variables, substitutions, redirections, globs and jobs are not supported", r)
		default:
			begin(pos[i])
			word.WriteRune(r)
		}
	}
	emit(pos[len(rs)])
	return toks, nil
}

// envAssignment matches a NAME=value word before a command.
var envAssignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// shellKeywords are the words that start compound commands this reader does
// not support (for is supported).
var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "fi": true, "while": true, "until": true, "case": true, "esac": true, "function": true, "do": true, "done": true, "select": true}

// parseShell reads a block of commands. A for loop's body is repeated once
// per word; its variable cannot be used, since variables are not supported.
func parseShell(text string) ([]shellCommand, error) {
	toks, err := lexShell(text)
	if err != nil {
		return nil, err
	}
	p := &shellParser{text: text, toks: toks}
	cmds, err := p.list("")
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.i].word)
	}
	return cmds, nil
}

type shellParser struct {
	text string
	toks []shellToken
	i    int
}

func (p *shellParser) skipSeparators() {
	for p.i < len(p.toks) && p.toks[p.i].kind == sepToken {
		p.i++
	}
}

// list reads commands until the word stop starts a command, or the end.
func (p *shellParser) list(stop string) ([]shellCommand, error) {
	var cmds []shellCommand
	for {
		p.skipSeparators()
		if p.i == len(p.toks) {
			if stop != "" {
				return nil, fmt.Errorf("missing %q", stop)
			}
			return cmds, nil
		}
		tok := p.toks[p.i]
		if tok.kind != wordToken {
			return nil, errors.New("a pipe without a command before it")
		}
		if stop != "" && tok.word == stop {
			return cmds, nil
		}
		if tok.word == "for" {
			body, err := p.forLoop()
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, body...)
			continue
		}
		if shellKeywords[tok.word] {
			return nil, fmt.Errorf("%q: only for loops are supported", tok.word)
		}
		cmd, err := p.pipeline()
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, cmd)
	}
}

// forLoop reads "for NAME in WORDS; do COMMANDS; done".
func (p *shellParser) forLoop() ([]shellCommand, error) {
	p.i++ // for
	if p.i+1 >= len(p.toks) || p.toks[p.i].kind != wordToken || p.toks[p.i+1].word != "in" {
		return nil, errors.New("want for NAME in WORDS; do …; done")
	}
	p.i += 2
	var words []string
	for p.i < len(p.toks) && p.toks[p.i].kind == wordToken {
		words = append(words, p.toks[p.i].word)
		p.i++
	}
	p.skipSeparators()
	if p.i == len(p.toks) || p.toks[p.i].word != "do" {
		return nil, errors.New("for: missing do")
	}
	p.i++
	body, err := p.list("done")
	if err != nil {
		return nil, fmt.Errorf("for: %w", err)
	}
	p.i++ // done
	var cmds []shellCommand
	for range words {
		cmds = append(cmds, body...)
	}
	return cmds, nil
}

// pipeline reads simple commands joined by '|'.
func (p *shellParser) pipeline() (shellCommand, error) {
	start := p.toks[p.i].start
	var cmd shellCommand
	for {
		sc := simpleCommand{Env: map[string]string{}}
		for p.i < len(p.toks) && p.toks[p.i].kind == wordToken {
			w := p.toks[p.i].word
			if m := envAssignment.FindStringSubmatch(w); m != nil && len(sc.Args) == 0 {
				sc.Env[m[1]] = m[2]
			} else {
				sc.Args = append(sc.Args, w)
			}
			p.i++
		}
		if len(sc.Args) == 0 {
			return cmd, errors.New("a command without a program")
		}
		cmd.Stages = append(cmd.Stages, sc)
		if p.i < len(p.toks) && p.toks[p.i].kind == pipeToken {
			p.i++
			continue
		}
		break
	}
	end := p.toks[p.i-1].end
	cmd.Source = p.text[start:end]
	cmd.Line = strings.Count(p.text[:start], "\n")
	return cmd, nil
}

// consoleCommand is a command of a console block and the output documented
// under it.
type consoleCommand struct {
	shellCommand
	Output []string
}

// parseConsole reads a console block: "$ " starts a command, which goes on
// over the next lines while it is incomplete; the other lines are the
// output of the command above them.
func parseConsole(text string) ([]consoleCommand, error) {
	lines := strings.Split(text, "\n")
	var cmds []consoleCommand
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "$ ") {
			if len(cmds) == 0 {
				return nil, fmt.Errorf("line %d: output before any \"$ \" command", i+1)
			}
			cmds[len(cmds)-1].Output = append(cmds[len(cmds)-1].Output, line)
			continue
		}
		src, first := strings.TrimPrefix(line, "$ "), i
		var parsed []shellCommand
		for {
			var err error
			parsed, err = parseShell(src)
			if !errors.Is(err, errIncomplete) || i+1 == len(lines) {
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", first+1, err)
				}
				break
			}
			i++
			src += "\n" + lines[i]
		}
		if len(parsed) != 1 {
			return nil, fmt.Errorf("line %d: want one command after \"$ \", got %d", first+1, len(parsed))
		}
		parsed[0].Line = first
		cmds = append(cmds, consoleCommand{shellCommand: parsed[0]})
	}
	for i := range cmds {
		// A blank line closes the output; it is not part of it.
		out := cmds[i].Output
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		cmds[i].Output = out
	}
	return cmds, nil
}

func TestDocsShellReader(t *testing.T) {
	cmds, err := parseShell(`# start it
RLS_BACKEND=redis RLS_REDIS_ADDRS=a:1,b:2 \
  go run ./cmd/server   # with a comment
for i in 1 2; do
  grpcurl -plaintext -d '{"domain":"edge","descriptors":[{"entries":[
      {"key":"path","value":"/login"}]}]}' \
    localhost:8081 x/Y
done
curl -s "localhost:8080/metrics" | grep 'a b'; echo x\ y`)
	require.NoError(t, err)
	require.Len(t, cmds, 5)
	assert.Equal(t, map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": "a:1,b:2"}, cmds[0].Stages[0].Env)
	assert.Equal(t, []string{"go", "run", "./cmd/server"}, cmds[0].Stages[0].Args)
	assert.Equal(t, "RLS_BACKEND=redis RLS_REDIS_ADDRS=a:1,b:2 \\\n  go run ./cmd/server", cmds[0].Source)
	assert.Equal(t, 1, cmds[0].Line)
	assert.Equal(t, []string{"grpcurl", "-plaintext", "-d", "{\"domain\":\"edge\",\"descriptors\":[{\"entries\":[\n      {\"key\":\"path\",\"value\":\"/login\"}]}]}", "localhost:8081", "x/Y"}, cmds[1].Stages[0].Args)
	assert.Equal(t, cmds[1], cmds[2], "the loop's body, twice")
	require.Len(t, cmds[3].Stages, 2)
	assert.Equal(t, []string{"curl", "-s", "localhost:8080/metrics"}, cmds[3].Stages[0].Args)
	assert.Equal(t, []string{"grep", "a b"}, cmds[3].Stages[1].Args)
	assert.Equal(t, []string{"echo", "x y"}, cmds[4].Stages[0].Args)

	for _, bad := range []string{
		"echo $HOME", "echo `date`", `echo "$x"`, "a && b", "a || b", "a > f", "a &", "ls *.go",
		"if true; then a; fi", "for i in 1 2; do a", "| a", "echo 'open",
	} {
		_, err := parseShell(bad)
		assert.Error(t, err, bad)
	}
	_, err = parseShell("echo 'open")
	assert.ErrorIs(t, err, errIncomplete)

	con, err := parseConsole("$ curl -s localhost:8080/healthcheck\nOK\n\n$ grpcurl -d '{\n}' x y\n{\n  \"status\": \"SERVING\"\n}")
	require.NoError(t, err)
	require.Len(t, con, 2)
	assert.Equal(t, []string{"OK"}, con[0].Output)
	assert.Equal(t, []string{"grpcurl", "-d", "{\n}", "x", "y"}, con[1].Stages[0].Args)
	assert.Equal(t, 3, con[1].Line)
	assert.Equal(t, []string{"{", `  "status": "SERVING"`, "}"}, con[1].Output)
	_, err = parseConsole("output first\n$ a")
	assert.Error(t, err)
}
