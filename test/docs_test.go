package test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestDocs reads README.md, CONTRIBUTING.md and every file under docs/ as a
// user would, top to bottom, and checks every fenced block. Each document becomes a testscript
// (docScript) whose commands, docsCmds, check its blocks in order:
//
//   - sh, bash: bash runs the block as it is written, and the programs it
//     calls are the real ones (grpcurl, curl, grep…), against a real server
//     the test starts; the only change is the server's addresses (see
//     docAddrs). The commands a user runs that the test runs its own way or
//     cannot run here (the server, redis-server, go test, Docker,
//     Kubernetes) go to a stand-in, docsStandIn, and then to
//     docSession.runCall, which fails any it does not know. A command that
//     fails fails the test.
//   - console: each "$ " command runs the same way, and what is shown under
//     it is what it prints (see matchOutput).
//   - json: the last JSON answer of the sh block just above it, in shape
//     and values (see jsonMismatches).
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
	path := pathWithGoBin(t)
	for program, install := range map[string]string{
		"bash":    "apt-get install bash",
		"curl":    "apt-get install curl",
		"grpcurl": "go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4",
	} {
		redistest.NeedProgramIn(t, path, program, install)
	}
	dir := t.TempDir()
	used, claims := map[int]bool{}, map[int]bool{}
	docs, ran := userDocs(t), 0
	for _, doc := range docs {
		a, blocks, err := docScript(doc)
		assert.NoError(t, err)
		file := filepath.Join(dir, strings.ReplaceAll(doc.Path, "/", "_")+".txtar")
		require.NoError(t, os.WriteFile(file, txtar.Format(a), 0o644))
		p := testscript.Params{
			Files:           []string{file},
			Cmds:            docsCmds,
			ContinueOnError: true,
			Setup: func(env *testscript.Env) error {
				ran++
				env.Setenv("PATH", path)
				env.Values[docSessionKey{}] = &docSession{t: env.T().(docsT).T, doc: doc, blocks: blocks, coveredUsed: used, claimsChecked: claims}
				return installStandIns(env)
			},
		}
		p.Deadline, _ = t.Deadline()
		testscript.RunT(docsT{t}, p)
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

// pathWithGoBin returns PATH with the directory go install installs into
// at its end: the PATH of the scripts, where grpcurl is when installed as
// the README says.
func pathWithGoBin(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	require.NoError(t, err)
	gobin, gopath, _ := strings.Cut(string(out), "\n")
	if gobin == "" {
		gopath, _, _ = strings.Cut(strings.TrimSpace(gopath), string(os.PathListSeparator))
		gobin = filepath.Join(gopath, "bin")
	}
	return os.Getenv("PATH") + string(os.PathListSeparator) + gobin
}

// docsT runs the documents' scripts one after the other, where
// testscript.Run runs them in parallel: each starts servers and Redis of
// its own.
type docsT struct{ *testing.T }

func (t docsT) Parallel()     {}
func (t docsT) Verbose() bool { return testing.Verbose() }
func (t docsT) Run(name string, f func(testscript.T)) {
	t.T.Run(name, func(t *testing.T) { f(docsT{t}) })
}

// docsCmds are the commands of the documents' scripts. Each takes a file
// of the script's archive, which holds a block or a part of one, and fails
// the script naming the block.
var docsCmds = map[string]func(*testscript.TestScript, bool, []string){
	"sh":     docCommand((*docSession).sh),
	"output": docCommand((*docSession).output),
	"json":   docCommand((*docSession).json),
	"yaml":   docCommand((*docSession).checkYAML),
	"text":   docCommand((*docSession).checkText),
}

// docSessionKey finds a script's docSession among its values.
type docSessionKey struct{}

// docCommand makes a command of docsCmds from check, which checks the
// block of a file of the script, or the part of it the file holds.
func docCommand(check func(s *docSession, ts *testscript.TestScript, file string) error) func(*testscript.TestScript, bool, []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: COMMAND FILE")
		}
		s := ts.Value(docSessionKey{}).(*docSession)
		if err := check(s, ts, args[0]); err != nil {
			ts.Fatalf("%s: %v", s.blocks[args[0]], err)
		}
	}
}

