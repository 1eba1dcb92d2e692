package redisx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// TestArgCacheIsBounded: limits named by requests cannot grow the cache of
// script arguments past maxCachedLimits, and what it answers is the limit's.
func TestArgCacheIsBounded(t *testing.T) {
	var c argCache
	for i := range 3 * maxCachedLimits {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: uint64(i + 1), Window: time.Minute, Burst: uint64(2*i + 3)}
		a := c.get(l)
		assert.Equal(t, []any{itoa(i + 1), "60000000", itoa(2*i + 3), itoa(int(l.MaxDebt()))}, []any{a.requests, a.window, a.capacity, a.debt})
		assert.Same(t, a, c.get(l), "met again, the arguments are not built again")
		assert.LessOrEqual(t, len(c.m), maxCachedLimits)
	}
	assert.Equal(t, "7", hitsArg(7))
	assert.Equal(t, "4294967296", hitsArg(1<<32))
}

func itoa(i int) string { return hitsArg(uint64(i)).(string) }
