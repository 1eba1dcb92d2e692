package algorithms

// HoldGroups is, for the tests, how many groups of leases' tokens a token
// bucket keeps.
const HoldGroups = holdGroups

// Holding returns, for the tests, a token bucket's level and the tokens that
// leases hold, both in millionths of a token, and until when the last of
// them are held (µs).
func (s *TokenBucketState) Holding() (level, held, until int64) {
	return s.level, s.holds.total(), s.holds.last()
}

// Capped reports, for the tests, whether a token bucket's level has been at
// its cap, C − H, since some slice while leases hold tokens.
func (s *TokenBucketState) Capped() bool { return s.capped }