// docSession is the state of reading one document: the server its last
// server command started, and the output of its last command.
type docSession struct {
	t   *testing.T
	doc markdownDoc
	// blocks holds the block of each file of the script.
	blocks map[string]fencedBlock
	srv    *docServer
	// gateway is what docs/token-budgets-gateway.md set up, once one of
	// its port-forwards reached it.
	gateway *llmGateway
	// lastOutput is what the last command, of block lastBlock, printed.
	lastOutput, lastCommand string
	lastBlock               fencedBlock
	// limits is the last limits file of the document, which match traces
	// are checked against.
	limits *config.Config
	// coveredUsed records which docsCovered entries matched a command, and
	// claimsChecked which proseClaims were checked.
	coveredUsed, claimsChecked map[int]bool
}

// sh runs the commands of file with bash, stopping at the first that
// fails, after mapping the documented addresses of the server to the
// server the test started (docAddrs). Then it runs or checks the commands
// the stand-in recorded, and what the prose says about the block's outputs.
func (s *docSession) sh(ts *testscript.TestScript, file string) error {
	b := s.blocks[file]
	written := ts.ReadFile(file)
	s.lastOutput, s.lastBlock = "", fencedBlock{}
	s.lastCommand, _, _ = strings.Cut(written, "\n")
	text, err := s.docAddrs(written)
	if err != nil {
		return err
	}
	if err := os.WriteFile(ts.MkAbs(file), []byte(text), 0o644); err != nil {
		return err
	}
	var claims []proseClaim
	for i, c := range proseClaims {
		if c.doc == b.Doc && c.section == b.Section && b.Lang != "console" && strings.Contains(b.Text, c.program) {
			s.claimsChecked[i] = true
			claims = append(claims, c)
		}
	}
	ran := ts.Exec("bash", "-e", "-o", "pipefail", file)
	calls, err := takeCalls(ts)
	if err := errors.Join(ran, err); err != nil {
		return fmt.Errorf("bash: %w", err)
	}
	s.lastOutput, s.lastBlock = ts.ReadFile("stdout"), b
	var errs []error
	for _, c := range calls {
		env := c.docEnv(ts)
		if err := s.runCall(c, env); err != nil {
			errs = append(errs, fmt.Errorf("command %q (variables %v): %w", c, env, err))
		}
	}
	for _, c := range claims {
		if err := c.check(jsonValues(s.lastOutput)); err != nil {
			errs = append(errs, fmt.Errorf("the text around it says %s: %w", c.says, err))
		}
	}
	return errors.Join(errs...)
}

// output compares the output shown under a console command, file, with
// what the command printed, as a terminal shows it: without the carriage
// returns of curl -i.
func (s *docSession) output(ts *testscript.TestScript, file string) error {
	shown := strings.Split(strings.TrimSuffix(ts.ReadFile(file), "\n"), "\n")
	if shown[0] == "" && len(shown) == 1 {
		shown = nil
	}
	printed := strings.ReplaceAll(s.lastOutput, "\r\n", "\n")
	if problem := matchOutput(shown, printed); problem != "" {
		return fmt.Errorf("$ %s: the documented output does not match: %s\nit printed:\n%s", s.lastCommand, problem, printed)
	}
	return nil
}

// json compares a JSON block with the last JSON answer of the sh block
// just above it.
func (s *docSession) json(ts *testscript.TestScript, file string) error {
	b := s.blocks[file]
	i := slices.Index(s.doc.Blocks, b)
	if i == 0 || s.lastBlock != s.doc.Blocks[i-1] || !slices.Contains([]string{"sh", "bash"}, s.lastBlock.Lang) {
		return errors.New("a JSON answer must follow the sh block of the command that gives it")
	}
	answers := jsonValues(s.lastOutput)
	if len(answers) == 0 {
		return fmt.Errorf("the command above it answered no JSON:\n%s", s.lastOutput)
	}
	if problems := jsonMismatches(b.Text, answers[len(answers)-1]); len(problems) > 0 {
		return fmt.Errorf("not what the command above it answers:\n  %s\nit answered:\n%s", strings.Join(problems, "\n  "), s.lastOutput)
	}
	return nil
}

// jsonValues returns the JSON values of out, one after the other, up to
// the first text that is not JSON: the answers of grpcurl calls.
func jsonValues(out string) []string {
	var values []string
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return values
		}
		values = append(values, string(v))
	}
}

