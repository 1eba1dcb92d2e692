package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// gap is the line, or the part of a line, that stands for output the docs
// leave out.
const gap = "…"

// matchOutput compares the output documented under a console command with
// what the command printed, and says what differs ("" when nothing does).
// The documented lines must be the printed ones, in order, except that a
// line "…" stands for any number of lines, "…" inside a line for any text,
// a line of JSON matches a line of equal JSON (see jsonMismatches), and a
// Retry-After header may differ by two seconds, as in JSON.
func matchOutput(doc []string, printed string) string {
	got := strings.Split(strings.TrimSuffix(printed, "\n"), "\n")
	if printed == "" {
		got = nil
	}
	var chunks [][]string
	chunk := []string{}
	for _, l := range doc {
		if l == gap {
			chunks = append(chunks, chunk)
			chunk = []string{}
			continue
		}
		chunk = append(chunk, l)
	}
	chunks = append(chunks, chunk)
	if len(chunks) == 1 {
		if len(doc) != len(got) || !linesMatch(doc, got) {
			return "the printed lines are not the documented ones"
		}
		return ""
	}
	// The first chunk is the first lines, the last chunk the last lines,
	// and the chunks between them come in order in between.
	first, last := chunks[0], chunks[len(chunks)-1]
	if len(first) > len(got) || !linesMatch(first, got[:len(first)]) {
		return fmt.Sprintf("the output does not open with %q", first)
	}
	from, to := len(first), len(got)-len(last)
	if to < from || !linesMatch(last, got[to:]) {
		return fmt.Sprintf("the output does not end with %q", last)
	}
	for _, c := range chunks[1 : len(chunks)-1] {
		found := -1
		for q := from; q+len(c) <= to; q++ {
			if linesMatch(c, got[q:q+len(c)]) {
				found = q
				break
			}
		}
		if found < 0 {
			return fmt.Sprintf("no printed lines match %q", c)
		}
		from = found + len(c)
	}
	return ""
}

func linesMatch(doc, got []string) bool {
	for i := range doc {
		if !lineMatches(doc[i], got[i]) {
			return false
		}
	}
	return true
}

func lineMatches(doc, got string) bool {
	if doc == got {
		return true
	}
	if strings.Contains(doc, gap) {
		parts := strings.Split(doc, gap)
		if !strings.HasPrefix(got, parts[0]) {
			return false
		}
		rest := got[len(parts[0]):]
		for _, p := range parts[1 : len(parts)-1] {
			i := strings.Index(rest, p)
			if i < 0 {
				return false
			}
			rest = rest[i+len(p):]
		}
		return strings.HasSuffix(rest, parts[len(parts)-1])
	}
	if dm, gm := retryAfterHeader.FindStringSubmatch(doc), retryAfterHeader.FindStringSubmatch(got); dm != nil && gm != nil {
		dn, _ := strconv.Atoi(dm[1])
		gn, _ := strconv.Atoi(gm[1])
		return max(dn-gn, gn-dn) <= 2
	}
	d, g := strings.TrimSpace(doc), strings.TrimSpace(got)
	if strings.HasPrefix(d, "{") && strings.HasPrefix(g, "{") {
		return len(jsonMismatches(d, g)) == 0
	}
	return false
}

// jsonMismatches lists how two JSON documents differ. They must hold the
// same fields, arrays of the same lengths and equal values, except where a
// value depends on the moment of the call: a durationUntilReset may differ
// by up to two seconds, and so may the value of a retry-after header.
func jsonMismatches(doc, got string) []string {
	var d, g any
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return []string{"the documented JSON does not parse: " + err.Error()}
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return []string{"the answer is not JSON: " + err.Error()}
	}
	var out []string
	compareJSON(d, g, "", &out)
	return out
}

// retryAfterHeader is the line of a Retry-After header, whose value depends
// on the moment of the call like a durationUntilReset.
var retryAfterHeader = regexp.MustCompile(`^(?i)retry-after: (\d+)$`)

var retryAfterValue = regexp.MustCompile(`responseHeadersToAdd\[\d+\]\.value$`)

