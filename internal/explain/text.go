package explain

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/settings"
)

// Text renders the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s", r.Domain)
	if r.Backend == string(settings.BackendMemory) {
		b.WriteString(" (backend memory: the keys are those RLS_BACKEND=redis would use)")
	}
	b.WriteByte('\n')
	for _, s := range r.Effects {
		b.WriteString(s + "\n")
	}
	for i, d := range r.Descriptors {
		fmt.Fprintf(&b, "descriptors[%d] %s\n", i, entriesText(d.Entries))
		writeSteps(&b, d.Steps)
		if d.Rule != nil {
			fmt.Fprintf(&b, "  rule %s at %s\n", d.Rule.Path, location(d.Rule.File, d.Rule.Line))
		} else {
			fmt.Fprintf(&b, "  no rule: %s\n", d.Why)
		}
		for _, s := range d.Effects {
			fmt.Fprintf(&b, "  %s\n", s)
		}
		for _, l := range d.Limits {
			fmt.Fprintf(&b, "  limit %s: %s %d\n", limitText(l), l.Op, l.Hits)
			for _, s := range l.Effects {
				fmt.Fprintf(&b, "    %s\n", s)
			}
			for _, sh := range l.Shards {
				prefix := "    "
				if sh.Shard != nil {
					fmt.Fprintf(&b, "    shard %d: %d per %s\n", *sh.Shard, sh.RequestsPerUnit, windowText(l))
					prefix = "      "
				}
				for _, k := range sh.Keys {
					fmt.Fprintf(&b, "%skey %s (slot %d)\n", prefix, k, sh.Slot)
				}
			}
		}
	}
	return b.String()
}

// writeSteps writes a line for each step: the descriptor an entry
// matched, how, and where.
func writeSteps(b *strings.Builder, steps []Step) {
	for _, st := range steps {
		how := "its key alone"
		switch st.By {
		case "value":
			how = "value " + strconv.Quote(st.Pattern)
		case "wildcard":
			how = "wildcard " + strconv.Quote(st.Pattern)
		}
		fmt.Fprintf(b, "  %s matched %s at %s\n", st.Key, how, location(st.File, st.Line))
	}
}

// entriesText renders entries as key=value, separated by spaces.
func entriesText(entries []Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = quoteText(e.Key) + "=" + quoteText(e.Value)
	}
	return strings.Join(parts, " ")
}

// quoteText quotes s when it is empty or holds what would blur the text.
func quoteText(s string) string {
	if s == "" || strings.ContainsAny(s, " \t=\"") || strconv.Quote(s) != `"`+s+`"` {
		return strconv.Quote(s)
	}
	return s
}

// location renders file:line, or the file alone for line 0.
func location(file string, line int) string {
	if line == 0 {
		return file
	}
	return file + ":" + strconv.Itoa(line)
}

// limitText renders a limit: `"name" 10 per 1 second, token_bucket, burst 20`.
func limitText(l Limit) string {
	var b strings.Builder
	if l.Name != "" {
		b.WriteString(strconv.Quote(l.Name) + " ")
	}
	fmt.Fprintf(&b, "%d per %s, %s", l.RequestsPerUnit, windowText(l), l.Algorithm)
	if l.Burst != 0 {
		fmt.Fprintf(&b, ", burst %d", l.Burst)
	}
	if l.Calendar {
		b.WriteString(", calendar")
	}
	if l.Shadow != "" {
		b.WriteString(", shadow")
	}
	return b.String()
}

// windowText renders a limit's window: "1 second", "5 minute".
func windowText(l Limit) string {
	return strconv.FormatUint(uint64(l.UnitMultiplier), 10) + " " + l.Unit
}

// Text renders the report for people.
func (r *BucketReport) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s", r.Domain)
	if r.Backend == string(settings.BackendMemory) && r.Grant != nil {
		b.WriteString(" (backend memory: the keys are those RLS_BACKEND=redis would use)")
	}
	b.WriteByte('\n')
	id, _ := json.Marshal(r.Bucket) // a map of strings: its keys sorted
	fmt.Fprintf(&b, "bucket %s: the descriptor %s\n", id, entriesText(r.Entries))
	writeSteps(&b, r.Steps)
	if r.Rule != nil {
		fmt.Fprintf(&b, "  rule %s at %s\n", r.Rule.Path, location(r.Rule.File, r.Rule.Line))
	}
	switch {
	case r.Grant != nil:
		g := r.Grant
		what := "grants of hits reserved on"
		if r.Answer == "record" {
			what = "ALLOW_ALL, the usage reported charged to"
		}
		fmt.Fprintf(&b, "  answer: %s %s\n", what, limitText(Limit{
			Name: g.Name, RequestsPerUnit: g.RequestsPerUnit, Unit: g.Unit, UnitMultiplier: g.UnitMultiplier,
			Algorithm: g.Algorithm, Burst: g.Burst, Calendar: g.Calendar,
		}))
		for _, k := range g.Keys {
			fmt.Fprintf(&b, "    key %s (slot %d)\n", k, g.Slot)
		}
		for _, w := range r.Why {
			fmt.Fprintf(&b, "    short of the limit: %s\n", w)
		}
	case r.Rule == nil:
		fmt.Fprintf(&b, "  no rule: %s\n", strings.Join(r.Why, "; "))
		b.WriteString("  answer: no assignment\n")
	case len(r.Why) > 0 && r.Answer == "allow_all":
		b.WriteString("  answer: ALLOW_ALL, counted nowhere, as a grant could not count on the rule:\n")
		for _, w := range r.Why {
			fmt.Fprintf(&b, "    %s\n", w)
		}
	case len(r.Why) > 0:
		b.WriteString("  answer: no assignment, as a grant cannot count on the rule:\n")
		for _, w := range r.Why {
			fmt.Fprintf(&b, "    %s\n", w)
		}
	default:
		b.WriteString("  answer: ALLOW_ALL\n")
	}
	for _, s := range r.Effects {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	return b.String()
}
