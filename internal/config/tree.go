package config

import (
	"strings"

	"github.com/ratewarden/ratewarden/internal/rate"
)

// nodeKind says how a descriptor node matches a request's entry.
type nodeKind uint8

const (
	// exactNode matches the entry with its key and value.
	exactNode nodeKind = iota + 1
	// wildcardNode matches its key and any value that its pattern (its
	// configured value, holding at least one '*') matches.
	wildcardNode
	// keyNode matches its key and any value.
	keyNode
)

// node is one descriptor of the matching tree. It is immutable once built.
type node struct {
	kind nodeKind
	key  string
	// value is the configured value: "" for a key-only node, the pattern
	// ("v*", "a*b") for a wildcard.
	value string
	// parts is a wildcard's pattern split at each '*': ["a", "b"] for
	// "a*b"; literal is the sum of their lengths, the shortest value the
	// pattern can match.
	parts   []string
	literal int
	// share, detailedMetric and valueToMetric are the node's own flags.
	share, detailedMetric, valueToMetric bool
	// rule is the node's rule, nil when it has no rate limit.
	rule *Rule
	// children holds the nested descriptors, nil when there are none.
	children *level
	// parent is nil at a domain's top level.
	parent *node
	// shareKey reports whether this node or an ancestor replaces the
	// request's value in Match.Key.
	shareKey bool
	// valueMetric reports whether this node or an ancestor puts the
	// request's value into the metric key of a rule without
	// detailed_metric; detailedValues whether one does for a rule with it.
	valueMetric, detailedValues bool
	// file, line and column locate the descriptor, and index is its place
	// in its list of descriptors, for warnings.
	file          string
	line          int
	column, index int32
}

// setPattern makes n, whose value holds a '*', a wildcard node.
func (n *node) setPattern() {
	n.kind = wildcardNode
	n.parts = strings.Split(n.value, "*")
	for _, p := range n.parts {
		n.literal += len(p)
	}
}