// proseClaim is what the prose of a document says about the outputs of a
// command block, beyond the JSON answer shown under it.
type proseClaim struct {
	// doc, section and program find the blocks: the sh blocks of that
	// section that run program.
	doc, section, program string
	says                  string
	check                 func(answers []string) error
}

// proseClaims are checked on the JSON answers of the blocks they describe;
// each must find its block.
var proseClaims = []proseClaim{{
	doc: "README.md", section: "Try it", program: "grpcurl",
	says:  "that the first five answers are OK with limitRemaining counting down from 4, and the sixth OVER_LIMIT with a retry-after",
	check: checkTryItLoop,
}, {
	doc: "docs/token-budgets-gateway.md", section: "4. Send a request, and see it charged", program: "curl",
	says: "that the model answers with a usage, and that the key's budget is then 5 000 000 a MONTH less its total_tokens, " +
		"reset at the end of the calendar month (UTC)",
	check: checkGatewayBudgetCharged,
}, {
	doc: "docs/swap-in-istio.md", section: "3. Check", program: "grpcurl",
	says:  "that the first answer is OK and the second OVER_LIMIT until the minute ends, with no retry-after header",
	check: checkIstioSwapAnswers,
}}

// checkGatewayBudgetCharged checks the two answers of the token budget
// walkthrough: a chat completion with its usage, then the check of its key's
// budget, charged with the completion's total tokens, in the calendar
// month (UTC) that holds now.
func checkGatewayBudgetCharged(outputs []string) error {
	if len(outputs) != 2 {
		return fmt.Errorf("%d answers, not 2", len(outputs))
	}
	var completion struct {
		Usage chatUsage `json:"usage"`
	}
	var check rlsv3.RateLimitResponse
	if err := errors.Join(json.Unmarshal([]byte(outputs[0]), &completion), protojson.Unmarshal([]byte(outputs[1]), &check)); err != nil {
		return err
	}
	tokens := completion.Usage.TotalTokens
	if tokens == 0 {
		return errors.New("the model's answer has no usage.total_tokens")
	}
	st := check.GetStatuses()
	if check.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(st) != 1 {
		return fmt.Errorf("the check is %s with %d statuses", check.GetOverallCode(), len(st))
	}
	l := st[0].GetCurrentLimit()
	if l.GetRequestsPerUnit() != 5_000_000 || l.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MONTH {
		return fmt.Errorf("the limit is %d a %s", l.GetRequestsPerUnit(), l.GetUnit())
	}
	if want := 5_000_000 - tokens; uint64(st[0].GetLimitRemaining()) != want {
		return fmt.Errorf("limitRemaining is %d, not 5000000 less the %d tokens of the response", st[0].GetLimitRemaining(), tokens)
	}
	now := time.Now().UTC()
	untilEnd := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Sub(now)
	if reset := st[0].GetDurationUntilReset().AsDuration(); (reset - untilEnd).Abs() > 5*time.Second {
		return fmt.Errorf("durationUntilReset is %s, not the %s to the end of the calendar month", reset, untilEnd)
	}
	return nil
}

// checkIstioSwapAnswers checks the two answers of the walkthrough's check
// against the task's limit of one request a minute, as envoyproxy/ratelimit
// answers them: OK, then OVER_LIMIT until the minute's end, no headers.
func checkIstioSwapAnswers(outputs []string) error {
	if len(outputs) != 2 {
		return fmt.Errorf("%d answers, not 2", len(outputs))
	}
	var first, second rlsv3.RateLimitResponse
	if err := errors.Join(protojson.Unmarshal([]byte(outputs[0]), &first), protojson.Unmarshal([]byte(outputs[1]), &second)); err != nil {
		return err
	}
	if first.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		return fmt.Errorf("the first answer is %s", first.GetOverallCode())
	}
	if second.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || len(second.GetResponseHeadersToAdd()) > 0 {
		return fmt.Errorf("the second answer is %s with headers %v", second.GetOverallCode(), second.GetResponseHeadersToAdd())
	}
	reset := second.GetStatuses()[0].GetDurationUntilReset().AsDuration()
	if untilMinute := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); reset <= 0 || reset > untilMinute+time.Second {
		return fmt.Errorf("the second answer resets in %s, not at the minute's end (%s away): not a fixed window", reset, untilMinute)
	}
	return nil
}

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
// that the README links to every other document the docs test reads.
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
