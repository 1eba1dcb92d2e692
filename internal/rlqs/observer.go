package rlqs

import "github.com/ratewarden/ratewarden/internal/rate"

// Observer is told what the quota service does, for metrics. op names the
// bucket's limit (its Key's domain, its Tag, its Limit). Its methods are
// called concurrently and must be quick.
type Observer interface {
	// ObserveGrant is called for each grant of hits made.
	ObserveGrant(op *rate.Op, hits uint64)
	// ObserveUsage is called with what an Envoy reported of a bucket: the
	// requests it allowed and denied since its last report.
	ObserveUsage(op *rate.Op, allowed, denied uint64)
	// ObserveUngranted is called with the requests an Envoy reported
	// allowed of a bucket beyond what its grants held, which are recorded
	// as usage after the fact: admitted by its filter's own fallback (an
	// ALLOW_ALL no_assignment_behavior or expired_assignment_behavior).
	ObserveUngranted(op *rate.Op, allowed uint64)
	// ObserveShort is called for each grant asked of a limit that had less
	// room than asked: the grant is cut to the room there is, or not made.
	ObserveShort(op *rate.Op)
	// ObserveStreams is called with +1 when an Envoy's stream opens and -1
	// when it ends.
	ObserveStreams(delta int)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) ObserveGrant(*rate.Op, uint64)         {}
func (nopObserver) ObserveUsage(*rate.Op, uint64, uint64) {}
func (nopObserver) ObserveUngranted(*rate.Op, uint64)     {}
func (nopObserver) ObserveShort(*rate.Op)                 {}
func (nopObserver) ObserveStreams(int)                    {}
