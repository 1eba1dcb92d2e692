package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/explain"
)

// checked is what one run of the check command did.
type checked struct {
	code           int
	stdout, stderr string
}

// runCheck runs the check command with args and the variables env.
func runCheck(t *testing.T, env map[string]string, stdin string, args ...string) checked {
	t.Helper()
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, lookup, strings.NewReader(stdin), &stdout, &stderr)
	c := checked{stdout: stdout.String(), stderr: stderr.String()}
	var exit *ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		c.code = exit.Code
	default:
		t.Fatalf("Run returned %v, not an *ExitError", err)
	}
	return c
}

// writeFiles writes files (name: content) into a new directory.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

const goodLimits = `domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
    rate_limits: [{unit: day, requests_per_unit: 10000, algorithm: fixed_window}]
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_window_log}
  - {key: free, rate_limit: {unlimited: true}}
`

func TestCheckPasses(t *testing.T) {
	dir := writeFiles(t, map[string]string{"edge.yaml": goodLimits, "other.yaml": "domain: other\n"})
	c := runCheck(t, nil, "", dir)
	assert.Equal(t, 0, c.code)
	assert.Equal(t, strings.ReplaceAll(`DIR/edge.yaml:3:5: note: descriptors[0]: not granted over RLQS: 2 limits (a grant is reserved on one) (rlqs)
domain edge: 3 rules (1 unlimited), 3 limits (fixed_window 1, sliding_window_log 1, token_bucket 1) in DIR/edge.yaml
domain other: 0 rules, 0 limits in DIR/other.yaml
ok: 2 domains in 2 files, 1 note
`, "DIR", dir), c.stdout)

	// RLS_CONFIG_PATH when no PATH is given; a file as well as a directory.
	c = runCheck(t, map[string]string{"RLS_CONFIG_PATH": filepath.Join(dir, "edge.yaml")}, "")
	assert.Equal(t, 0, c.code)
	assert.Contains(t, c.stdout, "ok: 1 domain in 1 file, 1 note\n")

	c = runCheck(t, nil, "", "-json", dir)
	assert.Equal(t, 0, c.code)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &res))
	assert.True(t, res.OK)
	assert.Equal(t, []DomainSummary{
		{Domain: "edge", Files: []string{filepath.Join(dir, "edge.yaml")}, Rules: 3, Unlimited: 1, Limits: 3,
			Algorithms: map[string]int{"fixed_window": 1, "sliding_window_log": 1, "token_bucket": 1}},
		{Domain: "other", Files: []string{filepath.Join(dir, "other.yaml")}},
	}, res.Domains)
}

func TestCheckReportsEveryError(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n  - key: j\n    bogus: 1\n",
		"b.yaml": "domain: a\n",
		"c.yaml": "domain: c\ndescriptors: [\n",
	})
	c := runCheck(t, nil, "", dir)
	assert.Equal(t, ExitFailed, c.code)
	assert.Equal(t, strings.ReplaceAll(`DIR/a.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit "fortnight" (want second, minute, hour, day, week, month or year)
DIR/a.yaml:6:5: descriptors[1].bogus: unknown field (want key, value, rate_limit, rate_limits, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, allow_negative_hits, charge)
DIR/b.yaml:1:9: domain: duplicate domain "a" (also in DIR/a.yaml:1)
DIR/c.yaml:3: invalid YAML: did not find expected node content
failed: 4 errors
`, "DIR", dir), c.stdout, "file:line:column: field: message, a column where the YAML parser gives one")

	c = runCheck(t, nil, "", "-json", dir)
	assert.Equal(t, ExitFailed, c.code)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &res))
	assert.False(t, res.OK)
	require.Len(t, res.Errors, 4)
	assert.Equal(t, Finding{File: filepath.Join(dir, "a.yaml"), Line: 6, Column: 5, Field: "descriptors[1].bogus",
		Message: res.Errors[1].Message}, res.Errors[1])
	assert.Equal(t, 3, res.Errors[3].Line)

	// What keeps the files from being read at all, and bounds.
	c = runCheck(t, nil, "", filepath.Join(dir, "missing"))
	assert.Equal(t, ExitFailed, c.code)
	assert.Equal(t, filepath.Join(dir, "missing")+": cannot stat: no such file or directory\nfailed: 1 error\n", c.stdout)
	c = runCheck(t, map[string]string{"RLS_CONFIG_MAX_BYTES": "5"}, "", filepath.Join(dir, "b.yaml"))
	assert.Equal(t, ExitFailed, c.code)
	assert.Contains(t, c.stdout, "more than the 5 they may hold (RLS_CONFIG_MAX_BYTES)")
	c = runCheck(t, map[string]string{"RLS_FAILURE_MODE": "sometimes"}, "", dir)
	assert.Equal(t, ExitFailed, c.code)
	assert.Contains(t, c.stdout, "RLS_FAILURE_MODE")
}

