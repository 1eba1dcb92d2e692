package main

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuantiles(t *testing.T) {
	us := func(vs ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range vs {
			ds = append(ds, time.Duration(v)*time.Microsecond)
		}
		return ds
	}
	tests := []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{"one value", us(7000), 0.99, 7 * time.Millisecond},
		{"small values are exact", us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.5, 5 * time.Microsecond},
		{"the largest", us(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 1, 10 * time.Microsecond},
		{"q 0 is the smallest", us(300, 100), 0, 100 * time.Microsecond},
		{"beyond an hour is an hour", []time.Duration{2 * time.Hour}, 1, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			for _, v := range tt.values {
				h.Record(v)
			}
			assert.InEpsilon(t, float64(tt.want), float64(h.Quantile(tt.q)), 1e-3)
		})
	}
}

func TestQuantilesWithinPrecision(t *testing.T) {
	// 1µs … 100ms in steps of 1µs: the q-quantile is q·100ms.
	h := NewHistogram()
	const n = 100_000
	for i := 1; i <= n; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	require.Equal(t, uint64(n), h.Count())
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := q * n * float64(time.Microsecond)
		assert.InEpsilon(t, want, float64(h.Quantile(q)), 1e-3, "q=%v", q)
	}
	assert.Equal(t, time.Microsecond, h.Min())
	assert.InEpsilon(t, float64(100*time.Millisecond), float64(h.Max()), 1e-3)
	assert.InEpsilon(t, float64(50*time.Millisecond), float64(h.Mean()), 1e-3)
}

func TestEmptyHistogram(t *testing.T) {
	h := NewHistogram()
	assert.Zero(t, h.Count())
	assert.Zero(t, h.Quantile(0.99))
	assert.Zero(t, h.Min())
	assert.Zero(t, h.Max())
	assert.Zero(t, h.Mean())
}

func TestNegativeDurationCountsAsZero(t *testing.T) {
	h := NewHistogram()
	h.Record(-time.Second)
	assert.Equal(t, time.Duration(0), h.Max())
	assert.Equal(t, uint64(1), h.Count())
}

func TestMergeEqualsOneHistogram(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	all := NewHistogram()
	parts := []*Histogram{NewHistogram(), NewHistogram(), NewHistogram()}
	for range 30_000 {
		d := time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		all.Record(d)
		parts[r.IntN(len(parts))].Record(d)
	}
	merged := NewHistogram()
	for _, p := range parts {
		p.MergeInto(merged)
	}
	assert.Equal(t, all.Count(), merged.Count())
	assert.Equal(t, all.Min(), merged.Min())
	assert.Equal(t, all.Max(), merged.Max())
	assert.Equal(t, all.Mean(), merged.Mean())
	for _, q := range []float64{0.01, 0.5, 0.99, 0.999} {
		assert.Equal(t, all.Quantile(q), merged.Quantile(q), "q=%v", q)
	}
}

func TestMergeWhileRecording(t *testing.T) {
	// One goroutine records while another merges snapshots, as the progress
	// line does; the race detector checks the access, the counts only grow.
	h := NewHistogram()
	const n = 50_000
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			h.Record(time.Duration(i) * time.Microsecond)
		}
	})
	var last uint64
	for range 50 {
		snap := NewHistogram()
		h.MergeInto(snap)
		require.GreaterOrEqual(t, snap.Count(), last)
		last = snap.Count()
	}
	wg.Wait()
	final := NewHistogram()
	h.MergeInto(final)
	assert.Equal(t, uint64(n), final.Count())
}
