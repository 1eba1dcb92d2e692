package explain

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
)

// bucketLimits hold a rule of each answer of the quota service.
const bucketLimits = `domain: q
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: fixed_window}
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 90}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: sliding_window_log}
  - {key: free, rate_limit: {unlimited: true}}
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
    rate_limits: [{unit: second, requests_per_unit: 100}]
  - {key: burst, rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}}
`

// TestBucketSays what the quota service does with a bucket id of each kind
// of rule: the descriptor it stands for, the rule, and the answer with its
// limit and keys, or why there is none.
func TestBucketSays(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "q.yaml", Data: []byte(bucketLimits)}}, config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)
	s, err := loadSettings(map[string]string{"RLS_BACKEND": "redis", "RLS_KEY_PREFIX": "rl:"})
	require.NoError(t, err)
	now := time.Unix(1_800_000_000, 0)
	explain := func(body string) *BucketReport {
		t.Helper()
		r, err := Bucket(cfg, []byte(body), s, now)
		require.NoError(t, err, body)
		return r
	}

	// The id's entries in the order of their keys: the descriptor
	// tenant=acme user=u1, whatever order the JSON gives them in.
	r := explain(`{"domain":"q","bucket":{"user":"u1","tenant":"acme"}}`)
	assert.Equal(t, "grant", r.Answer)
	assert.Equal(t, []Entry{{"tenant", "acme"}, {"user", "u1"}}, r.Entries)
	assert.Equal(t, &Grant{Algorithm: "token_bucket", RequestsPerUnit: 60, Unit: "minute", UnitMultiplier: 1, Burst: 90,
		Identity: "q|tenant=acme|user=u1|token_bucket:60", Keys: []string{"rl:{q|tenant=acme|user=u1|token_bucket:60}"},
		HashTag: "q|tenant=acme|user=u1|token_bucket:60", Slot: r.Grant.Slot}, r.Grant)
	assert.Equal(t, `domain q
bucket {"tenant":"acme","user":"u1"}: the descriptor tenant=acme user=u1
  tenant matched its key alone at q.yaml:3
  user matched its key alone at q.yaml:6
  rule q.tenant.user at q.yaml:6
  answer: grants of hits reserved on 60 per 1 minute, token_bucket, burst 90
    key rl:{q|tenant=acme|user=u1|token_bucket:60} (slot `+strconv.Itoa(r.Grant.Slot)+`)
  a grant is k hits reserved on the limit in one backend call, in the state that RateLimitService counts the same entries in, and sent as a token bucket of k tokens that does not refill: grants never add up past the limit
`, r.Text())

	r = explain(`{"domain":"q","bucket":{"tenant":"acme"}}`)
	assert.Equal(t, "rl:{q|tenant=acme|fixed_window:60}:w30000000", r.Grant.Keys[0], "the window of now")
	assert.Contains(t, r.Text(), "  a grant ends a second before its window does: none is made in a window's last 2 seconds\n")

	// A rule in shadow mode never denies: ALLOW_ALL, its usage charged.
	r = explain(`{"domain":"q","bucket":{"trial":"t"}}`)
	assert.Equal(t, "record", r.Answer)
	assert.Contains(t, r.Text(), "  answer: ALLOW_ALL, the usage reported charged to 1 per 1 minute, sliding_window_log\n")
	assert.Contains(t, r.Effects, "shadow_mode: the bucket is assigned ALLOW_ALL, for an hour at a time, and what the Envoys report they allowed is charged to the limit, where RateLimitService counts the same entries")

	r = explain(`{"domain":"q","bucket":{"burst":"b"}}`)
	assert.Equal(t, "grant", r.Answer)
	assert.Contains(t, r.Text(), "    short of the limit: a burst of 2s of its rate (grants admit all it refills only with 10s or more: two of Envoy's report intervals)\n")

	r = explain(`{"domain":"q","bucket":{"free":"f"}}`)
	assert.Equal(t, "allow_all", r.Answer)
	assert.Nil(t, r.Grant)
	assert.Contains(t, r.Text(), "  rule q.free at q.yaml:11\n  answer: ALLOW_ALL\n  unlimited: the bucket is assigned ALLOW_ALL, for an hour at a time, and counted nowhere\n")

	r = explain(`{"domain":"q","bucket":{"api_key":"k"}}`)
	assert.Equal(t, "no_assignment", r.Answer)
	assert.Equal(t, []string{
		"2 limits (a grant is reserved on one)",
		"a sliding_window_counter of 1s (a grant lives whole seconds and ends 1s before its window: it needs a window of 3s or more)",
	}, r.Why)
	assert.Contains(t, r.Text(), "  rule q.api_key at q.yaml:12\n  answer: no assignment, as a grant cannot count on the rule:\n"+
		"    2 limits (a grant is reserved on one)\n    a sliding_window_counter of 1s")

	r = explain(`{"domain":"q","bucket":{"team":"t"}}`)
	assert.Equal(t, "no_assignment", r.Answer)
	assert.Nil(t, r.Rule)
	assert.Equal(t, `domain q
bucket {"team":"t"}: the descriptor team=t
  no rule: no descriptor of key "team" at the top of the domain (keys "api_key", "burst", "free", "tenant", "trial")
  answer: no assignment
  no action is sent: the Envoy's no_assignment_behavior decides the bucket's requests
`, r.Text())

	// A server that serves no RLQS says so.
	off, err := loadSettings(map[string]string{"RLS_RLQS": "false"})
	require.NoError(t, err)
	r, err = Bucket(cfg, []byte(`{"domain":"q","bucket":{"tenant":"acme"}}`), off, now)
	require.NoError(t, err)
	assert.False(t, r.Served)
	assert.Contains(t, r.Text(), "(backend memory: the keys are those RLS_BACKEND=redis would use)\n")
	assert.Contains(t, r.Text(), "  RLS_RLQS=false: this server serves no RLQS")

	data, err := json.Marshal(explain(`{"domain":"q","bucket":{"free":"f"}}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"domain":"q","backend":"redis","served":true,"bucket":{"free":"f"},"entries":[{"key":"free","value":"f"}],
		"steps":[{"key":"free","value":"f","by":"key","file":"q.yaml","line":11}],"rule":{"path":"q.free","file":"q.yaml","line":11},
		"answer":"allow_all","effects":["unlimited: the bucket is assigned ALLOW_ALL, for an hour at a time, and counted nowhere"]}`, string(data))
}

