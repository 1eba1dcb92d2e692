package redisx

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/algotest"
)

// TestLimiterMatchesMemory drives the Redis Limiter and the in-memory one,
// the reference, through the same random sequences of operations on the same
// fake clock, and requires identical Results at every step.
func TestLimiterMatchesMemory(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			client := b.client(t)
			sequences, steps := 3, 1000
			if b.name == "cluster" {
				sequences, steps = 1, 600
			}
			for _, alg := range algorithms.Algorithms {
				t.Run(alg.String(), func(t *testing.T) {
					for seq := range sequences {
						seed := uint64(seq)*10 + uint64(alg)
						t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
							runDifferential(t, client, alg, seed, steps)
						})
					}
				})
			}
		})
	}
}

// subject is one limit of a differential sequence and the receipts of its
// admitted takes.
type subject struct {
	key   rate.Key
	limit algorithms.Limit
	// debt, for an algorithm counted without a script, is the subject's
	// every Op.Debt: its rule charges with debt, and its state is kept
	// whole (see counter.go).
	debt     bool
	receipts []takeReceipt
}

type takeReceipt struct {
	// receipt is the memory Limiter's receipt, redis the Redis one's: an
	// epoch is a backend's own.
	receipt, redis algorithms.Receipt
	hits           uint64
	// hold is the lease's hold when the take was a lease's; at is when
	// it was taken.
	hold time.Duration
	at   time.Time
}

// diffWindows are the windows a sequence draws from.
var diffWindows = []time.Duration{time.Second, time.Minute, 24 * time.Hour, 365 * 24 * time.Hour}

// calendarWindows are the windows of calendar limits, by their nominal
// lengths: a day, a week, a month and a year.
var calendarWindows = []time.Duration{24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour}

// nextBoundary returns the start of the window after the one of l that
// holds now.
func nextBoundary(now time.Time, l algorithms.Limit) time.Time {
	now = now.UTC()
	y, m, d := now.Date()
	switch l.CalendarUnit() {
	case "week":
		monday := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, -((int(now.Weekday()) + 6) % 7))
		return monday.AddDate(0, 0, 7)
	case "month":
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	case "year":
		return time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	return now.Truncate(l.Window).Add(l.Window)
}

func runDifferential(t *testing.T, client redis.UniversalClient, alg algorithms.Algorithm, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// A realistic instant at a random microsecond of 2026.
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365*24*time.Hour))) / time.Microsecond * time.Microsecond)
	clock := algotest.NewClock(start)
	mem := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	t.Cleanup(mem.Close)
	lim, err := NewLimiter(client, testPipelines, WithClock(clock.Now), WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)

	subjects := make([]*subject, 6)
	for i := range subjects {
		subjects[i] = &subject{
			key:   rate.Key{Domain: "differential", Entries: []rate.Entry{{Key: "subject", Value: strconv.Itoa(i)}}},
			limit: randomLimit(rng, alg, i, diffWindows[rng.IntN(len(diffWindows))]),
		}
		if alg == algorithms.FixedWindow && rng.IntN(2) == 0 {
			// A window of the calendar: a UTC day, an ISO week, a month or
			// a year.
			subjects[i].limit.Calendar = true
			subjects[i].limit.Window = calendarWindows[rng.IntN(len(calendarWindows))]
		}
		subjects[i].debt = alg.Spec().Counter && rng.IntN(3) == 0
		require.NoError(t, subjects[i].limit.Validate())
	}
	bigLogTakes := 0

	ctx := context.Background()
	for step := range steps {
		clock.Advance(randomStep(rng, clock.Now(), subjects[rng.IntN(len(subjects))].limit))
		if rng.IntN(50) == 0 {
			// A changed limit keeps the state (the numbers are not part of
			// the identity) and counts on under the new numbers.
			i := rng.IntN(len(subjects))
			s := subjects[i]
			l := randomLimit(rng, alg, rng.IntN(len(subjects)), s.limit.Window)
			s.limit.Requests, s.limit.Burst = l.Requests, l.Burst
			require.NoError(t, s.limit.Validate())
		}
		ops := make([]rate.Op, 1+rng.IntN(8))
		redisOps := make([]rate.Op, len(ops))
		owners := make([]*subject, len(ops))
		for i := range ops {
			s := subjects[rng.IntN(len(subjects))]
			owners[i] = s
			ops[i], redisOps[i] = randomOp(rng, s, clock.Now(), &bigLogTakes)
		}

		want, err := mem.Do(ctx, ops)
		require.NoError(t, err)
		got, err := lim.Do(ctx, redisOps)
		require.NoError(t, err)
		unmarkTransient(t, got)
		for i := range ops {
			w, g := alike(want[i]), alike(got[i])
			if w != g {
				for j := range ops {
					t.Logf("op %d debt=%v %s: want %+v got %+v", j, ops[j].Debt, describeOp(ops[j]), want[j], got[j])
				}
			}
			require.Equal(t, w, g, "step %d at %s, op %d of %d: %s",
				step, clock.Now().Format(time.RFC3339Nano), i, len(ops), describeOp(ops[i]))
			if ops[i].Leasing() && want[i].Allowed && !ops[i].Debt {
				// (The lease layer never leases a limit that owes: the
				// whole state of one, kept in a transaction, tells none.)
				sameState(t, ops[i], want[i], got[i], clock.Now(), fmt.Sprintf("step %d op %d: %s", step, i, describeOp(ops[i])))
			}
			if ops[i].Kind == rate.Take && want[i].Allowed {
				s := owners[i]
				s.receipts = append(s.receipts, takeReceipt{receipt: want[i].Receipt, redis: got[i].Receipt,
					hits: ops[i].Hits, hold: ops[i].Hold, at: clock.Now()})
				if len(s.receipts) > 16 {
					s.receipts = s.receipts[1:]
				}
			}
		}
	}
}

