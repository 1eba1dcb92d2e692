package lease

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// TestLeasesOnRedisAdmitExactlyTheLimit runs two replicas' leases, each
// over its own deny cache and Redis client as a server stacks them, on one
// Redis, and races 128 callers over them for 3 000 takes of a limit of
// 1 000 an hour, many times for each algorithm: no race admits more than
// 1 000, and once the leases held when it ended are given back, and the
// denials remembered meanwhile forgotten, exactly 1 000 have been admitted.
//
// The end of a limit is where leases and denials meet. A lease a replica
// takes near it may be denied and, on the fixed window, push the count
// past the limit for the moment before it is given back, so that the other
// replica's takes meet a count that is too high: such a denial is
// transient, and is not remembered. A replica's takes that come while its
// own lease is on its way wait for it, rather than be denied the room it
// is about to hold.
func TestLeasesOnRedisAdmitExactlyTheLimit(t *testing.T) {
	rounds := 10
	if testing.Short() {
		rounds = 3
	}
	server := redistest.SharedStandalone(t)
	prefix := fmt.Sprintf("lease-test:%d:", time.Now().UnixNano())
	replicas := make([]rate.Limiter, 2)
	for i := range replicas {
		backend, err := redisx.NewLimiter(server.Client(t), 2, redisx.WithKeyPrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(backend.Close)
		cache, err := denycache.New(backend, denycache.Options{MaxEntries: 1024})
		require.NoError(t, err)
		l, err := New(cache, Options{Time: tau, MinHits: minHits})
		require.NoError(t, err)
		t.Cleanup(l.Close)
		replicas[i] = l
	}
	for _, alg := range leased {
		t.Run(alg.String(), func(t *testing.T) {
			if into := time.Since(time.Now().Truncate(time.Hour)); into > time.Hour-time.Minute {
				// A window that ends during the rounds admits its limit again.
				time.Sleep(time.Hour - into)
			}
			lim := algorithms.Limit{Algorithm: alg, Requests: 1000, Window: time.Hour}
			var races []int
			for round := range rounds {
				op := take(fmt.Sprintf("%s-%d", alg, round), lim, 1)
				// A denial is remembered for at most a second.
				race, later := raceThenDrain(t, replicas, op, 3000, time.Second+3*tau)
				assert.Equal(t, 1000, race+later, "round %d: admitted in the race (%d) and after it", round, race)
				races = append(races, race)
			}
			t.Logf("admitted in each race: %v", races)
		})
	}
}
