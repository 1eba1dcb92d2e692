package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyPickers(t *testing.T) {
	const draws = 200_000
	tests := []struct {
		name     string
		dist     string
		keys     int
		hotShare float64
		// share0 is the expected share of key 0.
		share0 float64
	}{
		{"uniform", distUniform, 10, 0, 0.1},
		{"uniform over one key", distUniform, 1, 0, 1},
		{"zipf", distZipf, 1000, 0, 0.1794}, // 1 / Σ k^-1.1 for k ≤ 1000
		{"zipf over one key", distZipf, 1, 0, 1},
		{"hot", distHot, 100, 0.9, 0.9},
		{"hot over one key", distHot, 1, 0.5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newKeyPicker(tt.dist, tt.keys, tt.hotShare, rand.New(rand.NewPCG(5, 6)))
			require.NoError(t, err)
			counts := make([]int, tt.keys)
			for range draws {
				k := p.pick()
				require.True(t, k >= 0 && k < tt.keys, "key %d out of [0, %d)", k, tt.keys)
				counts[k]++
			}
			assert.InDelta(t, tt.share0, float64(counts[0])/draws, 0.01)
		})
	}
}

func TestHotSpreadsTheRestEvenly(t *testing.T) {
	p, err := newKeyPicker(distHot, 5, 0.6, rand.New(rand.NewPCG(7, 8)))
	require.NoError(t, err)
	counts := make([]int, 5)
	const draws = 100_000
	for range draws {
		counts[p.pick()]++
	}
	for k := 1; k < 5; k++ {
		assert.InDelta(t, 0.1, float64(counts[k])/draws, 0.01, "key %d", k)
	}
}

func TestKeyPickerErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(0, 0))
	for _, tt := range []struct {
		dist     string
		keys     int
		hotShare float64
		want     string
	}{
		{"gaussian", 10, 0, "-dist"},
		{distUniform, 0, 0, "-keys"},
		{distHot, 10, 1.5, "-hot-share"},
	} {
		_, err := newKeyPicker(tt.dist, tt.keys, tt.hotShare, r)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tt.want)
		assert.True(t, strings.HasPrefix(err.Error(), "loadgen: "))
	}
}

func TestKeySpace(t *testing.T) {
	ks := newKeySpace(liveValuePrefix, "r1", 3, true)
	assert.Equal(t, []string{"k.r1.0", "k.r1.1", "k.r1.2"}, ks.live)
	assert.Equal(t, []string{"x.r1.0", "x.r1.1", "x.r1.2"}, ks.exhausted)
	assert.Nil(t, newKeySpace(liveValuePrefix, "r1", 3, false).exhausted)
}