// alike returns r without what the backends tell apart: the epoch a
// receipt names (each backend's own) and a lease's state (sameState).
func alike(r algorithms.Result) algorithms.Result {
	r.Receipt.Epoch, r.State, r.StateUntil = 0, nil, 0
	return r
}

// sameState checks that the states two backends told with a lease's
// answer answer alike: a check now, and as the lease goes on, while both
// tell it.
func sameState(t *testing.T, op rate.Op, want, got algorithms.Result, now time.Time, what string) {
	t.Helper()
	if want.State == nil || got.State == nil {
		require.Equal(t, want.State == nil, got.State == nil, "%s: a lease's state", what)
		return
	}
	until := now.Add(op.Hold)
	if got.StateUntil != 0 {
		until = time.UnixMicro(got.StateUntil)
	}
	for _, at := range []time.Time{now, now.Add(op.Hold / 3), until.Add(-time.Microsecond)} {
		if at.Before(now) || at.After(until) {
			continue
		}
		w, g := want.State.Clone().Take(op.Limit, at, 0), got.State.Clone().Take(op.Limit, at, 0)
		w.Receipt, g.Receipt = algorithms.Receipt{}, algorithms.Receipt{}
		require.Equal(t, w, g, "%s: the lease's state checked %s after it", what, at.Sub(now))
	}
}

// randomLimit draws the numbers of subject i's limit: the first subjects
// take the extremes (0, 1 and the largest), the others values in between.
func randomLimit(rng *rand.Rand, alg algorithms.Algorithm, i int, window time.Duration) algorithms.Limit {
	largest := uint64(algorithms.MaxRequests)
	if alg == algorithms.SlidingWindowLog {
		largest = algorithms.MaxLogRequests
	}
	var requests uint64
	switch i {
	case 0:
		requests = 0
	case 1:
		requests = 1
	case 2:
		requests = largest
	case 3:
		requests = 2 + rng.Uint64N(9)
	default:
		requests = []uint64{3, 10, 100, 1000, 65536, largest - 1}[rng.IntN(6)]
	}
	l := algorithms.Limit{
		Algorithm: alg,
		Requests:  requests,
		Window:    window,
	}
	if alg == algorithms.TokenBucket && requests > 0 {
		switch rng.IntN(5) {
		case 0:
			l.Burst = 1
		case 1:
			l.Burst = max(requests/3, 1)
		case 2:
			l.Burst = min(requests*10, algorithms.MaxRequests)
		case 3:
			l.Burst = algorithms.MaxRequests
		}
		// A bucket must refill from empty within MaxWindow.
		l.Burst = min(l.Burst, requests*uint64(algorithms.MaxWindow/l.Window))
	}
	return l
}

// randomStep draws how far the clock moves: not at all, a microsecond, a
// few slices, part of a window, to just around a window boundary, a long
// idle, or now and then a little back.
func randomStep(rng *rand.Rand, now time.Time, l algorithms.Limit) time.Duration {
	w := l.Window
	q := w / algorithms.SlicesPerWindow
	switch p := rng.IntN(100); {
	case p < 20:
		return 0
	case p < 35:
		return time.Microsecond
	case p < 45:
		return time.Duration(1+rng.Int64N(3*int64(q)/1000)) * time.Microsecond
	case p < 65:
		return time.Duration(rng.Int64N(int64(w)/1000)) * time.Microsecond
	case p < 85:
		return nextBoundary(now, l).Sub(now) + time.Duration(rng.Int64N(3)-1)*time.Microsecond
	case p < 88:
		return w + time.Duration(rng.Int64N(2*int64(w)/1000))*time.Microsecond
	case p < 90:
		if l.Algorithm.Spec().Counter {
			// Counted without a script, a window's count is the key of
			// the window the clock is in: a clock that went back counts
			// in the earlier window, where the Go state keeps counting in
			// the later one (see counter.go). The Limiter follows Redis's
			// clock, which does not go back.
			return 0
		}
		return -time.Duration(1+rng.Int64N(1_000_000)) * time.Microsecond
	}
	return time.Duration(rng.Int64N(3*int64(q)/1000+1)) * time.Microsecond
}

