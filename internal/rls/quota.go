package rls

import "time"

// verdict decides whether a request is over its limits from its
// descriptors, as envoyproxy/ratelimit does with quota mode: the request is
// over when a descriptor outside quota mode is over, or when every
// descriptor in quota mode is. A quota descriptor over its limit alone
// keeps its OVER_LIMIT status and lets the request through. A descriptor
// whose limits shadow mode let through is not over. The zero value holds no
// descriptor.
type verdict struct {
	over          bool          // a descriptor outside quota mode is over
	wait          time.Duration // the longest wait of those
	quotas, spent int           // the quota descriptors, and those over
	quotaWait     time.Duration // the shortest wait of the quotas over
}

// add counts one descriptor that is not unlimited: whether it is in quota
// mode, whether it is over its limit, and the wait until it would admit.
func (v *verdict) add(quota, over bool, wait time.Duration) {
	switch {
	case quota:
		v.quotas++
		if over {
			if v.spent == 0 || wait < v.quotaWait {
				v.quotaWait = wait
			}
			v.spent++
		}
	case over:
		v.over = true
		v.wait = max(v.wait, wait)
	}
}

// result reports whether the request is over its limits and, if so, how
// long until it would be admitted: until every descriptor outside quota
// mode admits and, when all quotas are spent, one of them admits again.
func (v *verdict) result() (over bool, wait time.Duration) {
	wait = v.wait
	if v.quotas > 0 && v.spent == v.quotas {
		return true, max(wait, v.quotaWait)
	}
	return v.over, wait
}
