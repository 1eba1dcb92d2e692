package config

import (
	"slices"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// Options holds the settings that apply to every file. The zero value is
// ready to use.
type Options struct {
	// DefaultAlgorithm enforces limits that name no algorithm. Zero means
	// algorithms.SlidingWindowCounter.
	DefaultAlgorithm algorithms.Algorithm
	// AllowNegativeHits is the allow_negative_hits of descriptors that do
	// not set it: whether their rules let is_negative_hits give hits back.
	AllowNegativeHits bool
}

// File is one configuration file: its name (used in errors and in
// Rule.File) and its contents.
type File struct {
	Name string
	Data []byte
}

// Config is a loaded set of limits: one domain per file, each a tree of
// descriptors. A Config is immutable, and safe for concurrent use.
type Config struct {
	domains map[string]*domain
	names   []string
	rules   []*Rule
	files   []string
}

// domain is one domain's tree and where it was configured.
type domain struct {
	name string
	file string
	line int
	top  *level
}

// Domains returns the names of the configured domains, sorted.
func (c *Config) Domains() []string { return slices.Clone(c.names) }

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Rules returns every rule, limited or unlimited, in the order of the files
// and, within a file, in the order of its descriptors (a parent before its
// nested descriptors). The Rules must not be modified.
func (c *Config) Rules() []*Rule { return slices.Clone(c.rules) }

// Files returns the names of the files the Config was built from, in the
// order they were parsed.
func (c *Config) Files() []string { return slices.Clone(c.files) }
