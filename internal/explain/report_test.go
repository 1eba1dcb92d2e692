package explain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// loadSettings returns the settings of the variables env, read as the
// server reads its environment, and of no other variable.
func loadSettings(env map[string]string) (settings.Settings, error) {
	return settings.Load(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
}

// TestReportSays what shards, overrides, quota_mode, charges and
// shadow mode do, in the text people read.
func TestReportSays(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "x.yaml", Data: []byte(`domain: x
descriptors:
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, shards: 4}
  - key: tokens
    quota_mode: true
    charge: debt
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: sliding_window_log}
`)}}, config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)
	s, err := loadSettings(map[string]string{"RLS_BACKEND": "redis", "RLS_KEY_PREFIX": "rl:"})
	require.NoError(t, err)
	r, err := Request(cfg, []byte(`{"domain":"x","descriptors":[
		{"entries":[{"key":"hot","value":"h"}]},
		{"entries":[{"key":"tokens","value":"t"}],"hitsAddend":"250"},
		{"entries":[{"key":"trial","value":"u"}]},
		{"entries":[{"key":"hot","value":"h"}],"limit":{"requestsPerUnit":7,"unit":"MINUTE"}},
		{"entries":[{"key":"nobody","value":"n"}],"hitsAddend":"0"}]}`), s, time.Unix(1_800_000_000, 0))
	require.NoError(t, err)
	text := r.Text()
	for _, want := range []string{
		"domain x\n",
		"  limit 10 per 1 second, token_bucket, burst 10: take 1\n" +
			"    split over 4 shards whose limits add up to 10: a take goes to one at random and may try one other before it is denied\n" +
			"    shard 0: 3 per 1 second\n" +
			"      key rl:{x|hot=h|token_bucket:1#0} (slot ",
		"    shard 3: 2 per 1 second\n      key rl:{x|hot=h|token_bucket:1#3} (slot ",
		"  quota_mode: over its limit the descriptor is reported OVER_LIMIT, but denies the request only when every quota descriptor of it is over\n" +
			"  limit 100 per 1 minute, fixed_window: charge 250\n" +
			"    charge: the hits are usage already spent, recorded even past the limit and never given back; what passes the limit is owed to later windows\n" +
			"    key rl:{x|tokens=t|fixed_window:60} (slot ",
		"  limit 1 per 1 minute, sliding_window_log, shadow: take 1\n    shadow_mode: a denial is counted in the metrics, and the descriptor answered OK\n",
		"descriptors[3] hot=h\n  hot matched its key alone at x.yaml:3\n  rule x.hot at x.yaml:3\n" +
			"  the request's own limit (descriptor.limit) replaces the rule's limits, with the algorithm and shards of its first\n" +
			"  limit 7 per 1 minute, token_bucket, burst 7: take 1\n",
		"descriptors[4] nobody=n\n  no rule: no descriptor of key \"nobody\" at the top of the domain (keys \"hot\", \"tokens\", \"trial\")\n  no limit applies: the descriptor is answered OK\n",
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "backend memory")
	assert.Equal(t, "x|hot=h|token_bucket:1#2", r.Descriptors[0].Limits[0].Shards[2].HashTag)
	assert.Equal(t, "charge", r.Descriptors[1].Limits[0].Op)
}
