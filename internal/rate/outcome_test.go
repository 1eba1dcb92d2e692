package rate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOutcomesPassReportsToFollowers: every report is passed to each
// follower that followed before it, in the order they followed; a nil
// Outcomes takes reports and passes them to no one.
func TestOutcomesPassReportsToFollowers(t *testing.T) {
	var o Outcomes
	var order []string
	var a, b []Fate
	o.Report([]Outcome{{Fate: NotApplied}})
	o.Follow(func(out []Outcome) {
		order = append(order, "a")
		for _, x := range out {
			a = append(a, x.Fate)
		}
	})
	o.Report([]Outcome{{Fate: Applied}})
	o.Follow(func(out []Outcome) {
		order = append(order, "b")
		for _, x := range out {
			b = append(b, x.Fate)
		}
	})
	o.Report([]Outcome{{Fate: Unknown}})
	o.Report(nil)
	assert.Equal(t, []Fate{Applied, Unknown}, a)
	assert.Equal(t, []Fate{Unknown}, b)
	assert.Equal(t, []string{"a", "a", "b"}, order)

	var none *Outcomes
	none.Report([]Outcome{{Fate: Applied}})
}
