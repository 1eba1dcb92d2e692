package algorithms

// Holding returns, for the tests, a token bucket's level and the tokens that
// leases hold, both in millionths of a token, and until when they hold them
// (µs).
func (s *TokenBucketState) Holding() (level, held, until int64) {
	return s.level, s.held, s.heldUntil
}
