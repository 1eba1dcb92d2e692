package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// warningsOf parses the files with opts and returns their warnings as
// strings, "kind file:line:column: field: message" cut at the message's
// first colon.
func warningsOf(t *testing.T, opts Options, files ...File) []string {
	t.Helper()
	c, err := Parse(files, opts)
	require.NoError(t, err)
	var out []string
	for _, w := range c.Warnings() {
		msg, _, _ := strings.Cut(w.String(), " never matched")
		out = append(out, string(w.Kind)+" "+msg)
	}
	return out
}

func TestWarningsShadowedDescriptors(t *testing.T) {
	f := File{Name: "s.yaml", Data: yml(`
domain: d
descriptors:
  - {key: path, value: "/api/*", rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: path, value: "/api/v1/*", rate_limit: {unit: second, requests_per_unit: 2}}
  - {key: path, value: "/api/v1/users", rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: path, value: "/*/x", rate_limit: {unit: second, requests_per_unit: 4}}
  - {key: path, value: "/a*/x", rate_limit: {unit: second, requests_per_unit: 5}}
  - key: user
    descriptors:
      - {key: ip, value: "*", rate_limit: {unit: second, requests_per_unit: 1}}
      - key: ip
        rate_limit: {unit: second, requests_per_unit: 2}
        descriptors:
          - {key: deeper, value: "a*", rate_limit: {unit: second, requests_per_unit: 1}}
          - {key: deeper, value: "ab*", rate_limit: {unit: second, requests_per_unit: 1}}
      - {key: ip, value: "10.*", rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: ok, value: "a*b", rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: ok, value: "a*", rate_limit: {unit: second, requests_per_unit: 1}}
`)}
	assert.Equal(t, []string{
		`shadowed s.yaml:4:5: descriptors[1]: value "/api/v1/*" of key "path" is`,
		`shadowed s.yaml:7:5: descriptors[4]: value "/a*/x" of key "path" is`,
		`shadowed s.yaml:11:9: descriptors[5].descriptors[1]: key-only descriptor of key "ip" is`,
		`shadowed s.yaml:16:9: descriptors[5].descriptors[2]: value "10.*" of key "ip" is`,
	}, warningsOf(t, testOptions(), f), "an exact value is never shadowed, nor what lies under a shadowed descriptor, nor a*b by a later a*")

	c, err := Parse([]File{f}, testOptions())
	require.NoError(t, err)
	w := c.Warnings()[0]
	assert.Equal(t, Warning{Kind: WarnShadowed, File: "s.yaml", Line: 4, Column: 5, Field: "descriptors[1]",
		Msg: `value "/api/v1/*" of key "path" is never matched: the wildcard "/api/*" (line 3) matches every value it does and is tried first; remove one, or make the earlier one narrower`}, w)

	// The most specific wildcard is tried first: "/api/v1/*" before
	// "/api/*", and "ab*" before "a*". "*" still shadows the key alone.
	opts := testOptions()
	opts.WildcardPrecedence = MostSpecificWildcard
	assert.Equal(t, []string{
		`shadowed s.yaml:11:9: descriptors[5].descriptors[1]: key-only descriptor of key "ip" is`,
	}, warningsOf(t, opts, f))
}

func TestWarningsShadowedAcrossMergedFiles(t *testing.T) {
	opts := testOptions()
	opts.MergeDomains = true
	got := warningsOf(t, opts,
		File{Name: "a.yaml", Data: yml("domain: d\ndescriptors:\n  - {key: k, value: \"*\", rate_limit: {unit: second, requests_per_unit: 1}}\n")},
		File{Name: "b.yaml", Data: yml("domain: d\ndescriptors:\n  - {key: k, value: \"x*\", rate_limit: {unit: second, requests_per_unit: 1}}\n")})
	assert.Equal(t, []string{`shadowed b.yaml:3:5: descriptors[0]: value "x*" of key "k" is`}, got)
	c, err := Parse([]File{
		{Name: "a.yaml", Data: yml("domain: d\ndescriptors:\n  - {key: k, value: \"*\", rate_limit: {unit: second, requests_per_unit: 1}}\n")},
		{Name: "b.yaml", Data: yml("domain: d\ndescriptors:\n  - {key: k, value: \"x*\", rate_limit: {unit: second, requests_per_unit: 1}}\n")},
	}, opts)
	require.NoError(t, err)
	assert.Contains(t, c.Warnings()[0].Msg, `the wildcard "*" (a.yaml:3)`)
}

