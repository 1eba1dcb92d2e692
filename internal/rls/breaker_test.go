package rls

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// breakerStep is one event in a breaker's life, at offset at from t0.
type breakerStep struct {
	at time.Duration
	// do is "allow" (want says whether it is let through), "ok", "fail" or
	// "abandon".
	do    string
	want  bool
	state BreakerState // the state after the step
}

func TestBreaker(t *testing.T) {
	const cooldown = time.Second
	for _, tc := range []struct {
		name  string
		steps []breakerStep
	}{
		{"opens after threshold consecutive failures", []breakerStep{
			{0, "allow", true, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{1, "allow", true, BreakerClosed}, {1, "fail", false, BreakerClosed},
			{2, "allow", true, BreakerClosed}, {2, "fail", false, BreakerOpen},
			{3, "allow", false, BreakerOpen},
			{cooldown + 1, "allow", false, BreakerOpen}, // 1ns short of the cool-down from the third failure
		}},
		{"a success resets the count", []breakerStep{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "ok", false, BreakerClosed},
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed},
			{0, "fail", false, BreakerOpen},
		}},
		{"half-open lets one probe through; its success closes", []breakerStep{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{cooldown - 1, "allow", false, BreakerOpen},
			{cooldown, "allow", true, BreakerHalfOpen},
			{cooldown, "allow", false, BreakerHalfOpen},
			{cooldown + 5*time.Millisecond, "allow", false, BreakerHalfOpen},
			{cooldown + 5*time.Millisecond, "ok", false, BreakerClosed},
			{cooldown + 6*time.Millisecond, "allow", true, BreakerClosed},
			{cooldown + 6*time.Millisecond, "allow", true, BreakerClosed},
		}},
		{"a failed probe opens for another cool-down", []breakerStep{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{cooldown, "allow", true, BreakerHalfOpen},
			{cooldown + 10*time.Millisecond, "fail", false, BreakerOpen},
			{2*cooldown + 9*time.Millisecond, "allow", false, BreakerOpen},
			{2*cooldown + 10*time.Millisecond, "allow", true, BreakerHalfOpen},
			{2*cooldown + 10*time.Millisecond, "ok", false, BreakerClosed},
		}},
		{"an abandoned probe lets the next call probe", []breakerStep{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{cooldown, "allow", true, BreakerHalfOpen},
			{cooldown, "allow", false, BreakerHalfOpen},
			{cooldown, "abandon", false, BreakerHalfOpen},
			{cooldown, "allow", true, BreakerHalfOpen},
			{cooldown, "allow", false, BreakerHalfOpen},
		}},
		{"late answers of calls let through before it opened change nothing", []breakerStep{
			{0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerClosed}, {0, "fail", false, BreakerOpen},
			{1, "ok", false, BreakerOpen},
			{2, "fail", false, BreakerOpen},
			{3, "abandon", false, BreakerOpen},
			{cooldown - 1, "allow", false, BreakerOpen}, // the cool-down still runs from the opening
			{cooldown, "allow", true, BreakerHalfOpen},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var changes []string
			b := newBreaker(3, cooldown, func(from, to BreakerState) {
				changes = append(changes, from.String()+">"+to.String())
			})
			var want []string
			prev := BreakerClosed
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				switch st.do {
				case "allow":
					assert.Equal(t, st.want, b.allow(now), "step %d: allow at +%v", i, st.at)
				case "ok":
					b.success()
				case "fail":
					b.failure(now)
				case "abandon":
					b.abandon()
				default:
					t.Fatalf("step %d: unknown action %q", i, st.do)
				}
				require.Equal(t, st.state, b.current(), "step %d: %s at +%v", i, st.do, st.at)
				if st.state != prev {
					want = append(want, prev.String()+">"+st.state.String())
					prev = st.state
				}
			}
			assert.Equal(t, want, changes, "every change is reported once, in order")
		})
	}
}

func TestNilBreakerAllowsEverything(t *testing.T) {
	b := newBreaker(0, time.Second, nil)
	require.Nil(t, b)
	for range 10 {
		b.failure(t0)
	}
	assert.True(t, b.allow(t0))
	assert.Equal(t, BreakerClosed, b.current())
}

// TestBreakerConcurrentProbe checks that of many callers racing for the probe
// of a half-open breaker exactly one wins.
func TestBreakerConcurrentProbe(t *testing.T) {
	b := newBreaker(1, time.Second, nil)
	b.failure(t0)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if b.allow(t0.Add(time.Second)) {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, allowed)
}

func TestBreakerStateNames(t *testing.T) {
	var names []string
	for _, s := range BreakerStates {
		names = append(names, s.String())
	}
	assert.Equal(t, []string{"closed", "open", "half_open"}, names)
	assert.Equal(t, "BreakerState(9)", fmt.Sprint(BreakerState(9)))
}
