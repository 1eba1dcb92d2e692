package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/rate"
)

// Trace is how one request descriptor went down a domain's tree, as Match
// goes: the descriptor each entry matched, and why no rule applies when none
// does. It is for people (the explain of the check command and of the
// server); Match decides.
type Trace struct {
	// Steps are the descriptors the entries matched, one per entry, in
	// order, up to the first entry that matched none.
	Steps []TraceStep
	// Rule is the rule that applies, nil when none does.
	Rule *Rule
	// Why says why no rule applies; empty when one does.
	Why string
}

// TraceStep is the descriptor of the tree that one request entry matched.
type TraceStep struct {
	Entry rate.Entry
	// By says how it matched: "value" (the configured value is the
	// entry's), "wildcard" (Pattern matches it) or "key" (a descriptor of
	// the key alone, which matches any value).
	By string
	// Pattern is the configured value: the value, the wildcard, or "" for
	// a descriptor of the key alone.
	Pattern string
	// File and Line locate the descriptor.
	File string
	Line int
}

// maxListed bounds the keys or values a Trace's Why lists.
const maxListed = 8

// Trace returns how the request descriptor of domain whose entries are
// entries goes down the tree: the same way as Match, with the reason
// when it matches nothing. It is safe for concurrent use.
func (c *Config) Trace(domain string, entries []rate.Entry) Trace {
	d := c.domains[domain]
	switch {
	case d == nil:
		return Trace{Why: "domain " + strconv.Quote(domain) + " is not configured (" + listed("domains", c.names) + ")"}
	case len(entries) == 0:
		return Trace{Why: "the descriptor has no entries"}
	}
	var t Trace
	n, matched, at := d.top.walk(entries, func(n *node) {
		t.Steps = append(t.Steps, n.step(entries[len(t.Steps)]))
	})
	switch {
	case matched < len(entries) && at == nil:
		t.Why = "the request has more entries than the branch it matched: the descriptor at " + n.location("") +
			" has no nested descriptors, so " + entryString(entries[matched]) + " and what follows match nothing; a rule applies to a request whose entries end where the rule is"
	case matched < len(entries):
		t.Why = at.miss(entries[matched], matched == 0)
	case n.rule == nil:
		t.Why = "the descriptor at " + n.location("") + " that the last entry matched has no rate limit of its own (only descriptors nested in it have): a rule applies to a request whose entries end where the rule is"
	default:
		t.Rule = n.rule
	}
	return t
}

// step describes the match of e by n.
func (n *node) step(e rate.Entry) TraceStep {
	s := TraceStep{Entry: e, Pattern: n.value, File: n.file, Line: n.line}
	switch n.kind {
	case exactNode:
		s.By = "value"
	case wildcardNode:
		s.By = "wildcard"
	default:
		s.By = "key"
	}
	return s
}

// miss says why e matches no node of l, the top level when top.
func (l *level) miss(e rate.Entry, top bool) string {
	where := "nested in the descriptor the entry before matched"
	if top {
		where = "at the top of the domain"
	}
	kn := l.keys[e.Key]
	if kn == nil {
		keys := make([]string, 0, len(l.keys))
		for k := range l.keys {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "no descriptor of key " + strconv.Quote(e.Key) + " " + where + " (" + listed("keys", keys) + ")"
	}
	values := make([]string, 0, len(kn.values))
	for v := range kn.values {
		values = append(values, v)
	}
	slices.Sort(values)
	return "no descriptor of key " + strconv.Quote(e.Key) + " " + where + " matches the value " + strconv.Quote(e.Value) +
		" (" + listed("values", values) + "), and there is none of the key alone"
}

// listed names a few of things, quoted: `keys "a", "b"`, or "no keys".
func listed(what string, things []string) string {
	if len(things) == 0 {
		return "no " + what
	}
	quoted := make([]string, 0, min(len(things), maxListed))
	for _, t := range things[:min(len(things), maxListed)] {
		quoted = append(quoted, strconv.Quote(t))
	}
	s := what + " " + strings.Join(quoted, ", ")
	if len(things) > maxListed {
		s += " and " + strconv.Itoa(len(things)-maxListed) + " more"
	}
	return s
}

// entryString renders e as key=value, quoting each part that needs it.
func entryString(e rate.Entry) string {
	return quoteIfNeeded(e.Key) + "=" + quoteIfNeeded(e.Value)
}

// quoteIfNeeded quotes s unless it is plain: not empty, and printable
// without spaces, quotes, '=' or ','.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"=,") || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}