func compareJSON(d, g any, path string, out *[]string) {
	switch dv := d.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: documented an object, got %v", orRoot(path), g))
			return
		}
		for k := range dv {
			if _, ok := gv[k]; !ok {
				*out = append(*out, fmt.Sprintf("%s: documented, but not in the answer", join(path, k)))
			}
		}
		for k := range gv {
			if _, ok := dv[k]; !ok {
				*out = append(*out, fmt.Sprintf("%s: in the answer (%v), but not documented", join(path, k), gv[k]))
			}
		}
		for k := range dv {
			if _, ok := gv[k]; ok {
				compareJSON(dv[k], gv[k], join(path, k), out)
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(dv) {
			*out = append(*out, fmt.Sprintf("%s: documented %d items, got %v", orRoot(path), len(dv), g))
			return
		}
		for i := range dv {
			compareJSON(dv[i], gv[i], path+"["+strconv.Itoa(i)+"]", out)
		}
	default:
		if d == g {
			return
		}
		ds, dok := d.(string)
		gs, gok := g.(string)
		switch {
		case dok && gok && strings.HasSuffix(path, "durationUntilReset"):
			dd, err1 := time.ParseDuration(ds)
			gd, err2 := time.ParseDuration(gs)
			if err1 == nil && err2 == nil && (dd-gd).Abs() <= 2*time.Second {
				return
			}
		case dok && gok && retryAfterValue.MatchString(path):
			dn, err1 := strconv.Atoi(ds)
			gn, err2 := strconv.Atoi(gs)
			if err1 == nil && err2 == nil && max(dn-gn, gn-dn) <= 2 {
				return
			}
		}
		*out = append(*out, fmt.Sprintf("%s: documented %v, got %v", orRoot(path), d, g))
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orRoot(path string) string {
	if path == "" {
		return "(the whole answer)"
	}
	return path
}

// checkYAML checks a yaml block: a limits file must load, and the variables
// of a container's environment must be ones the server reads, with values it
// accepts.
func (s *docSession) checkYAML(ts *testscript.TestScript, file string) error {
	b := s.blocks[file]
	var v any
	if err := yaml.Unmarshal([]byte(b.Text), &v); err != nil {
		return err
	}
	if m, ok := v.(map[string]any); ok && m["domain"] != nil {
		opts, err := serverConfigOptions()
		if err != nil {
			return err
		}
		cfg, err := config.Parse([]config.File{{Name: b.String(), Data: []byte(b.Text)}}, opts)
		if err != nil {
			return fmt.Errorf("the server would not load these limits: %w", err)
		}
		s.limits = cfg
		return nil
	}
	env := map[string]string{}
	if !collectEnv(v, env) {
		return errors.New("neither a limits file (domain: …) nor a container's environment (env: or environment:)")
	}
	known, err := knownVariables()
	if err != nil {
		return err
	}
	var errs []error
	s.t.Run(fmt.Sprintf("environment_at_line_%d", b.Line), func(t *testing.T) {
		vars := map[string]string{}
		for k, v := range env {
			if !known[k] {
				errs = append(errs, fmt.Errorf("%s is not a variable the server reads (server -h)", k))
				continue
			}
			vars[k] = v
		}
		lookup := func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		}
		if _, err := settings.Load(lookup); err != nil {
			errs = append(errs, fmt.Errorf("the server would not start with this environment: %w", err))
		}
	})
	return errors.Join(errs...)
}

// collectEnv adds the variables of every Kubernetes env list (name and
// value; a value from a secret counts as "secret") and Compose environment
// map under v to env, and reports whether it found any.
func collectEnv(v any, env map[string]string) bool {
	found := false
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			switch list := sub.(type) {
			case []any:
				if k == "env" {
					for _, item := range list {
						if e, ok := item.(map[string]any); ok {
							name, _ := e["name"].(string)
							value := fmt.Sprint(e["value"])
							if e["value"] == nil {
								value = "secret"
							}
							env[name] = value
							found = true
						}
					}
					continue
				}
			case map[string]any:
				if k == "environment" {
					for name, value := range list {
						env[name] = fmt.Sprint(value)
						found = true
					}
					continue
				}
			}
			if collectEnv(sub, env) {
				found = true
			}
		}
	case []any:
		for _, item := range t {
			if collectEnv(item, env) {
				found = true
			}
		}
	}
	return found
}

