package rls

import (
	"slices"
	"strconv"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// Explanation is what ShouldRateLimit would ask of the limiter for a
// request, and why, without asking it: the service's own plan of the
// request (the same matching, limits, overrides, hits and replaces), laid
// out for people. It takes and gives back nothing.
type Explanation struct {
	Domain string
	// Descriptors explains each request descriptor, in order.
	Descriptors []DescriptorExplanation
	// ShadowMode and QuotaMode are the service's own (Options), which
	// apply to every descriptor.
	ShadowMode, QuotaMode bool
	// RefundOnDeny gives back what a denied request took from its other
	// descriptors and limits.
	RefundOnDeny bool
	// FailureMode answers when the backend fails.
	FailureMode FailureMode
	// DefaultAlgorithm counts the override of a descriptor that matches
	// no rule.
	DefaultAlgorithm algorithms.Algorithm
}

// DescriptorExplanation is what becomes of one request descriptor.
type DescriptorExplanation struct {
	Entries []rate.Entry
	// Trace is how the entries went down the domain's tree: the rule they
	// matched (Trace.Rule), or why none.
	Trace config.Trace
	// Unlimited reports that the descriptor matched an unlimited rule,
	// which no other replaces: its status is OK, counted nowhere.
	Unlimited bool
	// UnlimitedReplacedBy, when not empty, is why the unlimited rule it
	// matched does not apply: what replaces it, such as `limit "premium"
	// of descriptors[1]`.
	UnlimitedReplacedBy string
	// Override reports that the descriptor brings its own limit
	// (descriptor.limit), which replaces the rule's limits and keeps the
	// algorithm and shards of its first.
	Override bool
	// Hits is what the descriptor asks to take, or with Refund to give
	// back: its hits_addend, else the request's (0 meaning 1).
	Hits uint64
	// Refund reports that is_negative_hits gives the hits back; it is set
	// only where the rule (or, without one, the service) allows it.
	Refund bool
	// Quota reports that the descriptor is in quota mode: over its limit,
	// it denies the request only when every quota descriptor is over.
	Quota bool
	// Limits are the limits that apply, in order, with those that another
	// replaces.
	Limits []LimitExplanation
}

// LimitExplanation is one limit of a descriptor and the op the service
// would send for it.
type LimitExplanation struct {
	// Limit is the limit as configured, or the descriptor's override.
	Limit config.RateLimit
	// Op is what the service asks of the limiter: the state's Key, the
	// Limit, the hits (bounded as they are sent), the shards, and whether
	// the hits are a charge (recorded even past the limit, with Debt owed
	// to later windows) or a refund. Its Key, Limit and Shards say where
	// its state lives.
	Op rate.Op
	// Shadow reports that shadow mode lets this limit's denial through;
	// RuleShadow that the rule's shadow_mode does, which answers the
	// descriptor's status OK too (the service's leaves it OVER_LIMIT).
	Shadow, RuleShadow bool
	// ReplacedBy, when not empty, names the limit (or unlimited rule) of
	// this request that replaces this one, such as `limit "premium" of
	// descriptors[1]`: this one is not sent.
	ReplacedBy string
}

// Explain returns how the service would answer req under its configuration
// in force, without asking the limiter: what ShouldRateLimit plans for it.
// It refuses what ShouldRateLimit refuses, with the same errors: invalid
// requests and requests beyond the bounds (InvalidArgument), and any
// request while no configuration is loaded (ErrNoConfig).
func (s *Service) Explain(req *rlsv3.RateLimitRequest) (*Explanation, error) {
	return explain(s.cfg.Load(), req, s.opts)
}

// Explain returns how a Service with opts would answer req under cfg, as
// Service.Explain does. Options that are not valid are an error naming the
// option.
func Explain(cfg *config.Config, req *rlsv3.RateLimitRequest, opts Options) (*Explanation, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return explain(cfg, req, opts)
}

func explain(cfg *config.Config, req *rlsv3.RateLimitRequest, opts Options) (*Explanation, error) {
	if err := validateRequest(req, &opts.Bounds); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, ErrNoConfig
	}
	p, replaced, err := matchPlan(cfg, req, opts)
	if err != nil {
		return nil, err
	}
	x := &Explanation{
		Domain:       p.domain,
		Descriptors:  make([]DescriptorExplanation, len(p.descs)),
		ShadowMode:   opts.ShadowMode,
		QuotaMode:    opts.QuotaMode,
		RefundOnDeny: opts.RefundOnDeny,
		FailureMode:  opts.FailureMode,

		DefaultAlgorithm: opts.DefaultAlgorithm,
	}
	for i, d := range req.GetDescriptors() {
		dx := &x.Descriptors[i]
		for _, e := range d.GetEntries() {
			dx.Entries = append(dx.Entries, rate.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		dx.Trace = cfg.Trace(p.domain, dx.Entries)
		dp := p.descs[i]
		dx.Override = d.GetLimit() != nil
		dx.Quota = dp.quota
		dx.Hits = dp.hits
		if u := dp.unlimited; u != nil {
			dx.Unlimited = true
			if u.Name != "" && replaced[u.Name] {
				dx.Unlimited, dx.UnlimitedReplacedBy = false, p.replacer(u.Name)
			}
		}
		for j := dp.first; j < dp.first+dp.n; j++ {
			l := p.limits[j]
			lx := LimitExplanation{Limit: *l.limit, Op: p.ops[j], Shadow: l.shadow, RuleShadow: l.ruleShadow}
			lx.Op.Key.Entries = slices.Clone(lx.Op.Key.Entries)
			if name := l.limit.Name; name != "" && replaced[name] {
				lx.ReplacedBy = p.replacer(name)
			}
			dx.Refund = dx.Refund || lx.Op.Kind == rate.Refund
			dx.Limits = append(dx.Limits, lx)
		}
	}
	return x, nil
}

// replacer names what in p replaces the limit, or unlimited rule, named
// name: "limit \"premium\" of descriptors[1]", or of an unnamed limit,
// "a limit of descriptors[1]".
func (p *plan) replacer(name string) string {
	for i, d := range p.descs {
		if d.unlimited != nil && slices.Contains(d.unlimited.Replaces, name) {
			return describeReplacer("the unlimited rule", d.unlimited.Name, i)
		}
	}
	for _, l := range p.limits {
		if slices.Contains(l.limit.Replaces, name) {
			return describeReplacer("limit", l.limit.Name, l.desc)
		}
	}
	return ""
}

// describeReplacer names the thing called name of descriptor i.
func describeReplacer(thing, name string, i int) string {
	if name != "" {
		thing += " " + strconv.Quote(name)
	}
	return thing + " of descriptors[" + strconv.Itoa(i) + "]"
}
