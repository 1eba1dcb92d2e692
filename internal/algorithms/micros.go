package algorithms

import "time"

// maxResetMicros is the longest wait a Result reports, 2^53−1 microseconds
// (about 285 years). Only a token bucket whose burst takes longer than that
// to refill from empty reaches it; every other wait is exact.
const maxResetMicros = 1<<53 - 1

// floorDiv returns ⌊a/b⌋ for b > 0, also when a is negative.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns ⌈a/b⌉ for b > 0 and a + b below 2^64.
func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// micros converts a whole number of microseconds to a Duration.
func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// noReceipt reports whether r is the zero Receipt, which asks a refund to give
// back the newest hits. The shard is routing information for the backend and
// takes no part in it.
func noReceipt(r Receipt) bool { return r.At == 0 && r.Seq == 0 }