// textChecker recognises one kind of documented output and checks it.
type textChecker struct {
	name  string
	is    func(lines []string) bool
	check func(s *docSession, lines []string) error
}

var (
	traceHeader   = regexp.MustCompile(`^(fixed_window|sliding_window_log|sliding_window_counter|token_bucket): (\d+) per (\S+?)(?:, burst (\d+))?$`)
	traceLine     = regexp.MustCompile(`^t=(\S+)\s+(take|charge|record) (\d+)\s+→ (admitted|denied|within|over), remaining (\d+), reset (\S+?)(?:\s+#.*)?$`)
	matchLine     = regexp.MustCompile(`^\[(.*?)\]\s+→ (.*?)(?:\s+#.*)?$`)
	configErrLine = regexp.MustCompile(`^config/([\w.-]+\.ya?ml):(\d+)(?::\d+)?: (\S+): (.*)$`)
	rlconfigFirst = regexp.MustCompile(`^loaded: \S+ from \S+ \(\d+ files?\)$`)
	redisKeyLine  = regexp.MustCompile(`^ratewarden:\{(.*)\}(.*)$`)
	timestamp     = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

// textCheckers are the outputs the docs may show in text blocks.
var textCheckers = []textChecker{
	{"a trace of an algorithm", func(l []string) bool { return traceHeader.MatchString(l[0]) }, checkTrace},
	{"matches of request descriptors", allLines(matchLine), checkMatches},
	{"a configuration error", func(l []string) bool { return len(l) == 1 && configErrLine.MatchString(l[0]) }, checkConfigError},
	{"the opening of /rlconfig", func(l []string) bool { return rlconfigFirst.MatchString(l[0]) }, checkRLConfig},
	{"Redis keys", allLines(redisKeyLine), checkRedisKeys},
}

func allLines(re *regexp.Regexp) func([]string) bool {
	return func(lines []string) bool {
		for _, l := range lines {
			if !re.MatchString(l) {
				return false
			}
		}
		return true
	}
}

// checkText checks a text block with the first of textCheckers that
// recognises it.
func (s *docSession) checkText(ts *testscript.TestScript, file string) error {
	lines := strings.Split(strings.TrimRight(s.blocks[file].Text, "\n"), "\n")
	for _, c := range textCheckers {
		if c.is(lines) {
			if err := c.check(s, lines); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			return nil
		}
	}
	names := make([]string, len(textCheckers))
	for i, c := range textCheckers {
		names[i] = c.name
	}
	return fmt.Errorf("a text block must be one of the outputs the docs test reproduces: %s", strings.Join(names, ", "))
}

// traceOrigin is t=0 of the traces: the start of a second, minute, hour and
// day.
var traceOrigin = time.Unix(1_576_800_000, 0)

// checkTrace replays a trace on the reference maths of internal/algorithms:
//
//	token_bucket: 10 per 1s, burst 20
//	t=0s      take 20  → admitted, remaining 0, reset 2s
//	t=100ms   take 2   → denied, remaining 1, reset 100ms
//	t=100ms   charge 5 → over, remaining 0, reset 400ms
//
// A charge is within the limit or over it, never denied.
func checkTrace(_ *docSession, lines []string) error {
	h := traceHeader.FindStringSubmatch(lines[0])
	alg, err := algorithms.ParseAlgorithm(h[1])
	if err != nil {
		return err
	}
	requests, _ := strconv.ParseUint(h[2], 10, 64)
	window, err := time.ParseDuration(h[3])
	if err != nil {
		return err
	}
	burst, _ := strconv.ParseUint(h[4], 10, 64)
	limit := algorithms.Limit{Algorithm: alg, Requests: requests, Window: window, Burst: burst}
	if err := limit.Validate(); err != nil {
		return err
	}
	state := algorithms.NewState(alg)
	var problems []string
	for _, line := range lines[1:] {
		m := traceLine.FindStringSubmatch(line)
		if m == nil {
			problems = append(problems, fmt.Sprintf("%q: want t=DURATION take N → admitted|denied, or charge N → within|over, then remaining N, reset DURATION", line))
			continue
		}
		at, err1 := time.ParseDuration(m[1])
		n, err2 := strconv.ParseUint(m[3], 10, 64)
		reset, err3 := time.ParseDuration(m[6])
		if err := errors.Join(err1, err2, err3); err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", line, err))
			continue
		}
		var r algorithms.Result
		var decision string
		switch m[2] {
		case "charge", "record":
			charge := state.Charge
			if m[2] == "record" {
				charge = state.Record
			}
			r = charge(limit, traceOrigin.Add(at), n)
			decision = map[bool]string{true: "within", false: "over"}[r.Allowed]
		default:
			r = state.Take(limit, traceOrigin.Add(at), n)
			decision = map[bool]string{true: "admitted", false: "denied"}[r.Allowed]
		}
		if decision != m[4] || strconv.FormatUint(r.Remaining, 10) != m[5] || r.ResetAfter != reset {
			problems = append(problems, fmt.Sprintf("%q: the maths says → %s, remaining %d, reset %s", line, decision, r.Remaining, r.ResetAfter))
		}
	}
	return errors.Join(errorsOf(problems)...)
}

