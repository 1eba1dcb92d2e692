package rlqsenvoy

import (
	"math"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// minFillRate is the slowest refill Envoy's token buckets accept: one token
// a year. A slower rate, zero included, is raised to it.
const minFillRate = 1.0 / (365 * 24 * 60 * 60)

// tokenBucket is the token bucket Envoy builds from a token_bucket strategy.
// Like Envoy's, it holds no count: it remembers the moment at which it was
// empty, and holds (now - empty) × rate tokens, at most max. Times are in
// seconds since the Envoy started, as floats, as Envoy's are.
type tokenBucket struct {
	max   float64
	rate  float64 // tokens a second
	empty float64 // the moment the bucket was (or would have been) empty
	// unlimited is a bucket whose fill_interval has no whole second: Envoy
	// divides tokens_per_fill by zero, and the bucket then holds max tokens
	// at every moment.
	unlimited bool
}

// newTokenBucket builds the bucket of strategy tb at moment now. prev is
// the bucket it replaces, or nil when there is none.
//
// The refill rate is tokens_per_fill / the whole seconds of fill_interval,
// raised to one token a year. tokens_per_fill unset is read as zero, not as
// the one token the API documents, so such a bucket refills one token a
// year (a negative interval, which the API forbids, counts as positive). A
// fill_interval under a second makes the division by zero, and the bucket
// unlimited.
//
// Without prev the bucket starts full. With prev, Envoy computes
// max_tokens × remaining / previous max, truncated to an integer, and hands
// it to a token bucket constructor whose parameter is a bool (init_fill):
// any count of one or more starts the new bucket full, zero starts it
// empty. The model does the same, so a bucket never starts part full.
func newTokenBucket(tb *typev3.TokenBucket, now float64, prev *tokenBucket) *tokenBucket {
	b := &tokenBucket{max: float64(tb.GetMaxTokens()), empty: now}
	seconds := tb.GetFillInterval().GetSeconds()
	if seconds == 0 {
		b.unlimited = true
		return b
	}
	b.rate = math.Max(math.Abs(float64(tb.GetTokensPerFill().GetValue())/float64(seconds)), minFillRate)
	full := true
	if prev != nil && prev.max > 0 {
		full = uint64(b.max*(prev.remaining(now)/prev.max)) != 0
	}
	if full {
		b.empty = now - b.max/b.rate
	}
	return b
}

// remaining is the number of tokens the bucket holds at moment now,
// fractions included.
func (b *tokenBucket) remaining(now float64) float64 {
	if b.unlimited {
		return b.max
	}
	return math.Min(b.max, (now-b.empty)*b.rate)
}

// take takes one token at moment now if the bucket holds one.
func (b *tokenBucket) take(now float64) bool {
	total := b.remaining(now)
	if total < 1 {
		return false
	}
	if !b.unlimited {
		b.empty = now - (total-1)/b.rate
	}
	return true
}

// sameTokenBucket reports whether Envoy takes two token_bucket strategies
// for the same one, and keeps its bucket: equal max_tokens and
// tokens_per_fill, and equal nanos of fill_interval. The seconds of
// fill_interval are not compared, so a new rate of the same nanos keeps the
// old bucket and its old rate.
func sameTokenBucket(a, b *typev3.TokenBucket) bool {
	return a.GetMaxTokens() == b.GetMaxTokens() &&
		a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().GetNanos() == b.GetFillInterval().GetNanos()
}
