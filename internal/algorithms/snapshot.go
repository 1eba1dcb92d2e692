package algorithms

import (
	"errors"
	"fmt"
)

// ErrNoState is returned by StateOf for an algorithm whose script tells no
// state: one counted without a script.
var ErrNoState = errors.New("the algorithm's script tells no state")

// StateOf returns the state of algorithm a that a script describes after an
// admitted lease's take: the numbers of its answer after the first six (see
// package lua), and the time (µs) until which that state answers as the
// backend's does, the holder's own takes aside, or 0 when it does for as
// long as the lease lasts. It checks what it reads, and fails on an answer
// that does not describe a state.
func StateOf(a Algorithm, ints []int64) (State, int64, error) {
	if !a.Valid() || a.spec().stateOf == nil {
		return nil, 0, fmt.Errorf("algorithms: %s: %w", a, ErrNoState)
	}
	st, until, err := a.spec().stateOf(ints)
	if err != nil {
		return nil, 0, fmt.Errorf("algorithms: %s state %v: %w", a, ints, err)
	}
	return st, until, nil
}

// errState is the error of an answer that describes no state.
var errState = errors.New("not a state")

// counts checks that ints holds n numbers, and that those at the given
// indexes are not negative.
func counts(ints []int64, n int, nonNegative ...int) error {
	if len(ints) != n {
		return fmt.Errorf("%w: %d numbers, want %d", errState, len(ints), n)
	}
	for _, i := range nonNegative {
		if ints[i] < 0 {
			return fmt.Errorf("%w: number %d is negative", errState, i)
		}
	}
	return nil
}

// bucketStateOf reads {level, t, x, capped, from, epoch, groups, h1, u1, …}.
func bucketStateOf(ints []int64) (State, int64, error) {
	if len(ints) < 7 || ints[6] < 0 || ints[6] > holdGroups {
		return nil, 0, fmt.Errorf("%w: want 7 numbers and at most %d groups", errState, holdGroups)
	}
	if err := counts(ints, 7+2*int(ints[6])); err != nil {
		return nil, 0, err
	}
	groups := make([][2]int64, ints[6])
	for i := range groups {
		groups[i] = [2]int64{ints[7+2*i], ints[8+2*i]}
		if groups[i][0] < 0 {
			return nil, 0, fmt.Errorf("%w: a group holds %d", errState, groups[i][0])
		}
	}
	return TokenBucketStateOf(ints[0], ints[1], ints[2], groups, ints[3] == 1, ints[4], ints[5]), 0, nil
}

// counterStateOf reads {w, cur, prev, epoch}.
func counterStateOf(ints []int64) (State, int64, error) {
	if err := counts(ints, 4, 1, 2); err != nil {
		return nil, 0, err
	}
	return SlidingWindowCounterStateOf(ints[0], uint64(ints[1]), uint64(ints[2]), ints[3]), 0, nil
}

// logStateOf reads {seq, until, runs, then each run's time, first sequence
// number and length}.
func logStateOf(ints []int64) (State, int64, error) {
	if len(ints) < 3 || ints[0] < 0 || ints[2] < 0 {
		return nil, 0, fmt.Errorf("%w: want a sequence number, a time and a number of runs", errState)
	}
	if err := counts(ints, 3+3*int(ints[2])); err != nil {
		return nil, 0, err
	}
	runs := make([]LogRun, ints[2])
	for i := range runs {
		r := ints[3+3*i : 6+3*i]
		if r[1] < 0 || r[2] < 0 {
			return nil, 0, fmt.Errorf("%w: run %v", errState, r)
		}
		runs[i] = LogRun{At: r[0], Seq: uint64(r[1]), N: uint64(r[2])}
	}
	return SlidingWindowLogStateOf(runs, uint64(ints[0])), ints[1], nil
}