func errorsOf(msgs []string) []error {
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		errs[i] = errors.New(m)
	}
	return errs
}

// checkMatches matches each request descriptor against the last limits file
// of the document:
//
//	[remote_address=10.1.2.3]  → edge.remote_address_10.1.*
//	[user=u1]                  → app.user, metric app.user_u1
//	[region=eu-west]           → app.region_eu*, counted as [region=eu*]
//	[path=/login]              → no rule
func checkMatches(s *docSession, lines []string) error {
	if s.limits == nil {
		return errors.New("no limits file (a yaml block with a domain) comes before it in the document")
	}
	domain := s.limits.Domains()[0]
	var problems []string
	for _, line := range lines {
		m := matchLine.FindStringSubmatch(line)
		entries, err := parseEntries(m[1])
		if err != nil {
			problems = append(problems, fmt.Sprintf("%q: %v", line, err))
			continue
		}
		match, ok := s.limits.Match(domain, entries)
		got := "no rule"
		if ok {
			got = match.Rule.Path
			if match.MetricKey != match.Rule.Path {
				got += ", metric " + match.MetricKey
			}
			if !slices.Equal(match.Key.Entries, entries) {
				got += ", counted as [" + formatEntries(match.Key.Entries) + "]"
			}
		}
		if m[2] != got {
			problems = append(problems, fmt.Sprintf("%q: the server matches → %s", line, got))
		}
	}
	return errors.Join(errorsOf(problems)...)
}

func parseEntries(s string) ([]rate.Entry, error) {
	var entries []rate.Entry
	for _, part := range strings.Split(s, ", ") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: want key=value", part)
		}
		entries = append(entries, rate.Entry{Key: k, Value: v})
	}
	return entries, nil
}

func formatEntries(entries []rate.Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ", ")
}

// copyConfig copies config/ into a new directory and returns it.
func copyConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "*.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644))
	}
	return dir
}

var (
	yamlScalarLine = regexp.MustCompile(`^(\s*(?:- )?[\w]+:\s*)\S.*$`)
	quotedValue    = regexp.MustCompile(`"([^"]*)"`)
)

