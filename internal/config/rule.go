package config

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Unit is the unit of a rate limit's window, as named in configuration files
// and in Envoy's API. The zero value is not a valid unit.
type Unit uint8

// The units, in increasing length. A month is 30 days and a year 365 days, as
// in envoyproxy/ratelimit.
const (
	Second Unit = iota + 1
	Minute
	Hour
	Day
	Week
	Month
	Year
)

var unitNames = [...]string{Second: "second", Minute: "minute", Hour: "hour", Day: "day", Week: "week", Month: "month", Year: "year"}

var unitLengths = [...]time.Duration{
	Second: time.Second,
	Minute: time.Minute,
	Hour:   time.Hour,
	Day:    24 * time.Hour,
	Week:   7 * 24 * time.Hour,
	Month:  30 * 24 * time.Hour,
	Year:   365 * 24 * time.Hour,
}

// String returns the unit's lower-case configuration name.
func (u Unit) String() string {
	if u >= Second && u <= Year {
		return unitNames[u]
	}
	return "unknown"
}

// Duration returns the length of one unit, or 0 for an invalid unit.
func (u Unit) Duration() time.Duration {
	if u >= Second && u <= Year {
		return unitLengths[u]
	}
	return 0
}

// RateLimit is one limit of a rule, as configured: requests_per_unit per
// unit_multiplier units, enforced by an algorithm.
type RateLimit struct {
	// Limit is what the algorithms enforce; Limit.Window is
	// UnitMultiplier × Unit.
	Limit          algorithms.Limit
	Unit           Unit
	UnitMultiplier uint32
	// Shards splits the limit over this many Redis keys (1: not split).
	Shards uint32
	// Name is the limit's name, reported in current_limit and used by
	// replaces. Empty when unnamed.
	Name string
	// Replaces names the limits this one replaces when both apply to one
	// request.
	Replaces []string
}

// Rule is what a descriptor node of the configuration says: its limits and
// how they are reported. A Rule is immutable once loaded.
type Rule struct {
	Domain string
	// Path names the node as envoyproxy/ratelimit's stats do:
	// "domain.key_value.key2", with "_value" only where the node has a value.
	Path string
	// Limits all apply; all must admit. Empty when Unlimited.
	Limits []RateLimit
	// Unlimited rules are matched and reported but never counted.
	Unlimited bool
	// Name and Replaces are the name and replaces of an Unlimited rule's
	// rate_limit; a limited rule keeps them on each of its Limits.
	Name       string
	Replaces   []string
	ShadowMode bool
	// QuotaMode makes the rule a quota: a request over it is denied only
	// when every quota descriptor of the request is over its limit.
	QuotaMode bool
	// AllowNegativeHits lets a request descriptor's is_negative_hits give
	// its hits back to the rule's limits; without it such hits are taken,
	// as envoyproxy/ratelimit takes them. It is the descriptor's
	// allow_negative_hits, or Options.AllowNegativeHits when unset.
	AllowNegativeHits bool
	DetailedMetric    bool
	ValueToMetric     bool
	// Charge makes the rule's hits charges: usage already spent, recorded
	// even past its limits, and never given back on a denial. What they
	// record past a limit counts until its window ends, as
	// envoyproxy/ratelimit counts hits (algorithms.State.Record), or with
	// Debt is owed to later windows (algorithms.State.Charge). It is the
	// descriptor's charge field, which defaults to its quota_mode, and is
	// set on every rule that came over xDS.
	Charge bool
	// Debt, with Charge, carries what a charge records past a limit into
	// later windows as a debt (charge: true or debt).
	Debt bool
	// Metadata is the descriptor's metadata, returned in the response's
	// dynamic metadata when the rule admits a request; nil when the
	// descriptor has none. It must not be modified.
	Metadata *structpb.Struct
	// File and Line locate the node in its configuration file. For limits
	// from an xDS server, File names the resource and Line is 0.
	File string
	Line int
	// Column and Field complete where the node is, as an Error or a
	// Warning says it: its column (0 for limits from an xDS server) and its
	// path in the file, such as "descriptors[2].descriptors[0]".
	Column int
	Field  string
}

// Match is the outcome of matching one request descriptor.
type Match struct {
	Rule *Rule
	// Key identifies the matched state: the domain and the request's entries,
	// with a value replaced by its wildcard pattern at levels whose node sets
	// share_threshold.
	Key rate.Key
	// MetricKey names the match as envoyproxy/ratelimit names its stats:
	// the rule's Path, with the request's values at every level when the
	// rule sets detailed_metric, else at the levels that set
	// value_to_metric; a wildcard with share_threshold keeps its pattern.
	MetricKey string
}