// matches reports whether the wildcard n matches v: each '*' of its pattern
// stands for any run of bytes, the empty one too. It does not allocate.
func (n *node) matches(v string) bool {
	if len(v) < n.literal {
		return false
	}
	first, last := n.parts[0], n.parts[len(n.parts)-1]
	if !strings.HasPrefix(v, first) || !strings.HasSuffix(v, last) {
		return false
	}
	// The literal length check keeps the prefix and suffix apart; the
	// parts between them must follow in order, and the leftmost place
	// of each leaves the most room for the rest.
	rest := v[len(first) : len(v)-len(last)]
	for _, p := range n.parts[1 : len(n.parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// level holds the nodes of one level of the tree: a domain's top-level
// descriptors, or a node's nested ones, grouped by key.
type level struct {
	keys map[string]*keyNodes
}

// keyNodes holds the nodes of one key at one level.
type keyNodes struct {
	// values holds the exact and wildcard nodes by configured value.
	values map[string]*node
	// wildcards holds the wildcard nodes in the order they are tried: the
	// order of the files, or the most literal bytes first.
	wildcards []*node
	// any is the key-only node, or nil.
	any *node
}

// empty reports whether l holds no node.
func (l *level) empty() bool { return len(l.keys) == 0 }

// add adds n to l, unless l holds a node with the same key and value: then it
// returns that node. Wildcards are tried in the order they are added, unless
// mostSpecific puts those with more literal bytes first.
func (l *level) add(n *node, mostSpecific bool) (existing *node) {
	kn := l.keys[n.key]
	if kn == nil {
		if l.keys == nil {
			l.keys = make(map[string]*keyNodes)
		}
		kn = &keyNodes{}
		l.keys[n.key] = kn
	}
	if n.kind == keyNode {
		if kn.any != nil {
			return kn.any
		}
		kn.any = n
		return nil
	}
	if prev := kn.values[n.value]; prev != nil {
		return prev
	}
	if kn.values == nil {
		kn.values = make(map[string]*node)
	}
	kn.values[n.value] = n
	if n.kind == wildcardNode {
		ws := append(kn.wildcards, n)
		for i := len(ws) - 1; mostSpecific && i > 0 && ws[i].literal > ws[i-1].literal; i-- {
			ws[i], ws[i-1] = ws[i-1], ws[i]
		}
		kn.wildcards = ws
	}
	return nil
}

// lookup returns the node of l that matches e: the node with e's value, else
// the first wildcard that matches it, else the key-only node; nil when none
// matches.
func (l *level) lookup(e rate.Entry) *node {
	kn := l.keys[e.Key]
	if kn == nil {
		return nil
	}
	if n := kn.values[e.Value]; n != nil {
		return n
	}
	for _, n := range kn.wildcards {
		if n.matches(e.Value) {
			return n
		}
	}
	return kn.any
}

// Match returns the rule that applies to one request descriptor of domain,
// whose entries are entries, and reports whether one does. It is safe for
// concurrent use and allocates only when the Key or MetricKey it returns
// differs from entries or Rule.Path.
//
// As in envoyproxy/ratelimit, it walks the tree one entry at a time. At each
// level it prefers the node with the entry's key and value, then the first
// wildcard node of that key whose pattern matches the value (in the order of
// the files, or with the most literal bytes under
// Options.WildcardPrecedence MostSpecificWildcard), then the node with the
// entry's key alone. The rule that applies is the one of the node matched by
// the last entry: a request with more entries than the matched branch is
// deep, or one that ends at a node without a rate limit, matches nothing. An
// unknown domain, or no entries, match nothing.
//
// The returned Key holds domain and entries. Its Entries is entries itself
// (not a copy) unless a matched node is a wildcard with share_threshold: then
// it is a copy in which that entry's value is the node's pattern (such as
// "value*"), so that every value the wildcard matches counts against one
// state. Callers must not modify entries while they use the Key.
func (c *Config) Match(domain string, entries []rate.Entry) (Match, bool) {
	d := c.domains[domain]
	if d == nil || len(entries) == 0 {
		return Match{}, false
	}
	n, matched, _ := d.top.walk(entries, nil)
	if matched < len(entries) || n.rule == nil {
		return Match{}, false
	}
	return n.match(domain, entries), true
}

// walk follows entries down the tree from l, one level per entry, as Match
// does, telling visit (when not nil) each node it reaches. It returns how
// many entries found a node (matched), the node the last of them found (nil
// when none did), and, when an entry found none, the level it was looked
// up in (nil when the node before it has no nested descriptors).
func (l *level) walk(entries []rate.Entry, visit func(*node)) (n *node, matched int, at *level) {
	at = l
	for i := range entries {
		if at == nil {
			return n, i, nil
		}
		next := at.lookup(entries[i])
		if next == nil {
			return n, i, at
		}
		n = next
		if visit != nil {
			visit(n)
		}
		at = n.children
	}
	return n, len(entries), nil
}

// match returns the Match of n, which entries reached.
func (n *node) match(domain string, entries []rate.Entry) Match {
	m := Match{
		Rule:      n.rule,
		Key:       rate.Key{Domain: domain, Entries: entries},
		MetricKey: n.rule.Path,
	}
	if n.shareKey {
		shared := make([]rate.Entry, len(entries))
		copy(shared, entries)
		i := len(shared) - 1
		for p := n; p != nil; p = p.parent {
			if p.kind == wildcardNode && p.share {
				shared[i].Value = p.value
			}
			i--
		}
		m.Key.Entries = shared
	}
	detailed := n.rule.DetailedMetric
	if detailed && n.detailedValues || !detailed && n.valueMetric {
		size := len(n.rule.Path)
		for _, e := range entries {
			size += len(e.Value) + 1
		}
		var b strings.Builder
		b.Grow(size)
		b.WriteString(n.rule.Domain)
		n.writeMetricKey(&b, entries, len(entries)-1, detailed)
		m.MetricKey = b.String()
	}
	return m
}

// writeMetricKey writes the metric key's segments from the top level down to
// n, which entries[i] matched, as envoyproxy/ratelimit names its stats. With
// detailed (the matched rule's detailed_metric) every level shows the
// request's value; without, only key-only and wildcard levels with
// value_to_metric do, the others their configured value. A wildcard with
// share_threshold always shows its pattern, and an empty value is left out.
func (n *node) writeMetricKey(b *strings.Builder, entries []rate.Entry, i int, detailed bool) {
	if n.parent != nil {
		n.parent.writeMetricKey(b, entries, i-1, detailed)
	}
	b.WriteByte('.')
	b.WriteString(n.key)
	v := entries[i].Value
	switch {
	case n.kind == wildcardNode && n.share:
		v = n.value
	case detailed:
	case n.kind == exactNode:
		v = n.value
	case n.kind == wildcardNode && !n.valueToMetric:
		v = n.value
	case n.kind == keyNode && !n.valueToMetric:
		v = ""
	}
	if v != "" {
		b.WriteByte('_')
		b.WriteString(v)
	}
}
