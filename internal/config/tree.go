package config

import (
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// nodeKind says how a descriptor node matches a request's entry.
type nodeKind uint8

const (
	// exactNode matches the entry with its key and value.
	exactNode nodeKind = iota + 1
	// wildcardNode matches its key and any value starting with its prefix
	// (its configured value without the final '*').
	wildcardNode
	// keyNode matches its key and any value.
	keyNode
)

// node is one descriptor of the matching tree. It is immutable once built.
type node struct {
	kind nodeKind
	key  string
	// value is the configured value: "" for a key-only node, the pattern
	// ("v*") for a wildcard.
	value  string
	prefix string
	// share, detailedMetric and valueToMetric are the node's own flags.
	share, detailedMetric, valueToMetric bool
	// rule is the node's rule, nil when it has no rate limit.
	rule *Rule
	// children holds the nested descriptors, nil when there are none.
	children *level
	// parent is nil at a domain's top level.
	parent *node
	// shareKey reports whether this node or an ancestor replaces the
	// request's value in Match.Key; metricValues whether one puts the
	// request's value into Match.MetricKey.
	shareKey, metricValues bool
	line                   int
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
	// wildcards holds the wildcard nodes, longest prefix first.
	wildcards []*node
	// any is the key-only node, or nil.
	any *node
}

// empty reports whether l holds no node.
func (l *level) empty() bool { return len(l.keys) == 0 }

// add adds n to l, unless l holds a node with the same key and value: then it
// returns that node.
func (l *level) add(n *node) (existing *node) {
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
		for i := len(ws) - 1; i > 0 && len(ws[i].prefix) > len(ws[i-1].prefix); i-- {
			ws[i], ws[i-1] = ws[i-1], ws[i]
		}
		kn.wildcards = ws
	}
	return nil
}

// lookup returns the node of l that matches e: the exact node, else the
// wildcard with the longest matching prefix, else the key-only node; nil when
// none matches.
func (l *level) lookup(e algorithms.Entry) *node {
	kn := l.keys[e.Key]
	if kn == nil {
		return nil
	}
	if n := kn.values[e.Value]; n != nil {
		return n
	}
	for _, n := range kn.wildcards {
		if strings.HasPrefix(e.Value, n.prefix) {
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
// level it prefers the node with the entry's key and value, then a wildcard
// node whose prefix the value starts with (the longest such prefix, where
// several match), then the node with the entry's key alone. The rule that
// applies is the one of the node matched by the last entry: a request with
// more entries than the matched branch is deep, or one that ends at a node
// without a rate limit, matches nothing. An unknown domain, or no entries,
// match nothing.
//
// The returned Key holds domain and entries. Its Entries is entries itself
// (not a copy) unless a matched node is a wildcard with share_threshold: then
// it is a copy in which that entry's value is the node's pattern (such as
// "value*"), so that every value the wildcard matches counts against one
// state. Callers must not modify entries while they use the Key.
func (c *Config) Match(domain string, entries []algorithms.Entry) (Match, bool) {
	d := c.domains[domain]
	if d == nil || len(entries) == 0 {
		return Match{}, false
	}
	lvl := d.top
	last := len(entries) - 1
	for i := range entries {
		n := lvl.lookup(entries[i])
		switch {
		case n == nil:
			return Match{}, false
		case i == last:
			if n.rule == nil {
				return Match{}, false
			}
			return n.match(domain, entries), true
		case n.children == nil:
			return Match{}, false
		}
		lvl = n.children
	}
	return Match{}, false
}

// match returns the Match of n, which entries reached.
func (n *node) match(domain string, entries []algorithms.Entry) Match {
	m := Match{
		Rule:      n.rule,
		Key:       algorithms.Key{Domain: domain, Entries: entries},
		MetricKey: n.rule.Path,
	}
	if n.shareKey {
		shared := make([]algorithms.Entry, len(entries))
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
	if n.metricValues {
		size := len(n.rule.Path)
		for _, e := range entries {
			size += len(e.Value) + 1
		}
		var b strings.Builder
		b.Grow(size)
		b.WriteString(n.rule.Domain)
		n.writeMetricKey(&b, entries, len(entries)-1)
		m.MetricKey = b.String()
	}
	return m
}

// writeMetricKey writes the metric key's segments from the top level down to
// n, which entries[i] matched.
func (n *node) writeMetricKey(b *strings.Builder, entries []algorithms.Entry, i int) {
	if n.parent != nil {
		n.parent.writeMetricKey(b, entries, i-1)
	}
	b.WriteByte('.')
	b.WriteString(n.key)
	v := entries[i].Value
	switch {
	case n.kind == exactNode || n.kind == wildcardNode && !n.valueToMetric:
		b.WriteByte('_')
		b.WriteString(n.value)
	case v == "":
	case n.kind == wildcardNode || n.detailedMetric || n.valueToMetric:
		b.WriteByte('_')
		b.WriteString(v)
	}
}