// breakConfig writes into the copy of config/ in dir the mistake that the
// error message msg ("config/edge.yaml:17:13: …: invalid … \"fortnight\" …")
// reports: the first quoted value of the message in place of the value on
// that line.
func breakConfig(dir, msg string) error {
	m := configErrLine.FindStringSubmatch(msg)
	if m == nil {
		return fmt.Errorf("%q is not file:line:column: field: message", msg)
	}
	bad := quotedValue.FindStringSubmatch(m[4])
	if bad == nil {
		return fmt.Errorf("%q quotes no value to write", msg)
	}
	path := filepath.Join(dir, m[1])
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	n, _ := strconv.Atoi(m[2])
	if n < 1 || n > len(lines) || !yamlScalarLine.MatchString(lines[n-1]) {
		return fmt.Errorf("line %d of config/%s is not a field with a value", n, m[1])
	}
	lines[n-1] = yamlScalarLine.ReplaceAllString(lines[n-1], "${1}") + bad[1]
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644)
}

// serverConfigOptions returns the options the server reads its limits
// with when no variable is set: RLS_DEFAULT_ALGORITHM's default counts the
// limits that name no algorithm.
func serverConfigOptions() (config.Options, error) {
	s, err := settings.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		return config.Options{}, err
	}
	return config.Options{DefaultAlgorithm: s.DefaultAlgorithm, MaxBytes: s.ConfigMaxBytes}, nil
}

// checkConfigError makes the mistake the message reports in a copy of
// config/ and compares the error the server's loader gives.
func checkConfigError(s *docSession, lines []string) error {
	dir := copyConfig(s.t)
	if err := breakConfig(dir, lines[0]); err != nil {
		return err
	}
	opts, err := serverConfigOptions()
	if err != nil {
		return err
	}
	_, err = config.LoadContext(context.Background(), dir, opts)
	if err == nil {
		return errors.New("the configuration loads without error")
	}
	if got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "config/"); got != lines[0] {
		return fmt.Errorf("the loader says:\n%s", got)
	}
	return nil
}

