package rate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutcomesFollowTheError: the error of a failed call carries its
// Outcomes through the errors that wrap it; a follower gets what was
// reported before it followed at once, and every later report, each
// outcome once.
func TestOutcomesFollowTheError(t *testing.T) {
	o := &Outcomes{}
	o.Report([]Outcome{{Fate: NotApplied}})
	err := fmt.Errorf("layer: %w", Unsettled(fmt.Errorf("redisx: %w", context.DeadlineExceeded), o))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "layer: redisx: context deadline exceeded", err.Error())
	require.Same(t, o, OutcomesOf(err))

	var a, b []Fate
	OutcomesOf(err).Follow(func(out []Outcome) {
		for _, x := range out {
			a = append(a, x.Fate)
		}
	})
	o.Report([]Outcome{{Fate: Applied}, {Fate: Unknown}})
	OutcomesOf(err).Follow(func(out []Outcome) {
		for _, x := range out {
			b = append(b, x.Fate)
		}
	})
	o.Report(nil)
	assert.Equal(t, []Fate{NotApplied, Applied, Unknown}, a)
	assert.Equal(t, []Fate{NotApplied, Applied, Unknown}, b)

	assert.Nil(t, OutcomesOf(errors.New("plain")))
	assert.Nil(t, OutcomesOf(nil))
	OutcomesOf(nil).Follow(func([]Outcome) { t.Error("nothing to follow") })
}