// TestCheckWarnings: each kind of warning, reported with its position;
// the check passes unless -strict.
func TestCheckWarnings(t *testing.T) {
	dir := writeFiles(t, map[string]string{"w.yaml": `domain: w
descriptors:
  - &base
    key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 10}
    descriptors:
      - {key: user, rate_limit: {unit: second, requests_per_unit: 1}}
  - <<: *base
    value: /api/v1/*
    descriptors:
      - {key: team, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: year, rate_limit: {unit: year, requests_per_unit: 10}}
  - {key: log, rate_limit: {unit: second, requests_per_unit: 5000, algorithm: sliding_window_log}}
  - {key: hot, rate_limit: {unit: second, requests_per_unit: 2, shards: 8}}
`})
	file := filepath.Join(dir, "w.yaml")
	noRLQS := map[string]string{"RLS_RLQS": "false"} // no notes (TestCheckRLQSNotes)
	c := runCheck(t, noRLQS, "", dir)
	assert.Equal(t, 0, c.code, c.stdout)
	lines := strings.Split(strings.TrimSuffix(c.stdout, "\n"), "\n")
	require.Len(t, lines, 7, c.stdout)
	for i, want := range []string{
		file + `:9:5: warning: descriptors[1]: value "/api/v1/*" of key "path" is never matched: the wildcard "/api/*" (line 3) matches every value it does and is tried first`,
		file + `:11:5: warning: descriptors[1].descriptors: replaces the list that the merge key (<<) at line 9 brings in: its item is dropped`,
		file + `:13:29: warning: descriptors[2].rate_limit: a sliding_window_counter of 1 year keeps its state, and its Redis keys, for 730 days`,
		file + `:14:62: warning: descriptors[3].rate_limit.requests_per_unit: a sliding_window_log keeps one entry per hit: up to 5000`,
		file + `:15:73: warning: descriptors[4].rate_limit.shards: 8 shards, but a limit of 2 hits has too few to share`,
	} {
		assert.True(t, strings.HasPrefix(lines[i], want), "line %d:\n%s\nwant:\n%s", i, lines[i], want)
	}
	for i, kind := range []string{"shadowed", "merge_key", "lifetime", "log_size", "shards"} {
		assert.True(t, strings.HasSuffix(lines[i], " ("+kind+")"), lines[i])
	}
	assert.Equal(t, "ok: 1 domain in 1 file, 5 warnings", lines[6])

	c = runCheck(t, noRLQS, "", "-strict", dir)
	assert.Equal(t, ExitFailed, c.code)
	assert.True(t, strings.HasSuffix(c.stdout, "failed: 5 warnings (-strict)\n"), c.stdout)

	c = runCheck(t, noRLQS, "", "-json", "-strict", dir)
	assert.Equal(t, ExitFailed, c.code)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &res))
	assert.False(t, res.OK)
	require.Len(t, res.Warnings, 5)
	assert.Equal(t, Finding{Kind: "shards", File: file, Line: 15, Column: 73, Field: "descriptors[4].rate_limit.shards",
		Message: "8 shards, but a limit of 2 hits has too few to share: it is split over 2 keys, one hit each"}, res.Warnings[4])

	// The bounds are the settings'.
	c = runCheck(t, map[string]string{"RLS_MAX_OVERRIDE_LIFETIME": "20000h", "RLS_MAX_OVERRIDE_LOG_SIZE": "5000", "RLS_RLQS": "false"}, "", dir)
	assert.Contains(t, c.stdout, "ok: 1 domain in 1 file, 3 warnings")
}