func TestWarningsMergeKeyDropsAListOrFields(t *testing.T) {
	c, err := Parse([]File{{Name: "m.yaml", Data: yml(`
domain: d
descriptors:
  - &login
    key: path
    value: /login
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
    descriptors:
      - {key: remote_address, rate_limit: {unit: minute, requests_per_unit: 5}}
  - <<: *login
    value: /signup
    descriptors:
      - {key: user, rate_limit: {unit: minute, requests_per_unit: 5}}
  - <<: *login
    value: /logout
    rate_limit: {unit: minute, requests_per_unit: 100}
  - <<: *login
    value: /reset
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 2}
    descriptors: []
  - <<: [*login]
    value: /again
    descriptors: [{key: user, rate_limit: {unit: minute, requests_per_unit: 5}}]
`)}}, testOptions())
	require.NoError(t, err)
	var got []string
	for _, w := range c.Warnings() {
		assert.Equal(t, WarnMergeKey, w.Kind)
		got = append(got, w.String())
	}
	assert.Equal(t, []string{
		"m.yaml:11:5: descriptors[1].descriptors: replaces the list that the merge key (<<) at line 9 brings in: its item is dropped, as a merge key never joins lists; restate them here",
		"m.yaml:15:5: descriptors[2].rate_limit: replaces the mapping that the merge key (<<) at line 13 brings in: its algorithm and burst are dropped, as a merge key never joins nested mappings; restate them here",
		"m.yaml:19:5: descriptors[3].descriptors: replaces the list that the merge key (<<) at line 16 brings in: its item is dropped, as a merge key never joins lists; restate them here",
		"m.yaml:22:5: descriptors[4].descriptors: replaces the list that the merge key (<<) at line 20 brings in: its item is dropped, as a merge key never joins lists; restate them here",
	}, got, "a scalar replaced, and a mapping restated whole, are no loss")
}

func TestWarningsLimitsAtABound(t *testing.T) {
	f := File{Name: "b.yaml", Data: yml(`
domain: d
descriptors:
  - {key: a, rate_limit: {unit: year, requests_per_unit: 10}}
  - {key: b, rate_limit: {unit: month, requests_per_unit: 10}}
  - {key: c, rate_limit: {unit: month, requests_per_unit: 10, algorithm: sliding_window_log}}
  - {key: d, rate_limit: {unit: second, requests_per_unit: 5000, algorithm: sliding_window_log}}
  - {key: e, rate_limit: {unit: second, requests_per_unit: 5000, algorithm: token_bucket}}
  - key: f
    rate_limit: {unit: second, requests_per_unit: 4, shards: 8}
    rate_limits:
      - {unit: minute, requests_per_unit: 100, shards: 4}
      - {unit: hour, requests_per_unit: 100, algorithm: token_bucket, burst: 1, shards: 2}
`)}
	opts := testOptions()
	assert.Equal(t, []string{
		"shards b.yaml:9:62: descriptors[5].rate_limit.shards: 8 shards, but a limit of 4 hits has too few to share: it is split over 4 keys, one hit each",
		"shards b.yaml:12:89: descriptors[5].rate_limits[1].shards: 2 shards, but a limit of 1 hits has too few to share: it is not split",
	}, warningsOf(t, opts, f), "without bounds to warn at, only shards")

	opts.WarnLifetime, opts.WarnLogSize = 1488*time.Hour, 1000
	got := warningsOf(t, opts, f)
	require.Len(t, got, 4, "a month of a counter lives 60 days, of a log 30")
	assert.Equal(t, "lifetime b.yaml:3:26: descriptors[0].rate_limit: a sliding_window_counter of 1 year keeps its state, and its Redis keys, for 730 days after the last hit, longer than the 62 days a limit override may (RLS_MAX_OVERRIDE_LIFETIME): one key per value stays that long; a shorter window forgets sooner", got[0])
	assert.Equal(t, "log_size b.yaml:6:60: descriptors[3].rate_limit.requests_per_unit: a sliding_window_log keeps one entry per hit: up to 5000 in each key's log, more than the 1000 a limit override may have (RLS_MAX_OVERRIDE_LOG_SIZE); sliding_window_counter or token_bucket keep a few numbers instead", got[1])
	assert.Contains(t, got[2], "shards b.yaml:9:62:")
	assert.Contains(t, got[3], "shards b.yaml:12:89:")
}

// TestWarningsInPiecesAndWhole: a file read in pieces warns as the same
// file read whole (a byte order mark makes it be read whole).
func TestWarningsInPiecesAndWhole(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "  - {key: k, value: \"v%d*\", rate_limit: {unit: second, requests_per_unit: 1, shards: 2}}\n", i)
	}
	data := []byte(b.String())
	_, ok := cutPieces(data)
	require.True(t, ok)
	pieces := warningsOf(t, testOptions(), File{Name: "p.yaml", Data: data})
	whole := warningsOf(t, testOptions(), File{Name: "p.yaml", Data: append([]byte("\xef\xbb\xbf"), data...)})
	assert.True(t, slices.Equal(whole, pieces), "the same warnings")
	assert.Equal(t, 3000+2990, len(pieces), "every limit's shards, and every value but v0* to v9*, which v1* to v9* shadow")
}