// TestParseBucketRefuses what is not a bucket id and its domain.
func TestParseBucketRefuses(t *testing.T) {
	for body, why := range map[string]string{
		`{`: "unexpected EOF",
		`{"domain":"q","bucket":{"k":"v"},"x":1}`:  `json: unknown field "x"`,
		`{"domain":"q","bucket":{"k":1}}`:          "cannot unmarshal number",
		`{"domain":"","bucket":{"k":"v"}}`:         "the domain is empty",
		`{"domain":"q"}`:                           "the bucket has no entries",
		`{"domain":"q","bucket":{"":"v"}}`:         "the bucket has an empty key",
		`{"domain":"q","bucket":{"k":"v"}} {}`:     "more than one JSON value",
		`{"domain":"q","descriptors":[{"k":"v"}]}`: `json: unknown field "descriptors"`,
	} {
		_, err := ParseBucket([]byte(body))
		assert.ErrorIs(t, err, ErrNotBucketJSON, body)
		assert.ErrorContains(t, err, why, body)
	}
	req, err := ParseBucket([]byte(`{"domain":"q","bucket":{"k":"v","j":""}}`))
	require.NoError(t, err)
	assert.Equal(t, BucketRequest{Domain: "q", Bucket: map[string]string{"k": "v", "j": ""}}, req)
}
