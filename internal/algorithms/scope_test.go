package algorithms

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// hold counts its releases.
type hold struct{ released *int }

func (h hold) Release() { *h.released++ }

// TestScopeHoldsUntilItEnds: what a layer holds for a scope is held for
// every call made with its context, or one derived from it, and released
// once, when the scope ends; without a scope, or after it ended, nothing is
// held.
func TestScopeHoldsUntilItEnds(t *testing.T) {
	n := 0
	h := hold{&n}
	ctx, scope := WithScope(context.Background())
	derived, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	assert.Same(t, scope, ScopeOf(derived))
	assert.False(t, ScopeOf(derived).Holds(h))
	assert.True(t, ScopeOf(derived).Hold(h))
	assert.True(t, ScopeOf(ctx).Holds(h))
	assert.False(t, ScopeOf(ctx).Holds(hold{new(int)}), "another hold")
	scope.End()
	assert.Equal(t, 1, n)
	assert.False(t, scope.Holds(h))
	assert.False(t, scope.Hold(h), "ended: the caller releases")

	var none *Scope = ScopeOf(context.Background())
	assert.Nil(t, none)
	assert.False(t, none.Holds(h))
	assert.False(t, none.Hold(h))
	assert.Equal(t, 1, n)
}
