package xds

import (
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/option"
)

// Backoff spaces the attempts to reach the management server: the n-th
// wait in a row (n from 0) is Initial·2ⁿ, at most Max, then spread at
// random over ±RandomFactor of itself when Jitter is on, so that replicas
// that lost the server together do not come back together. The zero value
// is not valid; see Validate.
type Backoff struct {
	// Initial is the first wait.
	Initial time.Duration
	// Max bounds the wait before the spread.
	Max time.Duration
	// RandomFactor, in [0, 1], is how far the spread reaches either way.
	RandomFactor float64
	// Jitter turns the spread on.
	Jitter bool
}

// DefaultBackoff returns a server's Backoff: a second, doubling up to 30s,
// spread over ±50%.
func DefaultBackoff() Backoff {
	return Backoff{Initial: time.Second, Max: 30 * time.Second, RandomFactor: 0.5, Jitter: true}
}

// Validate reports a Backoff that cannot be used, naming the field
// (option.Error).
func (b Backoff) Validate() error {
	var err error
	switch {
	case b.Initial <= 0:
		err = option.Errorf("Initial", "must be positive, not %s", b.Initial)
	case b.Max < b.Initial:
		err = option.Errorf("Max", "%s is below the initial interval %s", b.Max, b.Initial)
	case !(b.RandomFactor >= 0 && b.RandomFactor <= 1):
		err = option.Errorf("RandomFactor", "must be in [0, 1], not %v", b.RandomFactor)
	}
	if err != nil {
		return fmt.Errorf("xds: backoff %w", err)
	}
	return nil
}

// Delay returns the wait before attempt n+1 after n failures in a row (n ≥
// 0). random returns a number in [0, 1); it is called only with Jitter on.
func (b Backoff) Delay(n int, random func() float64) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter && b.RandomFactor > 0 {
		spread := float64(d) * b.RandomFactor
		d = time.Duration(float64(d) - spread + 2*spread*random())
	}
	return d
}
