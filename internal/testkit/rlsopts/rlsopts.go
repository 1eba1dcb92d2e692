// Package rlsopts gives the tests of the layers around rls.Service (and of
// what else builds one without the server's settings) the rls.Options they
// build it with (their limits' options are rlstest.Config's). They are the
// tests' own values, not the server's: the server's come from its settings
// (internal/settings), whose tags hold the defaults. internal/rls's own
// tests, which this package cannot serve without an import cycle (it
// imports rls), have theirs (testOptions).
package rlsopts

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// Service returns rls.Options that a Service accepts, which each test changes
// where it tests an option: a sliding_window_counter for overrides of
// unmatched descriptors, refunds on, the failure mode error, a second for
// callers without a deadline, a 2ms reserve, and bounds that the tests
// reach only where they mean to.
func Service() rls.Options {
	return rls.Options{
		DefaultAlgorithm: algorithms.SlidingWindowCounter,
		RefundOnDeny:     true,
		BackendTimeout:   time.Second,
		DeadlineReserve:  2 * time.Millisecond,
		NearLimitRatio:   0.8,
		Bounds: rls.Bounds{
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
