package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
)

func TestLimitsMatchLiveAndExhaustedValues(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeLimits(&b, "bench"))
	cfg, err := config.Parse([]config.File{{Name: "limits.yaml", Data: b.Bytes()}}, config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)

	ks := newKeySpace("run1", 2, true)
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			for _, tt := range []struct {
				value    string
				requests uint64
			}{
				{ks.live[0], liveLimit(alg)},
				{ks.live[1], liveLimit(alg)},
				{ks.exhausted[0], 1},
				{ks.exhausted[1], 1},
			} {
				m, ok := cfg.Match("bench", []algorithms.Entry{{Key: alg.String(), Value: tt.value}})
				require.True(t, ok, "value %s matches", tt.value)
				require.Len(t, m.Rule.Limits, 1)
				l := m.Rule.Limits[0].Limit
				assert.Equal(t, alg, l.Algorithm)
				assert.Equal(t, tt.requests, l.Requests, "value %s", tt.value)
				assert.Equal(t, 24*time.Hour, l.Window)
				// Each value is a limit of its own.
				assert.Equal(t, tt.value, m.Key.Entries[0].Value)
			}
		})
	}
}
