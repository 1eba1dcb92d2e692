package rls

import (
	"fmt"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Bounds limit what one request may ask of the backend, so that no client
// can slow the scripts, grow the keys or keep them long for everyone else:
// its descriptors and their entries, the hits of a descriptor, and the
// numbers and keys of the limit overrides that requests bring. A request beyond a bound is refused with
// InvalidArgument and a message naming the bound, before anything is
// counted. DefaultBounds are the server's; each has its setting
// (RLS_MAX_DESCRIPTORS, RLS_MAX_ENTRIES, ...).
type Bounds struct {
	// MaxDescriptors is the most descriptors one request may have: each is
	// matched, and each of its limits is a script call to the backend.
	MaxDescriptors int
	// MaxEntries is the most entries one descriptor may have. No rule
	// matches more than config.MaxDepth.
	MaxEntries int
	// MaxHits is the most hits one descriptor may take or give back: its
	// hits_addend, or the request's. Envoy itself sends at most 10^9.
	MaxHits uint64
	// MaxLogHits is the most hits one descriptor may take from or give back
	// to a sliding_window_log, whose script adds or removes one entry per
	// hit.
	MaxLogHits uint64
	// MaxOverrideLogSize is the largest requests_per_unit of a limit
	// override enforced by a sliding_window_log: the most entries its log
	// holds.
	MaxOverrideLogSize uint64
	// MaxOverrideLifetime is the longest the state of a limit override may
	// outlive the request that last changed it (algorithms.Limit.Lifetime:
	// the window, two for a sliding_window_counter), and so the longest its
	// keys stay in Redis.
	MaxOverrideLifetime time.Duration
	// MaxUnmatchedEntries is the most entries of a descriptor that matches no
	// rule and brings a limit override, which is then counted under its
	// entries.
	MaxUnmatchedEntries int
	// MaxUnmatchedKeyBytes is the longest identity (the part of the Redis key
	// between the braces, rate.Identity) of such a descriptor.
	MaxUnmatchedKeyBytes int
}

// DefaultBounds returns the bounds of a server: 256 descriptors per request
// (Envoy sends one per rate limit action that applies, a handful; Envoy
// Gateway at most one per rule of a policy, which has at most 256), 64
// entries per descriptor (the most a rule can match, config.MaxDepth), 10^9
// hits per descriptor, and 100 for a sliding_window_log (a script that adds
// 1 000 entries held Redis for 3 to 5 ms on a busy 2-core machine, and one
// of 100 000 for a quarter to half a second); overrides of at most 1 000
// for a sliding_window_log (about 115 KB in Redis), whose state lives at
// most 62 days (a month's window under any algorithm); and overrides of
// unmatched descriptors with at most 16 entries and a 1 024-byte identity.
func DefaultBounds() Bounds {
	return Bounds{
		MaxDescriptors:       256,
		MaxEntries:           config.MaxDepth,
		MaxHits:              1_000_000_000,
		MaxLogHits:           100,
		MaxOverrideLogSize:   1000,
		MaxOverrideLifetime:  62 * 24 * time.Hour,
		MaxUnmatchedEntries:  16,
		MaxUnmatchedKeyBytes: 1024,
	}
}

// validate returns an error naming the first bound that a Service cannot
// take (Bounds.MaxHits): every bound must be positive, a sliding_window_log's
// at most algorithms.MaxLogRequests, and an override's lifetime at least a
// second.
func (b Bounds) validate() error {
	for _, f := range []struct {
		name string
		ok   bool
		want string
		got  any
	}{
		{"MaxDescriptors", b.MaxDescriptors > 0, "at least 1", b.MaxDescriptors},
		{"MaxEntries", b.MaxEntries > 0, "at least 1", b.MaxEntries},
		{"MaxHits", b.MaxHits > 0, "at least 1", b.MaxHits},
		{"MaxLogHits", b.MaxLogHits > 0 && b.MaxLogHits <= algorithms.MaxLogRequests, fmt.Sprintf("in [1, %d]", algorithms.MaxLogRequests), b.MaxLogHits},
		{"MaxOverrideLogSize", b.MaxOverrideLogSize > 0 && b.MaxOverrideLogSize <= algorithms.MaxLogRequests, fmt.Sprintf("in [1, %d]", algorithms.MaxLogRequests), b.MaxOverrideLogSize},
		{"MaxOverrideLifetime", b.MaxOverrideLifetime >= time.Second, "at least 1s", b.MaxOverrideLifetime},
		{"MaxUnmatchedEntries", b.MaxUnmatchedEntries > 0, "at least 1", b.MaxUnmatchedEntries},
		{"MaxUnmatchedKeyBytes", b.MaxUnmatchedKeyBytes > 0, "at least 1", b.MaxUnmatchedKeyBytes},
	} {
		if !f.ok {
			return option.Errorf("Bounds."+f.name, "must be %s, not %v", f.want, f.got)
		}
	}
	return nil
}

// checkSize refuses a request with more descriptors, or a descriptor with
// more entries, than the bounds allow.
func (b *Bounds) checkSize(req *rlsv3.RateLimitRequest) error {
	descs := req.GetDescriptors()
	if n := len(descs); n > b.MaxDescriptors {
		return status.Errorf(codes.InvalidArgument,
			"rls: the request has %d descriptors, more than the %d one request may have (RLS_MAX_DESCRIPTORS): send them in several requests",
			n, b.MaxDescriptors)
	}
	for i, d := range descs {
		if n := len(d.GetEntries()); n > b.MaxEntries {
			return status.Errorf(codes.InvalidArgument,
				"rls: descriptors[%d] has %d entries, more than the %d one descriptor may have (RLS_MAX_ENTRIES): send fewer; no configured rule matches more than %d",
				i, n, b.MaxEntries, config.MaxDepth)
		}
	}
	return nil
}

// checkHits refuses the hits of descriptor i, taken from or given back to
// limit l, when they exceed a bound.
func (b *Bounds) checkHits(i int, hits uint64, l algorithms.Limit) error {
	switch {
	case hits > b.MaxHits:
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d] asks for %d hits, more than the %d one descriptor may take or give back (RLS_MAX_HITS): send them in several requests",
			i, hits, b.MaxHits)
	case l.Algorithm.Spec().EntryPerHit && hits > b.MaxLogHits:
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d] asks for %d hits of a %s, more than the %d it may take or give back at once (RLS_MAX_LOG_HITS), since the log keeps one entry per hit: send fewer, or limit it with a token_bucket or sliding_window_counter",
			i, hits, l.Algorithm, b.MaxLogHits)
	}
	return nil
}

