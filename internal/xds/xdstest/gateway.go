package xdstest

import (
	"net/netip"
	"strconv"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// Rule is one rule of a BackendTrafficPolicy's global rate limit, reduced to
// what decides the descriptors: the clients it selects by header and source
// address, and its limit. A rule without headers or CIDR applies to every
// request of its route.
type Rule struct {
	Headers []HeaderMatch
	// CIDR selects clients by source address, "" for none; with
	// CIDRDistinct each address has its own limit, else they share one.
	CIDR         string
	CIDRDistinct bool
	Requests     uint32
	Unit         rlsconfv3.RateLimitUnit
	Shadow       bool
}

// HeaderMatch selects requests by a header: with Distinct, every value of
// the header has its own limit; else only the value Value is selected.
type HeaderMatch struct {
	Name, Value string
	Distinct    bool
}

// Config returns the RateLimitConfig Envoy Gateway serves for one listener
// whose one route carries rules, as its translator builds it: the domain
// and name are the listener's, the top descriptor is the route (key and
// value its name), and under it each rule is a chain of descriptors, one
// per header match, then masked_remote_address (and remote_address when
// distinct) for the CIDR, or rule-<i>-match--1 when the rule matches
// everything, with the limit on the last.
func Config(listener, route string, rules ...Rule) *rlsconfv3.RateLimitConfig {
	top := &rlsconfv3.RateLimitDescriptor{Key: route, Value: route}
	for i, r := range rules {
		var head, cur *rlsconfv3.RateLimitDescriptor
		link := func(d *rlsconfv3.RateLimitDescriptor) {
			d.ShadowMode = r.Shadow
			if cur == nil {
				head = d
			} else {
				cur.Descriptors = []*rlsconfv3.RateLimitDescriptor{d}
			}
			cur = d
		}
		for m, h := range r.Headers {
			d := &rlsconfv3.RateLimitDescriptor{Key: ruleMatch(i, m)}
			if !h.Distinct {
				d.Value = ruleMatch(i, m)
			}
			link(d)
		}
		if r.CIDR != "" {
			link(&rlsconfv3.RateLimitDescriptor{Key: "masked_remote_address", Value: r.CIDR})
			if r.CIDRDistinct {
				link(&rlsconfv3.RateLimitDescriptor{Key: "remote_address"})
			}
		}
		if len(r.Headers) == 0 && r.CIDR == "" {
			link(&rlsconfv3.RateLimitDescriptor{Key: ruleMatch(i, -1), Value: ruleMatch(i, -1)})
		}
		cur.RateLimit = &rlsconfv3.RateLimitPolicy{RequestsPerUnit: r.Requests, Unit: r.Unit}
		top.Descriptors = append(top.Descriptors, head)
	}
	return &rlsconfv3.RateLimitConfig{Name: listener, Domain: listener, Descriptors: []*rlsconfv3.RateLimitDescriptor{top}}
}

// HTTPRequest is what the rate limit actions of a rule look at.
type HTTPRequest struct {
	Headers  map[string]string
	ClientIP string
}

// Descriptors returns the descriptors Envoy sends for req on route, with the
// rate limit actions Envoy Gateway gives each rule: one descriptor per rule
// whose every action produces an entry (a header that is present, or has
// the value matched; a client address inside the CIDR).
func Descriptors(route string, rules []Rule, req HTTPRequest) []*ratelimitv3.RateLimitDescriptor {
	var out []*ratelimitv3.RateLimitDescriptor
	ip, ipErr := netip.ParseAddr(req.ClientIP)
rules:
	for i, r := range rules {
		entries := []*ratelimitv3.RateLimitDescriptor_Entry{{Key: route, Value: route}}
		for m, h := range r.Headers {
			v, ok := req.Headers[h.Name]
			switch {
			case !ok, !h.Distinct && v != h.Value:
				continue rules
			case h.Distinct:
				entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: ruleMatch(i, m), Value: v})
			default:
				entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: ruleMatch(i, m), Value: ruleMatch(i, m)})
			}
		}
		if r.CIDR != "" {
			prefix, err := netip.ParsePrefix(r.CIDR)
			if err != nil || ipErr != nil || !prefix.Contains(ip) {
				continue
			}
			entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "masked_remote_address", Value: r.CIDR})
			if r.CIDRDistinct {
				entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "remote_address", Value: req.ClientIP})
			}
		}
		if len(r.Headers) == 0 && r.CIDR == "" {
			entries = append(entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: ruleMatch(i, -1), Value: ruleMatch(i, -1)})
		}
		out = append(out, &ratelimitv3.RateLimitDescriptor{Entries: entries})
	}
	return out
}

// ruleMatch is Envoy Gateway's descriptor key of a rule's match m (-1: the
// rule matches everything).
func ruleMatch(rule, m int) string {
	return "rule-" + strconv.Itoa(rule) + "-match-" + strconv.Itoa(m)
}
