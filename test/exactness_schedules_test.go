package test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/testkit/exactness"
)

// exactnessLength is how long a generated schedule runs.
const exactnessLength = 2500 * time.Millisecond

// The TestExactnessSchedules tests play a generated schedule (see
// newSchedule) on an algorithm, with leases at their defaults
// (RLS_LEASE_TIME 50ms) and with RLS_LEASE_TIME=500ms, on one replica and
// on two or three sharing a Redis, and hold what the replicas answered to
// the rules of the algorithm (package exactness). One replica is held
// strictly: no hit past the limit, no false denial, the exact remaining,
// within what the server states (exactnessTolerance): a millisecond of
// timing noise, the lag of a sliding window log's lease (its hits are
// logged at the lease's end), the lease time after a FLUSHALL, and the
// fixed window's INCRBY (a denied take counts while it is decided).
// Several replicas are held to no hit past the limit, and to denials and
// remainings within what their leases may hold. A failure prints the seed
// and the command that replays it.

// TestExactnessSchedulesFixedWindow plays generated schedules on a
// fixed_window (see above).
func TestExactnessSchedulesFixedWindow(t *testing.T) { playSchedules(t, algorithms.FixedWindow) }

// TestExactnessSchedulesSlidingWindowLog plays generated schedules on a
// sliding_window_log (see above).
func TestExactnessSchedulesSlidingWindowLog(t *testing.T) {
	playSchedules(t, algorithms.SlidingWindowLog)
}

// TestExactnessSchedulesSlidingWindowCounter plays generated schedules on
// a sliding_window_counter (see above).
func TestExactnessSchedulesSlidingWindowCounter(t *testing.T) {
	playSchedules(t, algorithms.SlidingWindowCounter)
}

// TestExactnessSchedulesTokenBucket plays generated schedules on a
// token_bucket (see above).
func TestExactnessSchedulesTokenBucket(t *testing.T) { playSchedules(t, algorithms.TokenBucket) }

// playSchedules runs the subtests of a TestExactnessSchedules test: each
// lease time, on one replica and on several.
func playSchedules(t *testing.T, alg algorithms.Algorithm) {
	for _, tau := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(fmt.Sprintf("lease-%s", tau), func(t *testing.T) {
			for _, replicas := range []int{1, 0} {
				name := "1-replica"
				seed := exactnessSeed()
				if replicas == 0 {
					replicas = 2 + int(seed%2)
					name = "replicas"
				}
				t.Run(name, func(t *testing.T) { playSchedule(t, seed, alg, replicas, tau) })
			}
		})
	}
}

// playSchedule plays the schedule of seed on replicas replicas of alg with
// leases of tau, and judges it.
func playSchedule(t *testing.T, seed uint64, alg algorithms.Algorithm, replicas int, tau time.Duration) {
	s := newSchedule(seed, alg, replicas, exactnessLength)
	t.Logf("%s", s)
	env := map[string]string{}
	if tau != 50*time.Millisecond {
		env["RLS_LEASE_TIME"] = tau.String()
	}
	run := startExactnessRun(t, replicas, env, s.rules())
	s.play(t.Context(), run)
	run.judge(exactnessTolerance(run.history(), alg, replicas, tau), seed)
}

// exactnessTolerance returns what the server states of its exactness, for
// h on replicas replicas of alg with leases of tau: a millisecond of timing
// noise; a log's leased hit is logged up to a slot (algorithms.ServedSlot)
// after it was served; after a FLUSHALL, leases serve what they took before
// it for tau, and the deny cache repeats the denials it remembers for up to
// a second; a fixed window on Redis adds a take's hits first and gives them
// back when it is denied, and the deny cache repeats a denial that met such
// hits for 50 ms. With several replicas, the leases of the others hold room
// (leaseAllowance), and their deny caches do not see what is given back
// through another (refundAllowance).
func exactnessTolerance(h exactness.History, alg algorithms.Algorithm, replicas int, tau time.Duration) exactness.Tolerance {
	tol := exactness.Tolerance{Slack: time.Millisecond, Hold: tau, Forget: time.Second}
	if tau == 0 {
		tol.Hold = 0
	}
	switch alg {
	case algorithms.SlidingWindowLog:
		// A lease's hit is logged at the end of its slot once settled,
		// up to a slot after it was served (algorithms.ServedSlot).
		for _, l := range h.Limits {
			if tau > 0 {
				tol.Lag = max(tol.Lag, algorithms.ServedSlot(l.Limit, tau))
			}
		}
	case algorithms.FixedWindow:
		tol.AddFirst, tol.Repeat = true, 50*time.Millisecond
	}
	if replicas > 1 {
		tol.Below = refundAllowance(h)
		if tau > 0 {
			tol.Below += leaseAllowance(h, replicas, tau)
		}
		tol.Above = tol.Below
	}
	return tol
}
