package main

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketsTileTheRange(t *testing.T) {
	// Consecutive buckets meet exactly, from 0 to the largest int64.
	prevHi := int64(-1)
	for i := range histBuckets {
		lo, hi := bucketRange(i)
		require.Equal(t, prevHi+1, lo, "bucket %d starts where %d ended", i, i-1)
		require.GreaterOrEqual(t, hi, lo)
		if lo >= histSubBuckets {
			assert.LessOrEqual(t, float64(hi-lo+1)/float64(lo), 1.0/histHalf, "bucket %d is at most 1/64 of its values wide", i)
		}
		prevHi = hi
	}
	assert.Equal(t, int64(math.MaxInt64), prevHi)
}

func TestBucketOfIsInItsRange(t *testing.T) {
	values := []int64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<20 + 1, math.MaxInt64 - 1, math.MaxInt64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		values = append(values, r.Int64N(1<<r.IntN(63)+1))
	}
	for _, v := range values {
		i := bucketOf(v)
		lo, hi := bucketRange(i)
		require.True(t, lo <= v && v <= hi, "%d in bucket %d = [%d, %d]", v, i, lo, hi)
	}
}

func TestQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{"one value", []time.Duration{7 * time.Millisecond}, 0.99, 7 * time.Millisecond},
		{"small values are exact", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.5, 5},
		{"the largest", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 1, 10},
		{"q 0 is the smallest", []time.Duration{300, 100}, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistogram()
			for _, v := range tt.values {
				h.Record(v)
			}
			assert.Equal(t, tt.want, h.Quantile(tt.q))
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
		got := float64(h.Quantile(q))
		assert.InEpsilon(t, want, got, 1.0/histHalf, "q=%v", q)
	}
	assert.Equal(t, time.Microsecond, h.Min())
	assert.Equal(t, 100*time.Millisecond, h.Max())
	assert.InEpsilon(t, float64(50*time.Millisecond), float64(h.Mean()), 1e-4)
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
			h.Record(time.Duration(i))
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