// TestCheckRLQSNotes: each rule the Rate Limit Quota Service grants
// nothing on has a note, with its position and why, which -strict does not
// fail on; the rules it grants, or answers ALLOW_ALL, have none; and with
// RLS_RLQS=false, which serves no RLQS, there are no notes.
func TestCheckRLQSNotes(t *testing.T) {
	dir := writeFiles(t, map[string]string{"q.yaml": `domain: q
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: fixed_window}
  - {key: free, rate_limit: {unlimited: true}}
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
    rate_limits: [{unit: day, requests_per_unit: 10000, algorithm: fixed_window}]
  - key: path
    descriptors:
      - {key: hot, rate_limit: {unit: minute, requests_per_unit: 6000, algorithm: token_bucket, shards: 4}}
  - {key: tokens, charge: debt, rate_limit: {unit: minute, requests_per_unit: 100}}
  - {key: second, rate_limit: {unit: second, requests_per_unit: 50, algorithm: fixed_window}}
`})
	file := filepath.Join(dir, "q.yaml")
	want := strings.ReplaceAll(`FILE:6:5: note: descriptors[2]: not granted over RLQS: 2 limits (a grant is reserved on one) (rlqs)
FILE:11:9: note: descriptors[3].descriptors[0]: not granted over RLQS: shards: 4 (a grant is reserved on one key) (rlqs)
FILE:12:5: note: descriptors[4]: not granted over RLQS: charge: debt (a charge counts hits once spent; a grant reserves them before) (rlqs)
FILE:13:5: note: descriptors[5]: not granted over RLQS: a fixed_window of 1s (a grant lives whole seconds and ends 1s before its window: it needs a window of 3s or more) (rlqs)
domain q: 6 rules (1 unlimited), 6 limits (fixed_window 3, sliding_window_counter 1, token_bucket 2) in FILE
ok: 1 domain in 1 file, 4 notes
`, "FILE", file)
	for _, args := range [][]string{{dir}, {"-strict", dir}} {
		c := runCheck(t, nil, "", args...)
		assert.Equal(t, 0, c.code, "%v: notes never fail the check", args)
		assert.Equal(t, want, c.stdout, "%v", args)
	}

	c := runCheck(t, nil, "", "-json", dir)
	assert.Equal(t, 0, c.code)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &res))
	assert.True(t, res.OK)
	assert.Empty(t, res.Warnings)
	require.Len(t, res.Notes, 4)
	assert.Equal(t, Finding{Kind: "rlqs", File: file, Line: 11, Column: 9, Field: "descriptors[3].descriptors[0]",
		Message: "not granted over RLQS: shards: 4 (a grant is reserved on one key)"}, res.Notes[1])

	c = runCheck(t, map[string]string{"RLS_RLQS": "false"}, "", dir)
	assert.Equal(t, 0, c.code)
	assert.NotContains(t, c.stdout, "note")
	assert.True(t, strings.HasSuffix(c.stdout, "ok: 1 domain in 1 file\n"), c.stdout)
}

