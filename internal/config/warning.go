package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// WarningKind names what a Warning is about.
type WarningKind string

// The kinds of warnings.
const (
	// WarnShadowed: a descriptor no request can reach, because a wildcard
	// of the same key that is tried before it matches every value it does.
	WarnShadowed WarningKind = "shadowed"
	// WarnMergeKey: a list or mapping that a YAML merge key ("<<") brings
	// in, which the mapping's own field of the same name replaces whole.
	WarnMergeKey WarningKind = "merge_key"
	// WarnLifetime: a limit whose state, and so its Redis keys, lives
	// longer than Options.WarnLifetime after its last hit.
	WarnLifetime WarningKind = "lifetime"
	// WarnLogSize: a sliding_window_log whose log may hold more entries
	// than Options.WarnLogSize.
	WarnLogSize WarningKind = "log_size"
	// WarnShards: a limit split over more shards than it has hits to
	// share, so that fewer are used.
	WarnShards WarningKind = "shards"
)

// Warning is something a Config loads with that is likely a mistake: it is
// not an error, and the server loads it as it is. It is located as an
// Error is.
type Warning struct {
	Kind   WarningKind
	File   string
	Line   int
	Column int
	Field  string
	Msg    string
}

// String returns the warning as "file:line:column: field: message".
func (w Warning) String() string {
	var b strings.Builder
	writePosition(&b, w.File, w.Line, w.Column, w.Field)
	b.WriteString(w.Msg)
	return b.String()
}

// Warnings returns what the Config loaded that is likely a mistake, in the
// order of the files and of the positions within each. The descriptors
// that others shadow are found when Warnings is called, not when the
// Config is loaded: the server never pays for them. It is safe for
// concurrent use.
func (c *Config) Warnings() []Warning {
	ws := slices.Clone(c.warnings)
	for _, name := range c.names {
		ws = c.domains[name].top.shadowed(ws)
	}
	order := make(map[string]int, len(c.files))
	for i, f := range c.files {
		if _, ok := order[f]; !ok {
			order[f] = i
		}
	}
	if c.resources {
		for i := range ws {
			ws[i].Line, ws[i].Column = 0, 0
		}
	}
	slices.SortStableFunc(ws, func(a, b Warning) int {
		return cmp.Or(cmp.Compare(order[a.File], order[b.File]), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Field, b.Field))
	})
	return ws
}

// warn records a warning of kind at n, whose path is path.
func (d *decoder) warn(kind WarningKind, n *yaml.Node, path, format string, args ...any) {
	w := Warning{Kind: kind, File: d.file, Field: path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		w.Line, w.Column = n.Line, n.Column
	}
	d.warnings = append(d.warnings, w)
}

// mergeDropped warns, once for each field as written, when the field own of
// the mapping at path, named name, replaces a list or a mapping that the
// merge key at merge brings in (dropped) and something of it is lost: a
// merge key joins neither lists nor nested mappings, which a reader of a
// descriptor holding "<<: *login" and descriptors of its own may expect it
// to. A mapping that own restates every field of is no loss.
func (d *decoder) mergeDropped(own, dropped field, merge *yaml.Node, path, name string) {
	v, o := followAliases(dropped.value), followAliases(own.value)
	if v == nil || o == nil || d.warned[own.key] {
		return
	}
	var lost string
	switch v.Kind {
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			return
		}
		what := "its item is dropped"
		if len(v.Content) > 1 {
			what = fmt.Sprintf("its %d items are dropped", len(v.Content))
		}
		lost = fmt.Sprintf("the list that the merge key (<<) at line %d brings in: %s, as a merge key never joins lists; restate them here", merge.Line, what)
	case yaml.MappingNode:
		var names []string
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" || hasKey(o, k.Value) {
				continue
			}
			names = append(names, k.Value)
		}
		if len(names) == 0 {
			return
		}
		lost = fmt.Sprintf("the mapping that the merge key (<<) at line %d brings in: its %s dropped, as a merge key never joins nested mappings; restate them here", merge.Line, fieldList(names))
	default:
		return
	}
	if d.warned == nil {
		d.warned = make(map[*yaml.Node]bool)
	}
	d.warned[own.key] = true
	d.warn(WarnMergeKey, own.key, joinPath(path, name), "replaces %s", lost)
}

// fieldList names fields for a message: "burst is", "algorithm and burst
// are", "a, b and c are".
func fieldList(names []string) string {
	if len(names) == 1 {
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// followAliases returns the node n's aliases lead to.
func followAliases(n *yaml.Node) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if hops >= maxAliasHops {
			return nil
		}
		n = n.Alias
	}
	return n
}

// hasKey reports whether n is a mapping with the field name, as written.
func hasKey(n *yaml.Node, name string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == name {
			return true
		}
	}
	return false
}

// limitWarnings warns about the limit l at at, whose path is path, whose
// requests_per_unit is at requestsAt and shards at shardsAt (nil when
// absent): a state that outlives p.warnLifetime, a log longer than
// p.warnLogSize, and shards that a limit this small cannot fill.
func (p *fileParser) limitWarnings(l RateLimit, at, requestsAt, shardsAt *yaml.Node, path string) {
	lim := l.Limit
	if life := lim.Lifetime(); p.warnLifetime > 0 && life > p.warnLifetime {
		p.warn(WarnLifetime, at, path,
			"a %s of %s keeps its state, and its Redis keys, for %s after the last hit, longer than the %s a limit override may (RLS_MAX_OVERRIDE_LIFETIME): one key per value stays that long; a shorter window forgets sooner",
			lim.Algorithm, windowString(l.Unit, l.UnitMultiplier), days(life), days(p.warnLifetime))
	}
	if lim.Algorithm.Spec().EntryPerHit && p.warnLogSize > 0 && lim.Requests > p.warnLogSize {
		if requestsAt == nil {
			requestsAt = at
		}
		p.warn(WarnLogSize, requestsAt, joinPath(path, "requests_per_unit"),
			"a %s keeps one entry per hit: up to %d in each key's log, more than the %d a limit override may have (RLS_MAX_OVERRIDE_LOG_SIZE); sliding_window_counter or token_bucket keep a few numbers instead",
			lim.Algorithm, lim.Requests, p.warnLogSize)
	}
	if capacity := min(lim.Requests, lim.Capacity()); l.Shards > 1 && uint64(l.Shards) > capacity {
		used := "it is not split"
		if capacity > 1 {
			used = fmt.Sprintf("it is split over %d keys, one hit each", capacity)
		}
		p.warn(WarnShards, shardsAt, joinPath(path, "shards"),
			"%d shards, but a limit of %d hits has too few to share: %s", l.Shards, capacity, used)
	}
}

// days renders d in days when it is a whole number of them, as a
// duration otherwise.
func days(d time.Duration) string {
	const day = 24 * time.Hour
	if d%day == 0 {
		if d == day {
			return "1 day"
		}
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
