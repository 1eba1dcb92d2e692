package config

import (
	"strconv"
	"strings"
)

// shadowed appends to ws a WarnShadowed warning for every node of l, and
// of the levels under it, that no request can reach: a wildcard after
// another wildcard of its key that matches every value it does, and a
// key-only node beside a wildcard that matches every value ("*"). Exact
// values are tried first, so nothing shadows them. The nodes under a
// shadowed node are not looked at: it is the one to fix.
func (l *level) shadowed(ws []Warning) []Warning {
	if l == nil {
		return ws
	}
	for _, kn := range l.keys {
		var all *node // the first wildcard that matches every value
		dead := map[*node]*node{}
		for j, w := range kn.wildcards {
			for _, earlier := range kn.wildcards[:j] {
				if earlier.matches(w.value) {
					dead[w] = earlier
					break
				}
			}
			if all == nil && w.literal == 0 {
				all = w
			}
		}
		if kn.any != nil && all != nil {
			dead[kn.any] = all
		}
		for _, n := range kn.values {
			if by := dead[n]; by != nil {
				ws = append(ws, n.shadowWarning(by))
				continue
			}
			ws = n.children.shadowed(ws)
		}
		if kn.any != nil {
			if by := dead[kn.any]; by != nil {
				ws = append(ws, kn.any.shadowWarning(by))
			} else {
				ws = kn.any.children.shadowed(ws)
			}
		}
	}
	return ws
}

// shadowWarning is the warning that by, a wildcard tried first, shadows n.
func (n *node) shadowWarning(by *node) Warning {
	what := "value " + strconv.Quote(n.value)
	if n.kind == keyNode {
		what = "key-only descriptor"
	}
	return Warning{
		Kind: WarnShadowed, File: n.file, Line: n.line, Column: int(n.column), Field: n.fieldPath(),
		Msg: what + " of key " + strconv.Quote(n.key) + " is never matched: the wildcard " + strconv.Quote(by.value) +
			" (" + by.location(n.file) + ") matches every value it does and is tried first; remove one, or make the earlier one narrower",
	}
}

// location names where n is, as "line 7" in file, or "other.yaml:7".
func (n *node) location(file string) string {
	if n.file == file {
		return "line " + strconv.Itoa(n.line)
	}
	return n.file + ":" + strconv.Itoa(n.line)
}

// fieldPath returns the path of n's descriptor in its file:
// "descriptors[1].descriptors[0]".
func (n *node) fieldPath() string {
	var parts []string
	for p := n; p != nil; p = p.parent {
		parts = append(parts, "descriptors["+strconv.Itoa(int(p.index))+"]")
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}
