package rlqs

import (
	"slices"
	"strings"

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