// randomOp draws a take, a charge or a refund of s, with hits from 0 to
// beyond the capacity, and charges of up to several windows' worth, which
// leave debts that the windows after pay off. A third of the takes are
// leases' (Op.Hold), and most refunds by a lease's receipt are its
// settlements, as the lease layer sends them. Taking a whole large sliding
// window log costs a script a hundred thousand entries, so bigLogTakes
// bounds how often that happens.
func randomOp(rng *rand.Rand, s *subject, now time.Time, bigLogTakes *int) (rate.Op, rate.Op) {
	op := randomOpOf(rng, s, now, bigLogTakes)
	// Each backend's receipts go back to it.
	redisOp := op
	if op.Loosens() {
		for _, r := range s.receipts {
			if r.receipt == op.Receipt {
				redisOp.Receipt = r.redis
			}
		}
		if op.Kind == rate.Settle {
			redisOp.Leases = slices.Clone(op.Leases)
			for i := range redisOp.Leases {
				for _, r := range s.receipts {
					if r.receipt == op.Leases[i].Receipt {
						redisOp.Leases[i].Receipt = r.redis
					}
				}
			}
		}
	}
	return op, redisOp
}

// randomOpOf draws an op of s at now for randomOp.
func randomOpOf(rng *rand.Rand, s *subject, now time.Time, bigLogTakes *int) rate.Op {
	capacity := s.limit.Capacity()
	op := rate.Op{Key: s.key, Limit: s.limit, Debt: s.debt}
	bigLog := s.limit.Algorithm == algorithms.SlidingWindowLog && capacity > 1000
	hits := func() uint64 {
		switch p := rng.IntN(100); {
		case p < 10:
			return 0
		case p < 35:
			return 1
		case p < 50:
			return 2 + rng.Uint64N(4)
		case p < 70:
			if bigLog {
				return rng.Uint64N(1001)
			}
			return rng.Uint64N(capacity + 2)
		case p < 80:
			if bigLog && *bigLogTakes >= 2 {
				return rng.Uint64N(1001)
			}
			if bigLog {
				*bigLogTakes++
			}
			return capacity
		case p < 90:
			return capacity + 1
		}
		return capacity + 2 + rng.Uint64N(math.MaxUint64-capacity-2)
	}
	switch p := rng.IntN(100); {
	case p < 45:
		op.Hits = hits()
		if rng.IntN(3) == 0 {
			op.Hold = randomHold(rng, s.limit.Window)
		}
	case p < 65:
		// Half of them charges that owe past the window, half records.
		op.Kind, op.Debt = rate.Charge, rng.IntN(2) == 0
		if s.limit.Algorithm.Spec().Counter {
			op.Debt = s.debt
		}
		switch q := rng.IntN(4); {
		case bigLog:
			// Every charged hit is an entry, up to 2L of them.
			op.Hits = rng.Uint64N(1001)
			if *bigLogTakes < 2 && q == 0 {
				*bigLogTakes++
				op.Hits = capacity + 1 + rng.Uint64N(capacity)
			}
		case q == 0:
			// Several windows' worth: a debt the next windows pay off.
			op.Hits = capacity * (2 + rng.Uint64N(4))
		case q == 1:
			op.Hits = capacity + 1 + rng.Uint64N(capacity+1)
		default:
			op.Hits = hits()
		}
	case p < 85 && len(s.receipts) > 0:
		r := s.receipts[rng.IntN(len(s.receipts))]
		if r.hold > 0 && rng.IntN(4) > 0 {
			// A settlement of the lease, as its holder sends it: hits
			// served at times from its take on, closed or not.
			ls := algorithms.Lease{Receipt: r.receipt, Hold: r.hold, Size: r.hits, Close: rng.IntN(2) == 0}
			if rng.IntN(4) == 0 {
				ls.Reported = rng.Uint64N(r.hits + 1)
			}
			seq := r.receipt.Seq + ls.Reported
			from, to := r.at.UnixMicro(), max(now.UnixMicro(), r.at.UnixMicro())
			for range rng.IntN(4) {
				n := min(rng.Uint64N(3), r.hits-min(r.hits, seq-r.receipt.Seq))
				from += rng.Int64N(to - from + 1)
				ls.Served = append(ls.Served, algorithms.Served{At: from, Seq: seq, N: n})
				seq += n
			}
			op.Kind, op.Leases = rate.Settle, []algorithms.Lease{ls}
			return op
		}
		op.Kind, op.Receipt, op.Hits = rate.Refund, r.receipt, r.hits
		if rng.IntN(4) == 0 {
			op.Hits = hits()
		}
	default:
		op.Kind, op.Hits = rate.Refund, hits()
	}
	return op
}

