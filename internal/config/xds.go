package config

import (
	"fmt"
	"strconv"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"gopkg.in/yaml.v3"
)

// FromRateLimitConfigs builds a Config from RateLimitConfig resources, the
// limits an xDS management server (Envoy Gateway's, for one) serves to
// envoyproxy/ratelimit: one domain per resource, each with a tree of
// descriptors. A resource means what the same fields mean in a limits file,
// and is checked as strictly: it is written out as the YAML document with
// those fields and parsed by Parse, so that the two ways in can never drift
// apart.
//
// Every error is an *Error whose File names the resource
// (`RateLimitConfig "name"`, or `RateLimitConfig [i]` when it has no name)
// and whose Field is the path of the offending field inside it, such as
// "descriptors[0].rate_limit.unit"; its Line is 0, since a resource has no
// lines. The Rules and domains of the Config likewise carry the resource as
// their File and 0 as their Line.
//
// A resource cannot say how its hits are counted, so every limit of one is
// counted as envoyproxy/ratelimit counts it: each hit recorded, even past the
// limit and when the request is denied, until its window ends (Rule.Charge
// without Rule.Debt), in the algorithm opts.DefaultAlgorithm names. So a
// budget charged after the fact (Envoy's apply_on_stream_done) holds, as it
// does with the peer. Nor can it ask for the calendar: its windows are of
// fixed length from the epoch (a month of 30 days), as the peer counts
// them, except for the units of opts.XDSCalendar.
//
// Two resources of one domain are an error, unless opts.MergeDomains: then
// they are merged as files are, as envoyproxy/ratelimit merges them with
// MERGE_DOMAIN_CONFIG: their top-level descriptors join one tree, in the
// order of the resources, and a top-level descriptor that two of them give
// (the same key and value) is an error naming both.
//
// A policy whose unit is UNKNOWN (the enum's zero) is an error, unless it is
// unlimited. Resources that are nil are skipped. FromRateLimitConfigs is
// safe for concurrent use.
func FromRateLimitConfigs(resources []*rlsconfv3.RateLimitConfig, opts Options) (*Config, error) {
	files := make([]File, 0, len(resources))
	names := make(map[string]bool, len(resources))
	domains := make(map[string]string, len(resources))
	// tops holds, per domain, where each top-level key and value was given.
	tops := make(map[string]map[[2]string]string, len(resources))
	for i, r := range resources {
		if r == nil {
			continue
		}
		label := ResourceLabel(i, r.GetName())
		if r.GetName() != "" {
			if names[r.GetName()] {
				return nil, &Error{File: label, Field: "name", Msg: "another resource has the same name"}
			}
			names[r.GetName()] = true
		}
		if err := checkDuplicateDescriptors(label, "descriptors", r.GetDescriptors()); err != nil {
			return nil, err
		}
		if d := r.GetDomain(); d != "" {
			if prev, ok := domains[d]; ok && !opts.MergeDomains {
				return nil, &Error{File: label, Field: "domain", Msg: fmt.Sprintf("duplicate domain %q (also in %s)", d, prev)}
			} else if !ok {
				domains[d] = label
				tops[d] = make(map[[2]string]string)
			}
			if err := checkMergedDescriptors(label, r.GetDescriptors(), tops[d]); err != nil {
				return nil, err
			}
		}
		doc := xdsDocument{Domain: r.GetDomain(), Descriptors: xdsDescriptors(r.GetDescriptors(), opts.XDSCalendar)}
		data, err := yaml.Marshal(doc)
		if err != nil {
			return nil, &Error{File: label, Msg: "cannot be written as YAML: " + err.Error(), Err: err}
		}
		files = append(files, File{Name: label, Data: data})
	}
	c, err := Parse(files, opts)
	if err != nil {
		for _, e := range ErrorsOf(err) {
			// The line is one of the YAML written above, which nobody sees.
			e.Line, e.Column = 0, 0
		}
		return nil, err
	}
	c.resources = true
	for _, d := range c.domains {
		d.line = 0
	}
	for _, r := range c.rules {
		r.Line, r.Column = 0, 0
	}
	return c, nil
}

// ResourceLabel names the i-th resource, called name, in errors and in
// Rule.File: `RateLimitConfig "name"`, or `RateLimitConfig [i]` when name is
// empty.
func ResourceLabel(i int, name string) string {
	if name == "" {
		return "RateLimitConfig [" + strconv.Itoa(i) + "]"
	}
	return "RateLimitConfig " + strconv.Quote(name)
}

// checkDuplicateDescriptors reports two descriptors of one level with the
// same key and value. Parse would find them too, but would name the line of
// the first in YAML that nobody sees.
func checkDuplicateDescriptors(label, path string, ds []*rlsconfv3.RateLimitDescriptor) error {
	seen := make(map[[2]string]int, len(ds))
	for i, d := range ds {
		p := path + "[" + strconv.Itoa(i) + "]"
		if d.GetKey() != "" {
			kv := [2]string{d.GetKey(), d.GetValue()}
			if j, ok := seen[kv]; ok {
				return &Error{File: label, Field: p, Msg: fmt.Sprintf("duplicate descriptor: key %q and value %q are also those of %s[%d]",
					kv[0], kv[1], path, j)}
			}
			seen[kv] = i
		}
		if err := checkDuplicateDescriptors(label, p+".descriptors", d.GetDescriptors()); err != nil {
			return err
		}
	}
	return nil
}

