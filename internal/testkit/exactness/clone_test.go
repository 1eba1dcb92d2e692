package exactness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestCloneState(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: alg, Requests: 10, Window: time.Second}
			st := algorithms.NewState(alg)
			for i := range 4 {
				st.Take(l, at(float64(10*i)), 1)
			}
			st.Lease(l, at(50), 2, 100*time.Millisecond)
			c := cloneState(st)
			assert.Equal(t, st, c)
			// What one does, the other does not see.
			for i := range 6 {
				c.Take(l, at(60+float64(i)), 1)
			}
			c.Refund(l, at(70), 1, algorithms.Receipt{})
			assert.Equal(t, uint64(4), st.Take(l, at(80), 0).Remaining)
			assert.Equal(t, uint64(1), c.Take(l, at(80), 0).Remaining)
		})
	}
}
