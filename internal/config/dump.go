package config

import (
	"encoding/json"
	"strconv"
	"strings"
)

// String renders the loaded rules for humans, one domain after another in
// name order, each rule with its file and line and one line per limit:
//
//	domain "edge" (limits/edge.yaml:1)
//	  edge.api_key (limits/edge.yaml:3) shadow_mode quota_mode allow_negative_hits metadata={"tier":"gold"}
//	    - algorithm=token_bucket requests_per_unit=10 unit=second unit_multiplier=1 burst=20 shards=1
//	    - algorithm=sliding_window_counter requests_per_unit=10000 unit=day unit_multiplier=1 burst=10000 shards=1 name="daily"
//	  edge.internal (limits/edge.yaml:12)
//	    - unlimited
//
// burst is the most hits one request can be granted: the token bucket's
// capacity, requests_per_unit for the other algorithms.
func (c *Config) String() string {
	byDomain := make(map[string][]*Rule, len(c.domains))
	for _, r := range c.rules {
		byDomain[r.Domain] = append(byDomain[r.Domain], r)
	}
	var b strings.Builder
	for _, name := range c.names {
		d := c.domains[name]
		b.WriteString("domain ")
		b.WriteString(strconv.Quote(name))
		b.WriteString(" (")
		writeLocation(&b, d.file, d.line)
		b.WriteString(")\n")
		rules := byDomain[name]
		if len(rules) == 0 {
			b.WriteString("  (no rate limits)\n")
		}
		for _, r := range rules {
			writeRule(&b, r)
		}
	}
	return b.String()
}

// writeLocation writes "file:line", or the file alone when the line is 0,
// as it is for limits from an xDS server.
func writeLocation(b *strings.Builder, file string, line int) {
	b.WriteString(file)
	if line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(line))
	}
}

func writeRule(b *strings.Builder, r *Rule) {
	b.WriteString("  ")
	b.WriteString(r.Path)
	b.WriteString(" (")
	writeLocation(b, r.File, r.Line)
	b.WriteByte(')')
	for _, flag := range []struct {
		set  bool
		name string
	}{{r.ShadowMode, "shadow_mode"}, {r.QuotaMode, "quota_mode"}, {r.AllowNegativeHits, "allow_negative_hits"}, {r.DetailedMetric, "detailed_metric"}, {r.ValueToMetric, "value_to_metric"}, {r.Charge && !r.Debt, "charge=window"}, {r.Charge && r.Debt, "charge=debt"}} {
		if flag.set {
			b.WriteByte(' ')
			b.WriteString(flag.name)
		}
	}
	if r.Metadata != nil {
		// encoding/json sorts the keys, so the dump is stable.
		if js, err := json.Marshal(r.Metadata.AsMap()); err == nil {
			b.WriteString(" metadata=")
			b.Write(js)
		}
	}
	b.WriteByte('\n')
	if r.Unlimited {
		b.WriteString("    - unlimited")
		writeNames(b, r.Name, r.Replaces)
		b.WriteByte('\n')
	}
	for _, l := range r.Limits {
		b.WriteString("    - algorithm=")
		b.WriteString(l.Limit.Algorithm.String())
		b.WriteString(" requests_per_unit=")
		b.WriteString(strconv.FormatUint(l.Limit.Requests, 10))
		b.WriteString(" unit=")
		b.WriteString(l.Unit.String())
		b.WriteString(" unit_multiplier=")
		b.WriteString(strconv.FormatUint(uint64(l.UnitMultiplier), 10))
		b.WriteString(" burst=")
		b.WriteString(strconv.FormatUint(l.Limit.Capacity(), 10))
		b.WriteString(" shards=")
		b.WriteString(strconv.FormatUint(uint64(l.Shards), 10))
		if l.Limit.Calendar {
			b.WriteString(" calendar")
		}
		writeNames(b, l.Name, l.Replaces)
		b.WriteByte('\n')
	}
}

func writeNames(b *strings.Builder, name string, replaces []string) {
	if name != "" {
		b.WriteString(" name=")
		b.WriteString(strconv.Quote(name))
	}
	if len(replaces) > 0 {
		b.WriteString(" replaces=")
		for i, r := range replaces {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(r))
		}
	}
}