// TestCheckAnswersToConfigCheckCmdsFlags: envoyproxy/ratelimit's
// config_check_cmd -config_dir and -merge_domain_configs, and its exit
// codes.
func TestCheckAnswersToConfigCheckCmdsFlags(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n",
		"b.yaml": "domain: d\ndescriptors:\n  - {key: b, rate_limit: {unit: second, requests_per_unit: 1}}\n",
	})
	c := runCheck(t, nil, "", "-config_dir", dir)
	assert.Equal(t, ExitFailed, c.code)
	assert.Contains(t, c.stdout, `duplicate domain "d"`)

	for _, args := range [][]string{
		{"-config_dir", dir, "-merge_domain_configs"},
		{"-config_dir=" + dir, "-merge_domain_configs=true"},
		{"--merge_domain_configs", dir},
		{dir, "-merge_domain_configs"},
	} {
		c = runCheck(t, nil, "", args...)
		assert.Equal(t, 0, c.code, "%v: %s", args, c.stdout)
		assert.Contains(t, c.stdout, "domain d: 2 rules", args)
	}
	// envoyproxy/ratelimit's own variable means the same.
	c = runCheck(t, map[string]string{"MERGE_DOMAIN_CONFIG": "true"}, "", "-config_dir", dir)
	assert.Equal(t, 0, c.code, c.stdout)

	// A command line it does not understand exits 2, as Go's flag package
	// makes config_check_cmd exit.
	for _, args := range [][]string{{"-bogus"}, {"-config_dir"}, {dir, "other"}, {"-config_dir", dir, "other"}} {
		c = runCheck(t, nil, "", args...)
		assert.Equal(t, ExitUsage, c.code, "%v", args)
		assert.Contains(t, c.stderr, "Usage: server check", "%v", args)
		assert.Empty(t, c.stdout)
	}
	c = runCheck(t, nil, "", "-h")
	assert.Equal(t, 0, c.code)
	assert.Contains(t, c.stderr, "-merge_domain_configs")
}

const loginRequest = `{"domain":"edge","descriptors":[{"entries":[{"key":"path","value":"/login"},{"key":"remote_address","value":"192.0.2.1"}]}]}`

func TestCheckExplain(t *testing.T) {
	dir := writeFiles(t, map[string]string{"edge.yaml": goodLimits})
	file := filepath.Join(dir, "edge.yaml")
	reqFile := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(reqFile, []byte(loginRequest), 0o644))

	want := `domain edge (backend memory: the keys are those RLS_BACKEND=redis would use)
when the request is denied, what its takes took from its other limits is given back (RLS_REFUND_ON_DENY); charges stay
descriptors[0] path=/login remote_address=192.0.2.1
  path matched value "/login" at FILE:6
  remote_address matched its key alone at FILE:9
  rule edge.path_/login.remote_address at FILE:9
  limit 5 per 1 minute, sliding_window_log: take 1
    key ratewarden:{edge|path=/login|remote_address=192.0.2.1|sliding_window_log:60} (slot 677)
    key ratewarden:{edge|path=/login|remote_address=192.0.2.1|sliding_window_log:60}:seq (slot 677)
`
	for _, args := range [][]string{{"-explain", loginRequest, dir}, {dir, "-explain", reqFile}, {"-explain", "-", dir}} {
		c := runCheck(t, nil, loginRequest, args...)
		assert.Equal(t, 0, c.code, c.stdout)
		assert.Equal(t, strings.ReplaceAll(want, "FILE", file), c.stdout, "%v", args)
	}

	c := runCheck(t, map[string]string{"RLS_BACKEND": "redis", "RLS_KEY_PREFIX": "rl:"}, "", "-json", "-explain", loginRequest, dir)
	assert.Equal(t, 0, c.code, c.stdout)
	var r explain.Report
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &r))
	assert.Equal(t, "redis", r.Backend)
	assert.Equal(t, "rl:{edge|path=/login|remote_address=192.0.2.1|sliding_window_log:60}", r.Descriptors[0].Limits[0].Shards[0].Keys[0])

	for _, tc := range []struct{ request, msg string }{
		{"{", "-explain: rls: request is not a RateLimitRequest in JSON"},
		{`{"domain":""}`, "-explain: rls: domain must not be empty"},
		{`{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":5000,"unit":"SECOND"}}]}`,
			"-explain: rls: descriptors[0].limit"},
		{filepath.Join(dir, "missing.json"), "-explain: open " + filepath.Join(dir, "missing.json")},
	} {
		c = runCheck(t, map[string]string{"RLS_DEFAULT_ALGORITHM": "sliding_window_log"}, "", "-explain", tc.request, dir)
		assert.Equal(t, ExitFailed, c.code, tc.request)
		assert.True(t, strings.HasPrefix(c.stdout, tc.msg), "%s:\n%s", tc.request, c.stdout)
		assert.True(t, strings.HasSuffix(c.stdout, "failed: 1 error\n"), c.stdout)
	}

	// Limits that do not load are reported, and nothing is explained.
	bad := writeFiles(t, map[string]string{"bad.yaml": "domain: x\nbogus: 1\n"})
	c = runCheck(t, nil, "", "-explain", loginRequest, bad)
	assert.Equal(t, ExitFailed, c.code)
	assert.Contains(t, c.stdout, "bad.yaml:2:1: bogus: unknown field")
}

