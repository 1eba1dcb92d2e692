package config

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/option"
)

// Options holds the settings that apply to every file, and how LoadContext finds
// the files. DefaultAlgorithm must be set; the zero value of every other
// field is a choice of its own, and reads files as envoyproxy/ratelimit does
// with RUNTIME_IGNOREDOTFILES set. DefaultOptions are a server's.
type Options struct {
	// DefaultAlgorithm enforces limits that name no algorithm.
	DefaultAlgorithm algorithms.Algorithm
	// MergeDomains lets several files configure one domain: the top-level
	// descriptors of every file that names it join one tree, as with
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG. A descriptor given in two
	// of them is still an error. Without it, a domain in two files is an
	// error.
	MergeDomains bool
	// WildcardPrecedence chooses among several wildcard values of one key
	// that match a request's value. Zero means FirstWildcard.
	WildcardPrecedence WildcardPrecedence
	// DotFiles makes LoadContext read the files and directories whose names start
	// with '.', which it skips otherwise. Kubernetes ConfigMap volumes keep a
	// second copy of their files under such a directory (..data).
	DotFiles bool
	// AllowNegativeHits is the allow_negative_hits of descriptors that do
	// not set it: whether their rules let is_negative_hits give hits back.
	AllowNegativeHits bool
	// MaxBytes is the most bytes the files LoadContext reads may hold together;
	// past that, LoadContext fails before parsing any. Zero sets no bound.
	MaxBytes int64
	// WarnLifetime, when positive, makes a limit whose state lives longer
	// than it after the last hit (algorithms.Limit.Lifetime) a warning of
	// the Config (Config.Warnings); zero warns of none.
	WarnLifetime time.Duration
	// WarnLogSize, when positive, makes a sliding_window_log whose log may
	// hold more entries than it a warning of the Config; zero warns of none.
	WarnLogSize uint64
	// XDSCalendar makes the limits of these units that come over xDS
	// (FromRateLimitConfigs) count in the calendar's windows, as a limits
	// file's calendar field makes one of its limits count: UTC days, ISO
	// weeks, months and years instead of windows of fixed length from the
	// epoch. As in a file, such a limit is a fixed window, whatever
	// DefaultAlgorithm. Limits files ignore it.
	XDSCalendar CalendarUnits
}

// DefaultOptions returns the Options of a server: limits without an
// algorithm counted by a sliding_window_counter, the first matching
// wildcard of a key winning, and the files bounded to 32 MiB together. A
// file of 10 MB with 92 000 descriptors in block style took the heap to 93
// MB at the start and 172 MB on a reload, when the limits in force and the
// new ones are both held; a file of the same size that must be read whole
// (flow style, or anchors used across top-level descriptors) took it to 355
// and 401 MB.
func DefaultOptions() Options {
	return Options{DefaultAlgorithm: algorithms.SlidingWindowCounter, WildcardPrecedence: FirstWildcard, MaxBytes: 32 << 20}
}

// Validate returns an error naming the first field of o that a load
// refuses (option.Error).
func (o Options) Validate() error {
	var err error
	switch {
	case o.DefaultAlgorithm == 0:
		err = option.Errorf("DefaultAlgorithm", "is not set")
	case !o.DefaultAlgorithm.Valid():
		err = option.Errorf("DefaultAlgorithm", "%s is no algorithm", o.DefaultAlgorithm)
	case o.WildcardPrecedence > MostSpecificWildcard:
		err = option.Errorf("WildcardPrecedence", "%s is no wildcard precedence", o.WildcardPrecedence)
	case o.MaxBytes < 0:
		err = option.Errorf("MaxBytes", "must not be negative, not %d", o.MaxBytes)
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// maxBytes returns MaxBytes, or the most an int64 holds when it sets no
// bound.
func (o Options) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return math.MaxInt64
	}
	return o.MaxBytes
}

// WildcardPrecedence says which of several matching wildcard values of one
// key wins.
type WildcardPrecedence uint8

const (
	// FirstWildcard tries the wildcards in the order of the files, and of
	// the descriptors within a file, as envoyproxy/ratelimit does.
	FirstWildcard WildcardPrecedence = iota
	// MostSpecificWildcard prefers the wildcard with the most bytes besides
	// its '*'s, then the first: among trailing wildcards ("10.*",
	// "10.1.*"), the longest prefix.
	MostSpecificWildcard
)

// String returns the precedence as RLS_WILDCARD_PRECEDENCE spells it.
func (w WildcardPrecedence) String() string {
	switch w {
	case FirstWildcard:
		return "first"
	case MostSpecificWildcard:
		return "most_specific"
	}
	return fmt.Sprintf("WildcardPrecedence(%d)", uint8(w))
}

// ParseWildcardPrecedence returns the precedence named first or
// most_specific.
func ParseWildcardPrecedence(s string) (WildcardPrecedence, error) {
	for _, w := range []WildcardPrecedence{FirstWildcard, MostSpecificWildcard} {
		if w.String() == s {
			return w, nil
		}
	}
	return 0, fmt.Errorf("config: unknown wildcard precedence %q (want first or most_specific)", s)
}

// UnmarshalText sets w to the precedence named text, as
// ParseWildcardPrecedence reads it.
func (w *WildcardPrecedence) UnmarshalText(text []byte) error {
	v, err := ParseWildcardPrecedence(string(text))
	if err != nil {
		return err
	}
	*w = v
	return nil
}

// File is one configuration file: its name (used in errors and in
// Rule.File) and its contents.
type File struct {
	Name string
	Data []byte
}

// Config is a loaded set of limits: one tree of descriptors per domain. A
// Config is immutable, and safe for concurrent use.
type Config struct {
	domains map[string]*domain
	names   []string
	rules   []*Rule
	files   []string
	// warnings are those found while parsing (see Warnings).
	warnings []Warning
	// resources reports that the files are an xDS server's resources,
	// whose lines nobody sees (FromRateLimitConfigs).
	resources bool
}

// domain is one domain's tree and where it was first configured.
type domain struct {
	name string
	file string
	line int
	top  *level
	// files are the files that configure it, in order: more than one
	// when merged.
	files []string
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
