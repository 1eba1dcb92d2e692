// Package rlstest helps the tests of the rate limit service and of the
// layers under it: the requests they send, the limits they decide under, and
// a backend that answers late. It imports no part of the service, so that
// package rls's own tests use it too.
package rlstest

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Descriptor returns a descriptor of the entries kv: key, value, key,
// value…; a key without a value is left out.
func Descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// Request returns a request of domain for descs.
func Request(domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// Decided reports whether resp is a decision of the backend, not the
// failure mode's answer: its limited status carries the time until reset.
func Decided(resp *rlsv3.RateLimitResponse) bool {
	return len(resp.GetStatuses()) > 0 && resp.GetStatuses()[0].GetDurationUntilReset() != nil
}

// Codes returns the code of each status of resp, in order.
func Codes(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	var cs []rlsv3.RateLimitResponse_Code
	for _, s := range resp.GetStatuses() {
		cs = append(cs, s.GetCode())
	}
	return cs
}
