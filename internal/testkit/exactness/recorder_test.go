package exactness

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestRecorder(t *testing.T) {
	limits := lim(algorithms.FixedWindow, 10, time.Second, 0)
	r := NewRecorder(limits)
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Go(func() {
			for i := range 100 {
				r.Add(by(admit(Take, 1, float64(100*i+k), float64(100*i+k)+0.5), 0, k))
			}
		})
	}
	wg.Wait()
	lowered := Limit{Limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Window: time.Second}}
	r.Reload("l", lowered, at(1), at(2))
	r.Loss(at(3), at(4))
	assert.Equal(t, lowered, r.Limit("l"))
	assert.Equal(t, 800, r.Len())

	h := r.History()
	require.Len(t, h.Calls, 800)
	for i := 1; i < len(h.Calls); i++ {
		assert.False(t, h.Calls[i].Sent.Before(h.Calls[i-1].Sent), "the calls are in the order they were sent")
	}
	assert.Equal(t, limits, h.Limits, "the limits at the start")
	assert.Equal(t, []Reload{{Limit: "l", To: lowered, Before: at(1), After: at(2)}}, h.Reloads)
	assert.Equal(t, []Loss{{Before: at(3), After: at(4)}}, h.Losses)

	r.Add(admit(Take, 1, 0, 1))
	assert.Len(t, h.Calls, 800, "a history is a copy")
}

func TestCallString(t *testing.T) {
	c := by(left(deny(Take, 3, 1, 2.5), 7), 1, 4)
	assert.Equal(t, "r1/c4 l take 3 [22:13:20.001000, 22:13:20.002500] → OVER_LIMIT remaining 7 reset 0s", c.String())
	c.Err = assert.AnError
	assert.Contains(t, c.String(), "error: "+assert.AnError.Error())
	assert.Equal(t, "refund", Refund.String())
}

func TestReport(t *testing.T) {
	vs := []Violation{
		{Check: Denial, Limit: "l", From: at(0), To: at(1), Excess: 2, Detail: "two", Calls: takes(8, 0, 1)},
		{Check: Denial, Limit: "l", From: at(0), To: at(1), Excess: 5, Detail: "five"},
		{Check: Admitted, Limit: "l", From: at(0), To: at(1), Excess: 1, Detail: "one"},
	}
	out := Report(vs, 1)
	assert.Contains(t, out, "1 admitted violations (worst by 1)")
	assert.Contains(t, out, "2 false denial violations (worst by 5)")
	assert.Contains(t, out, "five")
	assert.NotContains(t, out, "two", "only the worst")
	assert.Contains(t, out, "… and 1 more")
	assert.Contains(t, vs[0].String(), "8 calls, the first and last three")
	assert.Equal(t, 2, Count(vs, Denial))
	assert.EqualValues(t, 5, Worst(vs, Denial))
	assert.Equal(t, "no violations", Report(nil, 1))
}
