package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docScript returns the testscript that reads doc as a user does, top to
// bottom: for each fenced block, a comment naming it and the commands of
// docsCmds that check it, with its text as a file of the archive, and the
// block each file comes from. A block in a language no command checks is an
// error.
func docScript(doc markdownDoc) (*txtar.Archive, map[string]fencedBlock, error) {
	a := &txtar.Archive{}
	blocks := map[string]fencedBlock{}
	var script strings.Builder
	var errs []error
	add := func(b fencedBlock, name, text string) {
		blocks[name] = b
		a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(text + "\n")})
	}
	for _, b := range doc.Blocks {
		fmt.Fprintf(&script, "# %s\n", b)
		name := "L" + strconv.Itoa(b.Line)
		switch b.Lang {
		case "sh", "bash":
			add(b, name+".sh", b.Text)
			fmt.Fprintf(&script, "sh %s.sh\n", name)
		case "console":
			cmds, err := consoleCommands(b.Text)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", b, err))
			}
			for i, c := range cmds {
				file := name + "." + strconv.Itoa(i+1)
				add(b, file+".sh", c.command)
				add(b, file+".out", strings.Join(c.output, "\n"))
				fmt.Fprintf(&script, "sh %s.sh\noutput %[1]s.out\n", file)
			}
		case "json", "yaml", "text":
			add(b, name+"."+b.Lang, b.Text)
			fmt.Fprintf(&script, "%s %s.%[1]s\n", b.Lang, name)
		default:
			errs = append(errs, fmt.Errorf("%s: a block must say its language: sh, bash or console for commands, json, yaml or text", b))
		}
	}
	a.Comment = []byte(script.String())
	return a, blocks, errors.Join(errs...)
}

// consoleCommand is a command of a console block and the output shown under
// it.
type consoleCommand struct {
	command string
	output  []string
}

// consoleCommands splits a console block into its commands: a line "$ "
// starts one, which goes on over the next lines while a line ends with a
// backslash; the lines after it, up to the next "$ " line, are its output,
// without the blank lines that end it.
func consoleCommands(text string) ([]consoleCommand, error) {
	var cmds []consoleCommand
	continued := false
	for i, line := range strings.Split(text, "\n") {
		switch command, ok := strings.CutPrefix(line, "$ "); {
		case continued:
			cmds[len(cmds)-1].command += "\n" + line
		case ok:
			cmds = append(cmds, consoleCommand{command: command})
		case len(cmds) == 0:
			return nil, fmt.Errorf("line %d: output before any \"$ \" command", i+1)
		default:
			cmds[len(cmds)-1].output = append(cmds[len(cmds)-1].output, line)
		}
		continued = strings.HasSuffix(line, "\\") && len(cmds[len(cmds)-1].output) == 0
	}
	for i := range cmds {
		out := cmds[i].output
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		cmds[i].output = out
	}
	return cmds, nil
}

// docsStandIn is the program, registered with testscript.Main, that stands
// in for the documented commands the test does not run as written (those of
// standInPrograms): it appends each to the file $DOCS_CALLS, and the test
// then runs it its own way or checks what covers it (docSession.runCall).
// Only `go run ./cmd/server -h` and `go run ./cmd/server check …`, whose
// output the docs show, it runs: the server binary TestMain built, with
// those arguments, in the script's work directory (where config/ is the
// repository's), exiting as it exits, as go run would.
//
// The documented names (go, docker, scripts/test, …) are small scripts in
// the script's work directory that call it (installStandIns), not
// testscript.Main commands of their own: those are on the PATH of the
// whole test binary, where a go or a redis-server that only records would
// replace the real ones for every test, TestMain's go build and the Redis
// tests included.
func docsStandIn() {
	args := os.Args[1:]
	server := []string{"go", "run", "./cmd/server"}
	if slices.Equal(args, append(server, "-h")) || len(args) > len(server) && slices.Equal(args[:len(server)+1], append(server, "check")) {
		cmd := exec.Command(os.Getenv("DOCS_SERVER_BINARY"), args[len(server):]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		var exit *exec.ExitError
		if err := cmd.Run(); errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		} else {
			exitOn(err)
		}
		return
	}
	data, err := json.Marshal(docCall{Args: args, Env: os.Environ()})
	exitOn(err)
	f, err := os.OpenFile(os.Getenv("DOCS_CALLS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	exitOn(err)
	_, err = f.Write(append(data, '\n'))
	exitOn(errors.Join(err, f.Close()))
}

// docsStandInName is docsStandIn's name in testscript.Main.
const docsStandInName = "ratewarden-docs-stand-in"

// exitOn ends docsStandIn when err is not nil, saying why.
func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, docsStandInName+":", err)
		os.Exit(1)
	}
}