// checkRLConfig starts a server on a copy of config/, reads the opening of
// /rlconfig and, when the docs show a failed reload, makes that mistake and
// waits for /rlconfig to report it.
func checkRLConfig(s *docSession, lines []string) error {
	dir := copyConfig(s.t)
	// The docs show a server started in the repository, with the relative
	// RLS_CONFIG_PATH ./config, whose file names /rlconfig shows as they
	// are; this one reads a copy at an absolute path, which it would show
	// relative to the copy without RLS_RLCONFIG_SHOW_PATHS.
	srv := startServer(s.t, map[string]string{"RLS_CONFIG_PATH": dir, "RLS_RLCONFIG_SHOW_PATHS": "true"})
	defer srv.Stop()
	normalize := func(l string) string {
		l = strings.ReplaceAll(l, dir+string(filepath.Separator), "config/")
		l = strings.ReplaceAll(l, dir, "./config")
		return timestamp.ReplaceAllString(l, "TIME")
	}
	get := func() ([]string, error) {
		resp, err := http.Get("http://" + srv.HTTPAddr + "/rlconfig")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return strings.Split(string(body), "\n"), err
	}
	got, err := get()
	if err != nil {
		return err
	}
	if normalize(got[0]) != normalize(lines[0]) {
		return fmt.Errorf("/rlconfig opens with %q", got[0])
	}
	if len(lines) == 1 {
		return nil
	}
	msg, ok := strings.CutPrefix(lines[1], "last reload error: ")
	if !ok || len(lines) > 2 {
		return errors.New(`want "loaded: …" and at most a "last reload error: …" line`)
	}
	msg = timestamp.ReplaceAllString(msg, "")
	if err := breakConfig(dir, strings.TrimPrefix(msg, ": ")); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if got, err = get(); err != nil {
			return err
		}
		if strings.HasPrefix(got[1], "last reload error: ") {
			if normalize(got[1]) != normalize(lines[1]) {
				return fmt.Errorf("/rlconfig says %q", got[1])
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("/rlconfig reported no reload error within 15s:\n%s", strings.Join(got, "\n"))
}

// checkRedisKeys sends, to a server counting in a Redis of its own, a
// request for each key's identity, and checks that Redis holds every key.
func checkRedisKeys(s *docSession, lines []string) error {
	redisServer := redistest.Standalone(s.t)
	srv := startServer(s.t, map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_ADDRS": redisServer.Addr()})
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range lines {
		identity := redisKeyLine.FindStringSubmatch(l)[1]
		parts := strings.Split(identity, "|")
		if len(parts) < 3 {
			return fmt.Errorf("%q: want domain|key=value|…|algorithm:seconds", identity)
		}
		req := &rlsv3.RateLimitRequest{Domain: unescapePart(parts[0])}
		d := &ratelimitv3.RateLimitDescriptor{}
		for _, p := range parts[1 : len(parts)-1] {
			k, v, _ := strings.Cut(p, "=")
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: unescapePart(k), Value: unescapePart(v)})
		}
		req.Descriptors = append(req.Descriptors, d)
		if _, err := srv.Client.ShouldRateLimit(ctx, req); err != nil {
			return fmt.Errorf("%q: %w", l, err)
		}
	}
	keys, err := redisServer.Client(s.t).Keys(ctx, "*").Result()
	if err != nil {
		return err
	}
	// A fixed window's count key ends with the window's number, which
	// depends on the day the test runs.
	window := regexp.MustCompile(`:w[0-9]+$`)
	held := make([]string, len(keys))
	for i, k := range keys {
		held[i] = window.ReplaceAllString(k, ":w<window>")
	}
	var missing []string
	for _, l := range lines {
		if !slices.Contains(held, window.ReplaceAllString(l, ":w<window>")) {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		slices.Sort(keys)
		return fmt.Errorf("Redis holds no key %q; it holds:\n%s", missing, strings.Join(keys, "\n"))
	}
	return nil
}

// unescapePart undoes the percent-escaping of an identity's part.
func unescapePart(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

func TestDocsOutputMatching(t *testing.T) {
	printed := "HTTP/1.1 200 OK\nContent-Type: application/json\nDate: x\n\n{\"a\": 1, \"b\": [\"c\"]}\n"
	for _, tc := range []struct {
		doc  []string
		want bool
	}{
		{[]string{"HTTP/1.1 200 OK", gap, `{"b":["c"],"a":1}`}, true},
		{[]string{"HTTP/1.1 200 OK", gap}, true},
		{[]string{"HTTP/1.1 … OK", "Content-Type: application/json", gap}, true},
		{[]string{gap, "Date: x", gap}, true},
		{[]string{"HTTP/1.1 200 OK"}, false},
		{[]string{"Content-Type: application/json", gap}, false},
		{[]string{gap, `{"a":1}`}, false},
		{[]string{gap, "Date: y", gap}, false},
		{[]string{gap, "Date: x", "Content-Type: application/json", gap}, false},
		{[]string{"HTTP/1.1 200 OK", gap, "Date: x", gap}, true},
	} {
		assert.Equal(t, tc.want, matchOutput(tc.doc, printed) == "", "%q", tc.doc)
	}
	assert.Empty(t, matchOutput([]string{"Retry-After: 60"}, "Retry-After: 59\n"), "a Retry-After depends on the moment")
	assert.NotEmpty(t, matchOutput([]string{"Retry-After: 60"}, "Retry-After: 50\n"))
	assert.NotEmpty(t, matchOutput([]string{"OK"}, ""))
	assert.Empty(t, matchOutput(nil, ""))

	doc := `{"overallCode":"OVER_LIMIT","statuses":[{"durationUntilReset":"59.998721s"}],"responseHeadersToAdd":[{"key":"retry-after","value":"60"}]}`
	assert.Empty(t, jsonMismatches(doc, `{"overallCode":"OVER_LIMIT","statuses":[{"durationUntilReset":"59.1s"}],"responseHeadersToAdd":[{"key":"retry-after","value":"59"}]}`))
	assert.Len(t, jsonMismatches(doc, `{"overallCode":"OK","statuses":[{"durationUntilReset":"50s"}],"responseHeadersToAdd":[{"key":"retry-after","value":"50"}]}`), 3)
	assert.Len(t, jsonMismatches(doc, `{"overallCode":"OVER_LIMIT","statuses":[{"durationUntilReset":"59s","limitRemaining":1}]}`), 2)
}
