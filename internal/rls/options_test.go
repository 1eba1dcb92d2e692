package rls

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
)

// testOptions returns the Options the tests build a Service with, which
// each test changes where it tests an option: a sliding_window_counter for
// overrides of unmatched descriptors, refunds on, a second for callers
// without a deadline, a 2ms reserve, and bounds that the tests reach only
// where they mean to. They are the tests' own values; the server's come
// from its settings.
func testOptions() Options {
	return Options{
		DefaultAlgorithm: algorithms.SlidingWindowCounter,
		RefundOnDeny:     true,
		BackendTimeout:   time.Second,
		DeadlineReserve:  2 * time.Millisecond,
		NearLimitRatio:   0.8,
		Bounds: Bounds{
			MaxDescriptors:       256,
			MaxEntries:           config.MaxDepth,
			MaxHits:              1_000_000_000,
			MaxLogHits:           100,
			MaxOverrideLogSize:   1000,
			MaxOverrideLifetime:  62 * 24 * time.Hour,
			MaxUnmatchedEntries:  16,
			MaxUnmatchedKeyBytes: 1024,
		},
	}
}
