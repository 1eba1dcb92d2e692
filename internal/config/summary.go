package config

import "github.com/ratewarden/ratewarden/internal/algorithms"

// DomainSummary says what a Config holds for one domain, in numbers.
type DomainSummary struct {
	Domain string
	// Files configure the domain, in order: several when merged.
	Files []string
	// Rules counts the descriptors with a rate limit, Unlimited those of
	// them that are unlimited.
	Rules, Unlimited int
	// Limits counts the limits of the rules; Algorithms, how many of them
	// each algorithm enforces, by algorithm.
	Limits     int
	Algorithms map[algorithms.Algorithm]int
}

// Summaries returns a DomainSummary for each domain, in name order.
func (c *Config) Summaries() []DomainSummary {
	byName := make(map[string]*DomainSummary, len(c.names))
	out := make([]DomainSummary, len(c.names))
	for i, name := range c.names {
		d := c.domains[name]
		out[i] = DomainSummary{Domain: name, Files: append([]string(nil), d.files...), Algorithms: map[algorithms.Algorithm]int{}}
		byName[name] = &out[i]
	}
	for _, r := range c.rules {
		s := byName[r.Domain]
		if s == nil {
			continue
		}
		s.Rules++
		if r.Unlimited {
			s.Unlimited++
		}
		for _, l := range r.Limits {
			s.Limits++
			s.Algorithms[l.Limit.Algorithm]++
		}
	}
	return out
}
