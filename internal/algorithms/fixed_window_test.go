package algorithms_test

import (
	"math"
	"testing"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestFixedWindowSteps(t *testing.T) {
	const us = time.Microsecond
	b := untilBoundary(time.Second) // 876544µs
	bDay, bYear := untilBoundary(day), untilBoundary(year)
	runSteps(t, []stepCase{
		{
			name:  "three per second",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 3, Window: time.Second},
			steps: []step{
				{at: 0, n: 0, allowed: true, remaining: 3, reset: 0},
				{at: 0, n: 1, allowed: true, remaining: 2, reset: b},
				{at: 0, n: 2, allowed: true, remaining: 0, reset: b},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: b},
				{at: 0, n: 0, allowed: true, remaining: 0, reset: b},
				{at: b - us, n: 1, allowed: false, remaining: 0, reset: us},
				{at: b, n: 3, allowed: true, remaining: 0, reset: time.Second},
				{at: b, n: 1, refund: true, receipt: 7, allowed: true, remaining: 1, reset: time.Second},
				{at: b, n: 1, refund: true, receipt: 2, allowed: true, remaining: 1, reset: time.Second},
				{at: b + 500*time.Millisecond, n: 0, allowed: true, remaining: 1, reset: 500 * time.Millisecond},
				{at: b + 500*time.Millisecond, n: 5, refund: true, allowed: true, remaining: 3, reset: 0},
				{at: b + 600*time.Millisecond, n: 4, allowed: false, remaining: 3, reset: time.Second},
				{at: b + 600*time.Millisecond, n: 3, allowed: true, remaining: 0, reset: 400 * time.Millisecond},
				{at: b + 2*time.Second, n: 0, allowed: true, remaining: 3, reset: 0},
			},
		},
		{
			name:  "a clock that goes back keeps the count",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: time.Second},
			steps: []step{
				{at: b, n: 2, allowed: true, remaining: 0, reset: time.Second},
				{at: b - 10*us, n: 1, allowed: false, remaining: 0, reset: time.Second + 10*us},
				{at: b + time.Second, n: 1, allowed: true, remaining: 1, reset: time.Second},
			},
		},
		{
			name:  "most requests per day",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: math.MaxUint32, Window: day},
			steps: []step{
				{at: 0, n: math.MaxUint32, allowed: true, remaining: 0, reset: bDay},
				{at: 0, n: 1, allowed: false, remaining: 0, reset: bDay},
				{at: bDay - us, n: math.MaxUint32, allowed: false, remaining: 0, reset: us},
				{at: bDay, n: 1, allowed: true, remaining: math.MaxUint32 - 1, reset: day},
				{at: bDay, n: math.MaxUint32, allowed: false, remaining: math.MaxUint32 - 1, reset: day},
			},
		},
		{
			name:  "most requests over the longest window",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: math.MaxUint32, Window: algorithms.MaxWindow},
			steps: []step{
				{at: 0, n: math.MaxUint32, allowed: true, remaining: 0, reset: untilBoundary(algorithms.MaxWindow)},
				{at: untilBoundary(algorithms.MaxWindow), n: 2, allowed: true, remaining: math.MaxUint32 - 2, reset: algorithms.MaxWindow},
			},
		},
		{
			name:  "a year",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Window: year},
			steps: []step{
				{at: 0, n: 2, allowed: true, remaining: 0, reset: bYear},
				{at: bYear - us, n: 1, allowed: false, remaining: 0, reset: us},
				{at: bYear, n: 2, allowed: true, remaining: 0, reset: year},
			},
		},
		{
			name:  "changed limit",
			limit: algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Window: time.Second},
			steps: []step{
				{at: 0, n: 6, allowed: true, remaining: 4, reset: b},
				{at: 0, n: 0, limit: lim(algorithms.FixedWindow, 4, time.Second, 0), allowed: false, remaining: 0, reset: b},
				{at: 0, n: 3, refund: true, allowed: true, remaining: 1, reset: b},
				{at: 0, n: 1, allowed: true, remaining: 0, reset: b},
				{at: 0, n: 0, limit: lim(algorithms.FixedWindow, 20, time.Second, 0), allowed: true, remaining: 16, reset: b},
			},
		},
	})
}
