package rlqs

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Entries returns the descriptor a bucket id stands for: the id's entries,
// in the order of their keys. With the report's domain it selects a rule
// as a descriptor of RateLimitService does, so {"tenant": "acme"} in domain
// edge is counted by the rule tenant of domain edge.
func Entries(bucket map[string]string) []rate.Entry {
	entries := make([]rate.Entry, 0, len(bucket))
	for k, v := range bucket {
		entries = append(entries, rate.Entry{Key: k, Value: v})
	}
	slices.SortFunc(entries, func(a, b rate.Entry) int { return strings.Compare(a.Key, b.Key) })
	return entries
}

// Answer is what the quota service sends for a bucket. The zero value is
// NoAssignment.
type Answer uint8

// The answers.
const (
	// NoAssignment: no action is sent, and the Envoy's
	// no_assignment_behavior decides the bucket's requests.
	NoAssignment Answer = iota
	// AllowAll: the bucket is assigned ALLOW_ALL, counted nowhere.
	AllowAll
	// Grant: the bucket is granted token buckets of hits reserved on its
	// rule's limit.
	Grant
	// Record: the bucket is assigned ALLOW_ALL, and what the Envoys report
	// they allowed is charged to its rule's limit after the fact: a rule in
	// shadow mode counts and never denies.
	Record
)

// String returns the answer's name: no_assignment, allow_all, grant or
// record.
func (a Answer) String() string {
	switch a {
	case AllowAll:
		return "allow_all"
	case Grant:
		return "grant"
	case Record:
		return "record"
	}
	return "no_assignment"
}

// Decision is what the quota service does with the buckets whose id
// selects a rule.
type Decision struct {
	Answer Answer
	// Limit is the limit a Grant's hits are reserved on, or a Record's
	// charged to; nil for the other answers.
	Limit *config.RateLimit
	// Why says, for NoAssignment, each thing that keeps a grant from
	// counting on the rule, or that no rule matched; for a Grant, what
	// keeps its grants from admitting all the limit allows; for a shadow
	// rule's AllowAll, why its usage is counted nowhere.
	Why []string
}

// minBurstIntervals is how many of Envoy's report intervals of its rate a
// token bucket's burst must hold for grants to admit all it refills: a
// grant's tokens are held from the refill until a report says they were
// served, and what a grant had left when it was replaced until the report
// after. A bucket of 1 500 a second with a burst of 6 s of it admitted
// 56–60% of its rate at twice that demand; with 20 s, all of it.
const minBurstIntervals = 2

// minGrantWindow is the shortest window of a windowed limit (a fixed
// window, a sliding window counter) that a grant fits in: a grant lives
// whole seconds, at least one, and ends inFlight before its window does,
// so a shorter window never has room for one.
const minGrantWindow = inFlight + 2*time.Second

// Decide returns what the quota service does with a bucket whose id
// selects rule: AllowAll for an unlimited rule; a Grant on its limit for a
// rule a grant can count on, one limit, not split over shards, whose hits
// are not charges, and, when windowed, of a window a grant fits in; and
// NoAssignment, saying why, for any other rule and for nil (no rule
// matched). A rule in shadow mode never denies: Record on the limit a
// grant could count on, else AllowAll, saying why nothing is counted. The
// server answers so (with RLS_SHADOW_MODE, a Grant is a Record), and the
// check command and explain report it.
func Decide(rule *config.Rule) Decision {
	switch {
	case rule == nil:
		return Decision{Why: []string{"no rule matches"}}
	case rule.Unlimited:
		return Decision{Answer: AllowAll}
	}
	var why []string
	if n := len(rule.Limits); n != 1 {
		why = append(why, fmt.Sprintf("%d limits (a grant is reserved on one)", n))
	}
	for _, l := range rule.Limits {
		if l.Shards > 1 {
			why = append(why, fmt.Sprintf("shards: %d (a grant is reserved on one key)", l.Shards))
		}
		if lim := l.Limit; lim.Algorithm.Spec().Windowed && lim.Window < minGrantWindow {
			why = append(why, fmt.Sprintf("a %s of %s (a grant lives whole seconds and ends %s before its window: it needs a window of %s or more)",
				lim.Algorithm, lim.Window, inFlight, minGrantWindow))
		}
	}
	switch {
	case rule.Debt:
		why = append(why, "charge: debt (a charge counts hits once spent; a grant reserves them before)")
	case rule.Charge:
		why = append(why, "charge: window, as quota_mode and limits from xDS set it (a charge counts hits once spent; a grant reserves them before)")
	}
	switch {
	case rule.ShadowMode && len(why) > 0:
		return Decision{Answer: AllowAll, Why: why}
	case rule.ShadowMode:
		return Decision{Answer: Record, Limit: &rule.Limits[0]}
	case len(why) > 0:
		return Decision{Why: why}
	}
	d := Decision{Answer: Grant, Limit: &rule.Limits[0]}
	if lim := d.Limit.Limit; lim.Algorithm == algorithms.TokenBucket && lim.Requests > 0 {
		need := minBurstIntervals * DefaultOptions().ReportInterval
		if burst := time.Duration(float64(lim.Capacity()) / float64(lim.Requests) * float64(lim.Window)); burst < need {
			d.Why = append(d.Why, fmt.Sprintf("a burst of %s of its rate (grants admit all it refills only with %s or more: two of Envoy's report intervals)",
				burst.Round(time.Millisecond), need))
		}
	}
	return d
}

// bucketKey names the bucket of entries in a domain.
func bucketKey(domain string, entries []rate.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteString("\x00")
		b.WriteString(e.Key)
		b.WriteString("\x00")
		b.WriteString(e.Value)
	}
	return b.String()
}