// checkMergedDescriptors reports a top-level descriptor of the resource
// label that an earlier resource of the same domain gave already, as seen
// records them, and records those of label. Parse would find such a
// descriptor too, but would name a line of YAML that nobody sees.
func checkMergedDescriptors(label string, ds []*rlsconfv3.RateLimitDescriptor, seen map[[2]string]string) error {
	for i, d := range ds {
		if d.GetKey() == "" {
			continue
		}
		kv := [2]string{d.GetKey(), d.GetValue()}
		p := "descriptors[" + strconv.Itoa(i) + "]"
		if first, ok := seen[kv]; ok {
			return &Error{File: label, Field: p, Msg: fmt.Sprintf("duplicate descriptor: key %q and value %q are also those of %s in the same domain",
				kv[0], kv[1], first)}
		}
		seen[kv] = label + " " + p
	}
	return nil
}

// xdsDocument is a RateLimitConfig as a limits file writes it.
type xdsDocument struct {
	Domain      string           `yaml:"domain"`
	Descriptors []*xdsDescriptor `yaml:"descriptors,omitempty"`
}

// xdsDescriptor is a RateLimitDescriptor as a limits file writes it. Fields
// that are unset in the message are left out, so that a field this package
// does not know fails the parse only where it is used.
type xdsDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value,omitempty"`
	RateLimit      *xdsRateLimit    `yaml:"rate_limit,omitempty"`
	Descriptors    []*xdsDescriptor `yaml:"descriptors,omitempty"`
	ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
	DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
	QuotaMode      bool             `yaml:"quota_mode,omitempty"`
	Metadata       map[string]any   `yaml:"metadata,omitempty"`
	// Charge is "window" where the descriptor counts hits: see
	// FromRateLimitConfigs.
	Charge string `yaml:"charge,omitempty"`
}

// xdsRateLimit is a RateLimitPolicy as a limits file writes it.
type xdsRateLimit struct {
	Unit            string        `yaml:"unit,omitempty"`
	RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
	Unlimited       bool          `yaml:"unlimited,omitempty"`
	Name            string        `yaml:"name,omitempty"`
	Replaces        []*xdsReplace `yaml:"replaces,omitempty"`
	Calendar        bool          `yaml:"calendar,omitempty"`
}

// xdsReplace is a RateLimitReplace as a limits file writes it.
type xdsReplace struct {
	Name string `yaml:"name"`
}

// xdsDescriptors writes ds as a limits file's descriptors; the limits of the
// units of calendar count in calendar windows.
func xdsDescriptors(ds []*rlsconfv3.RateLimitDescriptor, calendar CalendarUnits) []*xdsDescriptor {
	if len(ds) == 0 {
		return nil
	}
	out := make([]*xdsDescriptor, len(ds))
	for i, d := range ds {
		out[i] = &xdsDescriptor{
			Key:            d.GetKey(),
			Value:          d.GetValue(),
			RateLimit:      xdsPolicy(d.GetRateLimit(), calendar),
			Descriptors:    xdsDescriptors(d.GetDescriptors(), calendar),
			ShadowMode:     d.GetShadowMode(),
			DetailedMetric: d.GetDetailedMetric(),
			QuotaMode:      d.GetQuotaMode(),
		}
		if m := d.GetMetadata(); m != nil {
			out[i].Metadata = m.AsMap()
		}
		if p := d.GetRateLimit(); p != nil && !p.GetUnlimited() {
			out[i].Charge = "window"
		}
	}
	return out
}

// xdsPolicy writes p as a rate_limit. The unit is the enum's name, which
// Parse reads in any case; an unlimited policy leaves out an UNKNOWN unit
// and a zero requests_per_unit, which are how the message says "none". A
// limit whose unit is in calendar asks for calendar windows.
func xdsPolicy(p *rlsconfv3.RateLimitPolicy, calendar CalendarUnits) *xdsRateLimit {
	if p == nil {
		return nil
	}
	out := &xdsRateLimit{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if !p.GetUnlimited() || p.GetUnit() != rlsconfv3.RateLimitUnit_UNKNOWN {
		out.Unit = p.GetUnit().String()
	}
	if n := p.GetRequestsPerUnit(); !p.GetUnlimited() || n != 0 {
		out.RequestsPerUnit = &n
	}
	if u, ok := parseUnit(p.GetUnit().String()); ok && !p.GetUnlimited() && calendar.Has(u) {
		out.Calendar = true
	}
	for _, r := range p.GetReplaces() {
		out.Replaces = append(out.Replaces, &xdsReplace{Name: r.GetName()})
	}
	return out
}
