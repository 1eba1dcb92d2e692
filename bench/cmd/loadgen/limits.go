package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// defaultDomain is the domain of the limits that `loadgen limits` writes and
// that a run sends to by default.
const defaultDomain = "loadgen"

// The two kinds of descriptor values a run sends. Every value is one of these
// prefixes, the run's id, a dot and the key's index.
const (
	// liveValuePrefix starts values whose limit a run never reaches: a run
	// measures the cost of admitting them.
	liveValuePrefix = "k."
	// exhaustedValuePrefix starts values whose limit is one hit a day: the
	// run spends it before measuring, so every later request for the value
	// is over the limit.
	exhaustedValuePrefix = "x."
	// hotValuePrefix starts values whose limit is per second and far above
	// what this machine can offer one key (hotLimit), so that no run
	// reaches it however long it is: the hot-key cells send every call for
	// one of them.
	hotValuePrefix = "h."
	// bindingValuePrefix starts values whose limit is bindingLimit a second,
	// which the binding runs offer twice.
	bindingValuePrefix = "b."
	// quotaValuePrefix starts values whose limit is quotaLimit a minute,
	// which `loadgen rlqs` offers twice through RateLimitService and
	// through the Rate Limit Quota Service.
	quotaValuePrefix = "q."
)

// bindingLimit is L of the binding runs' limits, per second: what this
// machine can offer twice over, at a fixed rate, with room to spare.
const bindingLimit = 1000

// quotaLimit is L of the limits `loadgen rlqs` offers twice, per
// quotaWindow: a window of many report intervals (Envoy reports every 5 s,
// and a grant of a windowed limit ends with its window), and twice L a
// window is a load this machine offers at a fixed rate with room to spare.
// quotaUnit is quotaWindow as the limits file spells it.
const (
	quotaLimit  = 30_000
	quotaWindow = time.Minute
	quotaUnit   = "minute"
)

// hotLimit returns the requests per second of the hot rule of alg: far
// above what one key is asked here (some 30 000 a second on two CPUs), and
// for the log, which keeps an entry per hit, the most it may hold.
func hotLimit(alg algorithms.Algorithm) uint64 {
	if alg.Spec().EntryPerHit {
		return algorithms.MaxLogRequests
	}
	return 1_000_000_000
}

// liveLimit returns the requests per day of the live rule of alg: as many as
// a limit may hold, so that no run reaches it (an algorithm that keeps an
// entry per hit, the log, has the smallest range).
func liveLimit(alg algorithms.Algorithm) uint64 {
	if alg.Spec().EntryPerHit {
		return algorithms.MaxLogRequests
	}
	return 1_000_000_000
}

// writeLimits writes the limits YAML that runs are measured against: in the
// given domain, one descriptor key per algorithm, named after it. Any value of
// that key is a limit of its own of liveLimit a day (a "live" value); values
// starting with exhaustedValuePrefix match a wildcard rule of one hit a day
// instead, which the run spends before measuring ("exhausted" values); those
// starting with hotValuePrefix one of hotLimit a second, and those starting
// with bindingValuePrefix one of bindingLimit a second (for the token bucket,
// a bucket of bindingLimit refilling bindingLimit a second), and those
// starting with quotaValuePrefix one of quotaLimit a minute.
func writeLimits(w io.Writer, domain string) error {
	_, err := fmt.Fprintf(w, "# Limits for ratewarden's load generator (loadgen limits).\n"+
		"# Each descriptor key is an algorithm. A value starting with %q is a\n"+
		"# limit no run reaches; one starting with %q a limit of one hit a day,\n"+
		"# spent before a run measures, so every later request for it is denied.\n"+
		"# One starting with %q is a limit per second no run reaches, for one\n"+
		"# hot key; one starting with %q a limit of %d a second, offered twice;\n"+
		"# one starting with %q a limit of %d a %s, offered twice.\n"+
		"domain: %s\ndescriptors:\n", liveValuePrefix, exhaustedValuePrefix, hotValuePrefix, bindingValuePrefix, bindingLimit,
		quotaValuePrefix, quotaLimit, quotaUnit, domain)
	if err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	for _, alg := range algorithms.Algorithms {
		_, err := fmt.Fprintf(w, "  - key: %[1]s\n"+
			"    rate_limit: {unit: day, requests_per_unit: %[2]d, algorithm: %[1]s}\n"+
			"  - key: %[1]s\n"+
			"    value: %[3]q\n"+
			"    rate_limit: {unit: day, requests_per_unit: 1, algorithm: %[1]s}\n"+
			"  - key: %[1]s\n"+
			"    value: %[4]q\n"+
			"    rate_limit: {unit: second, requests_per_unit: %[5]d, algorithm: %[1]s}\n"+
			"  - key: %[1]s\n"+
			"    value: %[6]q\n"+
			"    rate_limit: {unit: second, requests_per_unit: %[7]d, algorithm: %[1]s}\n"+
			"  - key: %[1]s\n"+
			"    value: %[8]q\n"+
			"    rate_limit: {unit: %[10]s, requests_per_unit: %[9]d, algorithm: %[1]s}\n",
			alg, liveLimit(alg), exhaustedValuePrefix+"*", hotValuePrefix+"*", hotLimit(alg), bindingValuePrefix+"*", bindingLimit,
			quotaValuePrefix+"*", quotaLimit, quotaUnit)
		if err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
	}
	return nil
}