// standInPrograms returns the programs docsStandIn stands in for: go (whose
// server the test starts, and whose tests the suite runs), redis-server
// (started on a port of its own), and the first word of each docsCovered
// command.
func standInPrograms() []string {
	programs := []string{"go", "redis-server"}
	for _, c := range docsCovered {
		if !slices.Contains(programs, c.prefix[0]) {
			programs = append(programs, c.prefix[0])
		}
	}
	return programs
}

// installStandIns writes, into the work directory of a script, the script
// of each of standInPrograms that calls docsStandIn: in bin/, put first on
// PATH, or where a relative name such as scripts/test finds it.
func installStandIns(env *testscript.Env) error {
	bin := filepath.Join(env.WorkDir, "bin")
	for _, p := range standInPrograms() {
		path := filepath.Join(bin, p)
		if strings.Contains(p, "/") {
			path = filepath.Join(env.WorkDir, p)
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s %s \"$@\"\n", docsStandInName, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			return err
		}
	}
	env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
	// The documents run the check command on config/ as a user does in
	// the repository.
	config, err := filepath.Abs(filepath.Join(repoRoot, "config"))
	if err != nil {
		return err
	}
	if err := os.Symlink(config, filepath.Join(env.WorkDir, "config")); err != nil {
		return err
	}
	env.Setenv("DOCS_CALLS", filepath.Join(env.WorkDir, ".calls"))
	env.Setenv("DOCS_SERVER_BINARY", serverBinary)
	return nil
}

// docCall is a command docsStandIn recorded: its words and its environment.
type docCall struct {
	Args []string
	Env  []string
}

// String returns the command's words, for messages.
func (c docCall) String() string { return strings.Join(c.Args, " ") }

// shellVariables are the variables bash sets for the commands it runs;
// the documents do not.
var shellVariables = []string{"PWD", "OLDPWD", "SHLVL", "_"}

// docEnv returns the variables the document sets on the command: those
// that are not the script's, nor bash's.
func (c docCall) docEnv(ts *testscript.TestScript) map[string]string {
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		if ts.Getenv(k) != v && !slices.Contains(shellVariables, k) {
			env[k] = v
		}
	}
	return env
}

// takeCalls returns the commands docsStandIn recorded since the last call,
// and forgets them.
func takeCalls(ts *testscript.TestScript) ([]docCall, error) {
	path := ts.Getenv("DOCS_CALLS")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var calls []docCall
	for line := range strings.Lines(string(data)) {
		var c docCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, os.Remove(path)
}

func TestDocsScript(t *testing.T) {
	doc := parseMarkdown(t, "x.md", strings.Join([]string{
		"```sh",
		"go run ./cmd/server",
		"```",
		"```console",
		"$ curl -s localhost:8080/healthcheck",
		"OK",
		"",
		"$ grpcurl -d '{}' \\",
		"  localhost:8081 x/Y",
		"{",
		"}",
		"```",
		"```json",
		"{}",
		"```",
		"```",
		"plain",
		"```",
	}, "\n"))
	a, blocks, err := docScript(doc)
	assert.EqualError(t, err, "x.md:16 (```): a block must say its language: sh, bash or console for commands, json, yaml or text")
	assert.Equal(t, strings.Join([]string{
		"# x.md:1 (```sh)", "sh L1.sh",
		"# x.md:4 (```console)", "sh L4.1.sh", "output L4.1.out", "sh L4.2.sh", "output L4.2.out",
		"# x.md:13 (```json)", "json L13.json",
		"# x.md:16 (```)", "",
	}, "\n"), string(a.Comment))
	files := map[string]string{}
	for _, f := range a.Files {
		files[f.Name] = string(f.Data)
	}
	assert.Equal(t, 4, blocks["L4.2.out"].Line)
	assert.Equal(t, "json", blocks["L13.json"].Lang)
	assert.Equal(t, map[string]string{
		"L1.sh":    "go run ./cmd/server\n",
		"L4.1.sh":  "curl -s localhost:8080/healthcheck\n",
		"L4.1.out": "OK\n",
		"L4.2.sh":  "grpcurl -d '{}' \\\n  localhost:8081 x/Y\n",
		"L4.2.out": "{\n}\n",
		"L13.json": "{}\n",
	}, files)

	_, err = consoleCommands("output first\n$ a")
	require.Error(t, err)
}
