package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

func TestLimitsMatchEveryKindOfValue(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeLimits(&b, "bench"))
	cfg, err := config.Parse([]config.File{{Name: "limits.yaml", Data: b.Bytes()}}, config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)

	ks := newKeySpace(liveValuePrefix, "run1", 2, true)
	hot := newKeySpace(hotValuePrefix, "run1", 2, false)
	binding := newKeySpace(bindingValuePrefix, "run1", 1, false)
	quota := newKeySpace(quotaValuePrefix, "run1", 1, false)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for _, tt := range []struct {
				value    string
				requests uint64
				window   time.Duration
			}{
				{ks.live[0], liveLimit(alg), 24 * time.Hour},
				{ks.live[1], liveLimit(alg), 24 * time.Hour},
				{ks.exhausted[0], 1, 24 * time.Hour},
				{ks.exhausted[1], 1, 24 * time.Hour},
				{hot.live[0], hotLimit(alg), time.Second},
				{hot.live[1], hotLimit(alg), time.Second},
				{binding.live[0], bindingLimit, time.Second},
				{quota.live[0], quotaLimit, quotaWindow},
			} {
				m, ok := cfg.Match("bench", []rate.Entry{{Key: alg.String(), Value: tt.value}})
				require.True(t, ok, "value %s matches", tt.value)
				require.Len(t, m.Rule.Limits, 1)
				l := m.Rule.Limits[0].Limit
				assert.Equal(t, alg, l.Algorithm)
				assert.Equal(t, tt.requests, l.Requests, "value %s", tt.value)
				assert.Equal(t, tt.window, l.Window, "value %s", tt.value)
				assert.Zero(t, l.Burst, "value %s: a bucket's burst is its limit", tt.value)
				// Each value is a limit of its own.
				assert.Equal(t, tt.value, m.Key.Entries[0].Value)
			}
		})
	}
}

// TestPeerLimits: the peer's limits, read as ratewarden reads them (it reads
// envoyproxy/ratelimit's files unchanged), give its fixed window the limits
// that ratewarden's fixed window has for live and hot values.
func TestPeerLimits(t *testing.T) {
	cfg, err := config.Parse([]config.File{{Name: "peer.yaml", Data: []byte(peerLimits())}}, config.Options{DefaultAlgorithm: algorithms.FixedWindow})
	require.NoError(t, err)
	for _, tt := range []struct {
		value    string
		requests uint64
		window   time.Duration
	}{
		{newKeySpace(liveValuePrefix, "r", 1, false).live[0], liveLimit(algorithms.FixedWindow), 24 * time.Hour},
		{newKeySpace(hotValuePrefix, "r", 1, false).live[0], hotLimit(algorithms.FixedWindow), time.Second},
	} {
		m, ok := cfg.Match(defaultDomain, []rate.Entry{{Key: algorithms.FixedWindow.String(), Value: tt.value}})
		require.True(t, ok, "value %s matches", tt.value)
		require.Len(t, m.Rule.Limits, 1)
		l := m.Rule.Limits[0].Limit
		assert.Equal(t, tt.requests, l.Requests, "value %s", tt.value)
		assert.Equal(t, tt.window, l.Window, "value %s", tt.value)
	}
}
