package redisx

import (
	"strconv"
	"sync"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// limitArgs are the script arguments that depend on the limit alone (ARGV[3],
// [4], [8] and [10], see lua.go), formatted and boxed once, so that a
// decision does not format and box them again.
type limitArgs struct {
	requests, window, capacity, debt any
}

// maxCachedLimits bounds an argCache: limits that requests name (overrides)
// must not grow it without bound.
const maxCachedLimits = 4096

// argCache keeps the limitArgs of the limits met lately. Limits come from
// the configuration, so a few are met again and again; when the cache holds
// maxCachedLimits it forgets them all and starts again. The zero value is
// ready; it is safe for concurrent use.
type argCache struct {
	mu sync.RWMutex
	m  map[algorithms.Limit]*limitArgs
}

// get returns the arguments of l.
func (c *argCache) get(l algorithms.Limit) *limitArgs {
	c.mu.RLock()
	a := c.m[l]
	c.mu.RUnlock()
	if a != nil {
		return a
	}
	a = &limitArgs{
		requests: strconv.FormatUint(l.Requests, 10),
		window:   strconv.FormatInt(l.WindowMicros(), 10),
		capacity: strconv.FormatUint(l.Capacity(), 10),
		debt:     strconv.FormatUint(l.MaxDebt(), 10),
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedLimits {
		c.m = make(map[algorithms.Limit]*limitArgs)
	}
	c.m[l] = a
	c.mu.Unlock()
	return a
}

// smallHits are the hits arguments of 0 to 255 hits, boxed once: a request
// takes one hit, or a few.
var smallHits = func() (h [256]any) {
	for i := range h {
		h[i] = strconv.Itoa(i)
	}
	return h
}()

// hitsArg returns n as the script's ARGV[5].
func hitsArg(n uint64) any {
	if n < uint64(len(smallHits)) {
		return smallHits[n]
	}
	return strconv.FormatUint(n, 10)
}