const loginBucket = `{"domain":"edge","bucket":{"remote_address":"192.0.2.1","path":"/login"}}`

// TestCheckExplainBucket: -explain-bucket takes a bucket id and its domain
// as -explain takes a request (inline, a file, or stdin), and says the
// descriptor it stands for, the rule, and what the quota service answers.
func TestCheckExplainBucket(t *testing.T) {
	dir := writeFiles(t, map[string]string{"edge.yaml": goodLimits})
	file := filepath.Join(dir, "edge.yaml")
	bucketFile := filepath.Join(t.TempDir(), "bucket.json")
	require.NoError(t, os.WriteFile(bucketFile, []byte(loginBucket), 0o644))

	want := `domain edge (backend memory: the keys are those RLS_BACKEND=redis would use)
bucket {"path":"/login","remote_address":"192.0.2.1"}: the descriptor path=/login remote_address=192.0.2.1
  path matched value "/login" at FILE:6
  remote_address matched its key alone at FILE:9
  rule edge.path_/login.remote_address at FILE:9
  answer: grants of hits reserved on 5 per 1 minute, sliding_window_log
    key ratewarden:{edge|path=/login|remote_address=192.0.2.1|sliding_window_log:60} (slot 677)
    key ratewarden:{edge|path=/login|remote_address=192.0.2.1|sliding_window_log:60}:seq (slot 677)
  a grant is k hits reserved on the limit in one backend call, in the state that RateLimitService counts the same entries in, and sent as a token bucket of k tokens that does not refill: grants never add up past the limit
`
	for _, args := range [][]string{{"-explain-bucket", loginBucket, dir}, {dir, "-explain-bucket", bucketFile}, {"-explain-bucket", "-", dir}} {
		c := runCheck(t, nil, loginBucket, args...)
		assert.Equal(t, 0, c.code, c.stdout)
		assert.Equal(t, strings.ReplaceAll(want, "FILE", file), c.stdout, "%v", args)
	}

	c := runCheck(t, nil, "", "-explain-bucket", `{"domain":"edge","bucket":{"api_key":"k1"}}`, dir)
	assert.Equal(t, 0, c.code, c.stdout)
	assert.Contains(t, c.stdout, "  answer: no assignment, as a grant cannot count on the rule:\n    2 limits (a grant is reserved on one)\n")

	c = runCheck(t, nil, "", "-json", "-explain-bucket", `{"domain":"edge","bucket":{"free":"x"}}`, dir)
	assert.Equal(t, 0, c.code, c.stdout)
	var r explain.BucketReport
	require.NoError(t, json.Unmarshal([]byte(c.stdout), &r))
	assert.Equal(t, "allow_all", r.Answer)
	assert.Equal(t, "edge.free", r.Rule.Path)

	for _, tc := range []struct{ bucket, msg string }{
		{"{", "-explain-bucket: explain: a bucket is"},
		{`{"domain":"edge","descriptors":[]}`, `-explain-bucket: explain: a bucket is {"domain": "…", "bucket": {"key": "value", …}} in JSON: json: unknown field "descriptors"`},
		{filepath.Join(dir, "missing.json"), "-explain-bucket: open " + filepath.Join(dir, "missing.json")},
	} {
		c = runCheck(t, nil, "", "-explain-bucket", tc.bucket, dir)
		assert.Equal(t, ExitFailed, c.code, tc.bucket)
		assert.True(t, strings.HasPrefix(c.stdout, tc.msg), "%s:\n%s", tc.bucket, c.stdout)
		assert.True(t, strings.HasSuffix(c.stdout, "failed: 1 error\n"), c.stdout)
	}

	c = runCheck(t, nil, "", "-explain", loginRequest, "-explain-bucket", loginBucket, dir)
	assert.Equal(t, ExitUsage, c.code)
	assert.Contains(t, c.stderr, "check: -explain and -explain-bucket: one of them")
}