// randomHold draws a lease's hold for a window w: a microsecond, a lease
// time of tens of milliseconds, up to the window, or up to MaxHold.
func randomHold(rng *rand.Rand, w time.Duration) time.Duration {
	switch p := rng.IntN(20); {
	case p < 2:
		return time.Microsecond
	case p < 12:
		return time.Duration(1+rng.Int64N(100_000)) * time.Microsecond
	case p < 19:
		return time.Duration(1+rng.Int64N(w.Microseconds())) * time.Microsecond
	}
	return time.Duration(1+rng.Int64N(algorithms.MaxHold.Microseconds())) * time.Microsecond
}

func describeOp(op rate.Op) string {
	var b strings.Builder
	switch {
	case op.Kind == rate.Settle:
		fmt.Fprintf(&b, "settle %+v", op.Leases)
	case op.Kind == rate.Refund:
		fmt.Fprintf(&b, "refund %d (receipt %+v)", op.Hits, op.Receipt)
	case op.Kind == rate.Charge && !op.Debt:
		fmt.Fprintf(&b, "record %d", op.Hits)
	default:
		fmt.Fprintf(&b, "%s %d", op.Kind, op.Hits)
	}
	if op.Hold > 0 {
		fmt.Fprintf(&b, " held %s", op.Hold)
	}
	fmt.Fprintf(&b, " of %s L=%d W=%s B=%d", op.Key.Entries[0].Value, op.Limit.Requests, op.Limit.Window, op.Limit.Burst)
	return b.String()
}

// TestCalendarWindowsMatchMemory drives calendar limits of the Redis
// Limiter and of the in-memory one across far-apart dates, 1970 to 2250
// (where microseconds since the epoch near 2^53, the last that Lua holds
// exactly), leap days and century years among them, to just before and at their
// boundaries, and requires identical Results: the script's calendar
// (integer arithmetic on days) is Go's.
func TestCalendarWindowsMatchMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0xca1))
	clock := algotest.NewClock(time.Unix(0, 0))
	mem := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
	t.Cleanup(mem.Close)
	lim, err := NewLimiter(backends()[0].client(t), testPipelines, WithClock(clock.Now), WithKeyPrefix(testPrefix(t)))
	require.NoError(t, err)
	ctx := context.Background()
	dates := []time.Time{
		time.Unix(0, 0), time.Date(2000, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(2100, 2, 28, 23, 59, 59, 0, time.UTC), time.Date(2200, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2024, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
	}
	for i := range 200 {
		at := time.UnixMicro(rng.Int64N(280 * 365 * 24 * 3600 * 1_000_000))
		if i < len(dates) {
			at = dates[i]
		}
		l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1 + rng.Uint64N(3), Window: calendarWindows[i%len(calendarWindows)], Calendar: true}
		key := rate.Key{Domain: "calendar", Entries: []rate.Entry{{Key: "n", Value: strconv.Itoa(i)}}}
		for _, step := range []time.Time{at, at, nextBoundary(at, l).Add(-time.Microsecond), nextBoundary(at, l)} {
			clock.Set(step)
			ops := []rate.Op{{Key: key, Limit: l, Hits: 1}, {Key: key, Limit: l, Hits: 2, Kind: rate.Charge}, {Key: key, Limit: l}}
			want, err := mem.Do(ctx, ops)
			require.NoError(t, err)
			got, err := lim.Do(ctx, ops)
			require.NoError(t, err)
			unmarkTransient(t, got)
			require.Equal(t, want, got, "%s calendar %s at %s", l.CalendarUnit(), l.Window, step.Format(time.RFC3339Nano))
		}
	}
}

// unmarkTransient clears the Transient mark of results, which the Go state
// cannot tell (a denial that may pass in a moment: a count the fixed window
// met outside [0, L], TestCounterMarksTransientDenials), after checking
// that only denials carry it.
func unmarkTransient(t *testing.T, results []algorithms.Result) {
	t.Helper()
	for i := range results {
		require.False(t, results[i].Transient && results[i].Allowed, "result %d: an admission marked transient", i)
		results[i].Transient = false
	}
}
