package test

import (
	"testing"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// TestExactnessWithoutLeases plays a generated schedule on every algorithm
// with leases off (RLS_LEASES=false), on one replica or two by the seed,
// and holds it as strictly as the TestExactnessSchedules tests hold one
// replica: without leases the Redis backend is exact, within the deny
// cache's and the fixed window's stated behaviour, so this is the checks'
// control. A violation here is a defect of the server without leases, or
// of the checks.
func TestExactnessWithoutLeases(t *testing.T) {
	for _, alg := range algorithms.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			seed := exactnessSeed()
			replicas := 1 + int(seed%2)
			s := newSchedule(seed, alg, replicas, exactnessLength)
			t.Logf("%d replicas, %s", replicas, s)
			run := startExactnessRun(t, replicas, map[string]string{"RLS_LEASES": "false"}, s.rules())
			s.play(t.Context(), run)
			run.judge(exactnessTolerance(run.history(), alg, replicas, 0), seed)
		})
	}
}