// checkOverride refuses the limit override l of descriptor i when its state
// would be too large or live too long.
func (b *Bounds) checkOverride(i int, l algorithms.Limit) error {
	if l.Algorithm.Spec().EntryPerHit && l.Requests > b.MaxOverrideLogSize {
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d].limit.requests_per_unit %d is more than the %d entries a limit override may give a %s (RLS_MAX_OVERRIDE_LOG_SIZE): ask for fewer, or configure the limit in a rule",
			i, l.Requests, b.MaxOverrideLogSize, l.Algorithm)
	}
	if life := l.Lifetime(); life > b.MaxOverrideLifetime {
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d].limit: a %s of %s keeps its state for %s, longer than the %s a limit override may (RLS_MAX_OVERRIDE_LIFETIME): ask for a shorter window, or configure the limit in a rule",
			i, l.Algorithm, l.Window, life, b.MaxOverrideLifetime)
	}
	return nil
}

// checkUnmatched refuses the limit override of descriptor i, which matches
// no rule and would be counted under k, when k is too large a key.
func (b *Bounds) checkUnmatched(i int, k rate.Key, l algorithms.Limit) error {
	if n := len(k.Entries); n > b.MaxUnmatchedEntries {
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d] matches no rule and has %d entries, more than the %d a limit override of an unmatched descriptor may count under (RLS_MAX_UNMATCHED_ENTRIES): send fewer entries, or configure a rule for them",
			i, n, b.MaxUnmatchedEntries)
	}
	if n := len(rate.Identity(k, l)); n > b.MaxUnmatchedKeyBytes {
		return status.Errorf(codes.InvalidArgument,
			"rls: descriptors[%d] matches no rule and its entries make a key of %d bytes, more than the %d a limit override of an unmatched descriptor may count under (RLS_MAX_UNMATCHED_KEY_BYTES): send shorter entries, or configure a rule for them",
			i, n, b.MaxUnmatchedKeyBytes)
	}
	return nil
}
