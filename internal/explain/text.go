package explain

import (
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
		for _, st := range d.Steps {
			how := "its key alone"
			switch st.By {
			case "value":
				how = "value " + strconv.Quote(st.Pattern)
			case "wildcard":
				how = "wildcard " + strconv.Quote(st.Pattern)
			}
			fmt.Fprintf(&b, "  %s matched %s at %s\n", st.Key, how, location(st.File, st.Line))
		}
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
