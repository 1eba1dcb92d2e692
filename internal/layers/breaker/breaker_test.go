package breaker

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
	// do is "allow" (want says whether call is let through), the outcome
	// of call: "ok", "fail", "timeout" or "abandon", or "answered": the
	// answer to a call whose caller gave up.
	do    string
	call  int
	want  bool
	state State // the state after the step
}

func TestBreaker(t *testing.T) {
	const cooldown = time.Second
	ms := time.Millisecond
	// fails returns the steps of n calls, named from first, each let
	// through at at and failing at once with outcome.
	fails := func(first, n int, at time.Duration, outcome string, last State) []breakerStep {
		var steps []breakerStep
		for i := range n {
			st := Closed
			if i == n-1 {
				st = last
			}
			steps = append(steps, breakerStep{at, "allow", first + i, true, Closed}, breakerStep{at, outcome, first + i, false, st})
		}
		return steps
	}
	opened := fails(0, 3, 0, "fail", Open)
	for _, tc := range []struct {
		name  string
		steps []breakerStep
	}{
		{"opens after threshold consecutive failures", append(fails(0, 3, 0, "fail", Open),
			breakerStep{3, "allow", 9, false, Open},
			breakerStep{cooldown - 1, "allow", 9, false, Open},
		)},
		{"a success resets the count", concat(
			fails(0, 2, 0, "fail", Closed),
			[]breakerStep{{0, "allow", 2, true, Closed}, {0, "ok", 2, false, Closed}},
			fails(3, 2, 0, "fail", Closed),
			fails(5, 1, 0, "fail", Open),
		)},
		{"a timeout while other calls succeed is the host's, not a failure", []breakerStep{
			{0, "allow", 0, true, Closed}, {0, "allow", 1, true, Closed}, {0, "allow", 2, true, Closed},
			{1 * ms, "allow", 3, true, Closed},
			{2 * ms, "ok", 3, false, Closed},
			{10 * ms, "timeout", 0, false, Closed},
			{10 * ms, "timeout", 1, false, Closed},
			{10 * ms, "timeout", 2, false, Closed},
			{10 * ms, "allow", 4, true, Closed},
		}},
		{"a timeout counts when the backend answered nothing while it waited", concat(
			[]breakerStep{{0, "allow", 0, true, Closed}, {1 * ms, "ok", 0, false, Closed}},
			// Calls 1..3 start after the last success.
			[]breakerStep{{2 * ms, "allow", 1, true, Closed}, {2 * ms, "allow", 2, true, Closed}, {2 * ms, "allow", 3, true, Closed}},
			[]breakerStep{{12 * ms, "timeout", 1, false, Closed}, {12 * ms, "timeout", 2, false, Closed}, {12 * ms, "timeout", 3, false, Closed}},
			// Judged settle later.
			[]breakerStep{{16 * ms, "allow", 4, true, Closed}, {17 * ms, "allow", 5, false, Open}},
		)},
		{"an answer read late settles the timeouts that waited for it", concat(
			[]breakerStep{{2 * ms, "allow", 1, true, Closed}, {2 * ms, "allow", 2, true, Closed}, {2 * ms, "allow", 3, true, Closed}},
			[]breakerStep{{12 * ms, "timeout", 1, false, Closed}, {12 * ms, "timeout", 2, false, Closed}, {12 * ms, "timeout", 3, false, Closed}},
			[]breakerStep{{13 * ms, "answered", 0, false, Closed}, {30 * ms, "allow", 4, true, Closed}},
		)},
		{"refused connections count whatever else succeeds", []breakerStep{
			{0, "allow", 0, true, Closed}, {0, "allow", 1, true, Closed}, {0, "allow", 2, true, Closed},
			{0, "allow", 3, true, Closed},
			{1 * ms, "ok", 3, false, Closed},
			{2 * ms, "fail", 0, false, Closed}, {2 * ms, "fail", 1, false, Closed}, {2 * ms, "fail", 2, false, Open},
		}},
		{"half-open lets probes through at once; the first success closes", concat(opened, []breakerStep{
			{cooldown - 1, "allow", 10, false, Open},
			{cooldown, "allow", 10, true, HalfOpen},
			{cooldown, "allow", 11, true, HalfOpen},
			{cooldown, "allow", 12, false, HalfOpen},
			{cooldown + 5*ms, "allow", 12, false, HalfOpen},
			{cooldown + 5*ms, "ok", 11, false, Closed},
			{cooldown + 6*ms, "allow", 13, true, Closed},
			{cooldown + 6*ms, "allow", 14, true, Closed},
			{cooldown + 7*ms, "fail", 10, false, Closed}, // a probe's late failure is one failure
			{cooldown + 7*ms, "ok", 13, false, Closed},
		})},
		{"one failed probe does not open it again; as many as it probes with do", concat(opened, []breakerStep{
			{cooldown, "allow", 10, true, HalfOpen},
			{cooldown, "allow", 11, true, HalfOpen},
			{cooldown + 10*ms, "timeout", 10, false, HalfOpen},
			{cooldown + 10*ms, "allow", 12, false, HalfOpen}, // its slot is held until it is judged
			{cooldown + 11*ms, "timeout", 11, false, HalfOpen},
			{cooldown + 15*ms, "allow", 12, true, HalfOpen}, // 10 judged a failure: one is not enough
			{cooldown + 16*ms, "allow", 13, false, Open},    // 11 too: open since its timeout
			{cooldown + 17*ms, "ok", 12, false, Open},       // a probe of the earlier half-open state
			{2*cooldown + 10*ms, "allow", 13, false, Open},  // a cool-down from the second timeout
			{2*cooldown + 11*ms, "allow", 13, true, HalfOpen},
			{2*cooldown + 12*ms, "fail", 12, false, HalfOpen}, // still of the earlier state
			{2*cooldown + 12*ms, "allow", 14, true, HalfOpen},
			{2*cooldown + 13*ms, "ok", 14, false, Closed},
		})},
		{"a probe answered after its caller gave up closes it", concat(opened, []breakerStep{
			{cooldown, "allow", 10, true, HalfOpen},
			{cooldown + 10*ms, "timeout", 10, false, HalfOpen},
			{cooldown + 12*ms, "answered", 0, false, Closed},
		})},
		{"an abandoned probe lets the next call probe", concat(opened, []breakerStep{
			{cooldown, "allow", 10, true, HalfOpen},
			{cooldown, "allow", 11, true, HalfOpen},
			{cooldown, "allow", 12, false, HalfOpen},
			{cooldown, "abandon", 10, false, HalfOpen},
			{cooldown, "allow", 12, true, HalfOpen},
			{cooldown, "allow", 13, false, HalfOpen},
		})},
		{"late answers of calls let through before it opened change nothing", concat(
			[]breakerStep{{0, "allow", 7, true, Closed}, {0, "allow", 8, true, Closed}, {0, "allow", 9, true, Closed}},
			opened,
			[]breakerStep{
				{2, "fail", 7, false, Open},
				{3, "abandon", 8, false, Open},
				{cooldown - 1, "allow", 10, false, Open}, // the cool-down still runs from the opening
				{cooldown, "allow", 10, true, HalfOpen},
				{cooldown, "allow", 11, true, HalfOpen},
				{cooldown + 1, "fail", 9, false, HalfOpen},
				{cooldown + 1, "allow", 12, false, HalfOpen}, // 9 was no probe: 10 and 11 are under way
				{cooldown + 2, "fail", 10, false, HalfOpen},
				{cooldown + 3, "fail", 11, false, Open},
				{cooldown + 4, "abandon", 11, false, Open},
				{2*cooldown + 3, "allow", 12, true, HalfOpen},
				{2*cooldown + 3, "fail", 10, false, HalfOpen}, // a probe of the earlier half-open state
				{2*cooldown + 3, "allow", 13, true, HalfOpen},
				{2*cooldown + 3, "allow", 14, false, HalfOpen},
			},
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var changes []string
			b := newBreaker(3, 2, cooldown, 5*time.Millisecond, func(from, to State) {
				changes = append(changes, from.String()+">"+to.String())
			})
			tickets := map[int]breakerTicket{}
			var want []string
			prev := Closed
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				ticket, known := tickets[st.call]
				if st.do != "allow" && st.do != "answered" && !known {
					t.Fatalf("step %d: call %d was never let through", i, st.call)
				}
				switch st.do {
				case "allow":
					got, ok := b.allow(now)
					assert.Equal(t, st.want, ok, "step %d: allow call %d at +%v", i, st.call, st.at)
					if ok {
						tickets[st.call] = got
					}
				case "ok":
					b.success(ticket, now)
				case "fail":
					b.failure(ticket, now, false)
				case "timeout":
					b.failure(ticket, now, true)
				case "abandon":
					b.abandon(ticket)
				case "answered":
					b.answered(now)
				default:
					t.Fatalf("step %d: unknown action %q", i, st.do)
				}
				require.Equal(t, st.state, b.current(), "step %d: %s call %d at +%v", i, st.do, st.call, st.at)
				if st.state != prev {
					want = append(want, prev.String()+">"+st.state.String())
					prev = st.state
				}
			}
			assert.Equal(t, want, changes, "every change is reported once, in order")
		})
	}
}

func concat[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestNilBreakerAllowsEverything(t *testing.T) {
	b := newBreaker(0, 3, time.Second, time.Millisecond, nil)
	require.Nil(t, b)
	for range 10 {
		b.failure(breakerTicket{}, t0, false)
	}
	_, ok := b.allow(t0)
	assert.True(t, ok)
	assert.Equal(t, Closed, b.current())
}

// TestBreakerConcurrentProbes checks that of many callers racing for the
// probes of a half-open breaker exactly as many as it probes with win.
func TestBreakerConcurrentProbes(t *testing.T) {
	b := newBreaker(1, 3, time.Second, time.Millisecond, nil)
	ticket, _ := b.allow(t0)
	b.failure(ticket, t0, false)
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, ok := b.allow(t0.Add(time.Second)); ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 3, allowed)
}

func TestBreakerStateNames(t *testing.T) {
	var names []string
	for _, s := range States {
		names = append(names, s.String())
	}
	assert.Equal(t, []string{"closed", "open", "half_open"}, names)
	assert.Equal(t, "State(9)", fmt.Sprint(State(9)))
}
