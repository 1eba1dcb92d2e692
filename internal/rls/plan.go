package rls

import (
	"math"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// plan is what one request asks of the limiter: one Op per limit that applies
// to one of its descriptors, and how to report the results.
type plan struct {
	domain string
	// req is the request, for the response's dynamic metadata, which
	// dynamicMetadata asks for.
	req             *rlsv3.RateLimitRequest
	dynamicMetadata bool
	// retryAfter is Options.RetryAfter.
	retryAfter bool
	// descs holds, per request descriptor, how it matched.
	descs []descPlan
	// ops and limits are parallel: limits[i] says where ops[i] came from.
	ops    []rate.Op
	limits []planLimit

	// Room for the common request of a few descriptors and limits, so
	// that it needs no allocation beyond the plan's own.
	descsBuf  [smallPlan]descPlan
	opsBuf    [smallPlan]rate.Op
	limitsBuf [smallPlan]planLimit
}

// smallPlan is how many descriptors and limits a plan holds without
// allocating more.
const smallPlan = 2

// descPlan is one request descriptor's part of a plan.
type descPlan struct {
	// unlimited is the descriptor's unlimited rule, if it matched one.
	unlimited *config.Rule
	// first and n select the descriptor's ops: ops[first : first+n].
	first, n int
	// metricKey names the descriptor in metrics: the matched rule's
	// config.Match.MetricKey, or the domain for an override of a descriptor
	// that matched no rule.
	metricKey string
	// quota reports that the descriptor is in quota mode (Options.QuotaMode,
	// or the quota_mode of the rule whose limits apply to it).
	quota bool
	// rule is the matched rule when its limits apply (no override), for
	// its metadata.
	rule *config.Rule
	// hits is what the descriptor asks to take or give back, before any
	// op bounds it (see opHits).
	hits uint64
}

// planLimit is the configuration behind one Op.
type planLimit struct {
	desc  int
	limit *config.RateLimit
	rule  *config.Rule // nil for an override of an unmatched descriptor
	// shadow reports that shadow mode lets the limit's denials through:
	// the rule's (ruleShadow), or the service's. The rule's answers its
	// descriptor's status OK too; the service's leaves the status
	// OVER_LIMIT and lets only the request through, as
	// envoyproxy/ratelimit's SHADOW_MODE does.
	shadow, ruleShadow bool
	// override reports that the limit is the request's own override.
	override bool
}

// newPlan matches every descriptor of req against cfg, which must not be
// nil, and drops the limits that others replace. Its only errors are
// InvalidArgument statuses: for limit overrides that no algorithm can
// enforce, and for hits and overrides beyond opts.Bounds.
func newPlan(cfg *config.Config, req *rlsv3.RateLimitRequest, opts Options) (*plan, error) {
	p, replaced, err := matchPlan(cfg, req, opts)
	if err != nil {
		return nil, err
	}
	if replaced != nil {
		p.dropReplaced(replaced)
	}
	return p, nil
}

// matchPlan is newPlan without dropping the limits, and unlimited rules,
// that others replace: it returns the names they replace too (nil for
// none).
func matchPlan(cfg *config.Config, req *rlsv3.RateLimitRequest, opts Options) (*plan, map[string]bool, error) {
	descs := req.GetDescriptors()
	p := &plan{domain: req.GetDomain(), req: req, dynamicMetadata: opts.ResponseDynamicMetadata, retryAfter: opts.RetryAfter}
	if len(descs) <= smallPlan {
		p.descs = p.descsBuf[:len(descs)]
	} else {
		p.descs = make([]descPlan, len(descs))
	}
	p.ops, p.limits = p.opsBuf[:0], p.limitsBuf[:0]
	for i := range p.descs {
		p.descs[i].quota = opts.QuotaMode
	}
	if !cfg.HasDomain(p.domain) {
		return p, nil, nil
	}

	requestHits := uint64(req.GetHitsAddend())
	if requestHits == 0 {
		requestHits = 1
	}
	var replaced map[string]bool
	for i, d := range descs {
		// Each descriptor gets its own entries: its Key may keep them.
		entries := make([]rate.Entry, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			entries = append(entries, rate.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		m, matched := cfg.Match(p.domain, entries)

		limits, err := descriptorLimits(i, d, m, matched, opts)
		if err != nil {
			return nil, nil, err
		}
		if matched && m.Rule.Unlimited && d.GetLimit() == nil {
			p.descs[i].unlimited = m.Rule
			replaced = addNames(replaced, m.Rule.Replaces)
			continue
		}
		if len(limits) == 0 {
			continue
		}
		key, metricKey := m.Key, m.MetricKey
		var rule *config.Rule
		giveBack := opts.AllowNegativeHits
		if matched {
			rule, giveBack = m.Rule, m.Rule.AllowNegativeHits
		} else {
			// Only an override limits an unmatched descriptor. Its metrics
			// are named by the domain alone: its keys are the client's.
			key, metricKey = rate.Key{Domain: p.domain, Entries: entries}, p.domain
			if err := opts.Bounds.checkUnmatched(i, key, limits[0].Limit); err != nil {
				return nil, nil, err
			}
		}
		hits := requestHits
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		kind := rate.Take
		switch {
		case d.GetIsNegativeHits() && giveBack:
			// is_negative_hits gives back only where allowed; elsewhere
			// the hits are taken, as envoyproxy/ratelimit, which ignores
			// the flag, takes them.
			kind = rate.Refund
		case matched && m.Rule.Charge:
			// A rule's charges are usage already spent: recorded even past
			// the limit (owed to later windows with the rule's Debt), never
			// refunded, unless the descriptor gives hits back.
			kind = rate.Charge
		}
		ruleShadow := matched && m.Rule.ShadowMode
		shadow := opts.ShadowMode || ruleShadow

		p.descs[i].first = len(p.ops)
		p.descs[i].metricKey = metricKey
		p.descs[i].hits = hits
		if matched && d.GetLimit() == nil {
			p.descs[i].rule = m.Rule
			p.descs[i].quota = p.descs[i].quota || m.Rule.QuotaMode
		}
		for j := range limits {
			rl := &limits[j]
			if err := opts.Bounds.checkHits(i, hits, rl.Limit); err != nil {
				return nil, nil, err
			}
			p.ops = append(p.ops, rate.Op{
				Key:    key,
				Limit:  rl.Limit,
				Kind:   kind,
				Hits:   opHits(hits, kind != rate.Take, rl.Limit),
				Shards: rl.Shards,
				Debt:   matched && m.Rule.Debt,
				Tag:    metricKey,
			})
			p.limits = append(p.limits, planLimit{desc: i, limit: rl, rule: rule, shadow: shadow, ruleShadow: ruleShadow, override: d.GetLimit() != nil})
			replaced = addNames(replaced, rl.Replaces)
		}
		p.descs[i].n = len(p.ops) - p.descs[i].first
	}
	return p, replaced, nil
}

// opHits returns the hits an op asks of limit l: hits, except that a take of
// more than l can ever hold asks for one more than it holds, which every
// backend denies as surely and with the same answer. So the hits a metric
// counts for one request stay within what the limit's configuration allows,
// and no client can push a counter out of the exact range of a float64.
// Refunds and charges (exact, true) keep their hits: a charge records all of
// them, up to the limit's debt bound, and both are bounded by Bounds.MaxHits.
func opHits(hits uint64, exact bool, l algorithms.Limit) uint64 {
	if exact {
		return hits
	}
	return min(hits, l.Capacity()+1)
}

// descriptorLimits returns the limits that apply to descriptor i: the matched
// rule's, or the descriptor's own override, which keeps the rule's algorithm.
func descriptorLimits(i int, d *ratelimitv3.RateLimitDescriptor, m config.Match, matched bool, opts Options) ([]config.RateLimit, error) {
	o := d.GetLimit()
	if o == nil {
		if !matched {
			return nil, nil
		}
		return m.Rule.Limits, nil
	}

	unit, ok := overrideUnits[o.GetUnit()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d].limit.unit %s is not a valid unit", i, o.GetUnit())
	}
	mult := uint32(1)
	if w := o.GetUnitMultiplier(); w != nil {
		mult = w.GetValue()
	}
	if mult == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d].limit.unit_multiplier must be at least 1", i)
	}
	rl := config.RateLimit{
		Limit: algorithms.Limit{
			Algorithm: opts.DefaultAlgorithm,
			Requests:  uint64(o.GetRequestsPerUnit()),
			Window:    time.Duration(mult) * unit.Duration(),
		},
		Unit:           unit,
		UnitMultiplier: mult,
		Shards:         1,
	}
	if matched && len(m.Rule.Limits) > 0 {
		first := m.Rule.Limits[0]
		rl.Limit.Algorithm = first.Limit.Algorithm
		rl.Shards = first.Shards
	}
	if err := rl.Limit.Validate(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d].limit: %v", i, err)
	}
	if err := opts.Bounds.checkOverride(i, rl.Limit); err != nil {
		return nil, err
	}
	return []config.RateLimit{rl}, nil
}

// overrideUnits maps the units of a request's limit override.
var overrideUnits = map[typev3.RateLimitUnit]config.Unit{
	typev3.RateLimitUnit_SECOND: config.Second,
	typev3.RateLimitUnit_MINUTE: config.Minute,
	typev3.RateLimitUnit_HOUR:   config.Hour,
	typev3.RateLimitUnit_DAY:    config.Day,
	typev3.RateLimitUnit_MONTH:  config.Month,
	typev3.RateLimitUnit_YEAR:   config.Year,
}

// addNames adds names to the set, creating it when needed.
func addNames(set map[string]bool, names []string) map[string]bool {
	for _, n := range names {
		if set == nil {
			set = make(map[string]bool)
		}
		set[n] = true
	}
	return set
}

// dropReplaced removes the limits, and the unlimited rules, whose name
// another applied limit or rule replaces.
func (p *plan) dropReplaced(replaced map[string]bool) {
	ops, limits := p.ops[:0], p.limits[:0]
	for i := range p.descs {
		d := &p.descs[i]
		d.first, d.n = 0, 0
		if d.unlimited != nil && d.unlimited.Name != "" && replaced[d.unlimited.Name] {
			d.unlimited = nil
		}
	}
	for i, l := range p.limits {
		if l.limit.Name != "" && replaced[l.limit.Name] {
			continue
		}
		d := &p.descs[l.desc]
		if d.n == 0 {
			d.first = len(ops)
		}
		d.n++
		ops = append(ops, p.ops[i])
		limits = append(limits, l)
	}
	p.ops, p.limits = ops, limits
}

// response assembles the answer from the limiter's results, one per op.
func (p *plan) response(results []algorithms.Result) *rlsv3.RateLimitResponse {
	return p.assemble(func(d descPlan, st *rlsv3.RateLimitResponse_DescriptorStatus) (bool, bool, time.Duration) {
		// Report the most constrained limit: among the denied ones the
		// longest wait, else the one with the fewest remaining.
		best, denied, over, remaining := -1, false, false, uint64(math.MaxUint64)
		for j := d.first; j < d.first+d.n; j++ {
			r := results[j]
			remaining = min(remaining, r.Remaining)
			if !r.Allowed && !p.limits[j].ruleShadow {
				denied = true
			}
			if !r.Allowed && !p.limits[j].shadow {
				over = true
			}
			if best < 0 || moreConstrained(r, results[best]) {
				best = j
			}
		}
		r := results[best]
		st.CurrentLimit = currentLimit(p.limits[best].limit)
		st.LimitRemaining = uint32(min(remaining, math.MaxUint32))
		st.DurationUntilReset = durationProto(r.ResetAfter)
		return denied, over, r.ResetAfter
	})
}

// overLimit reports whether the limiter's results put the request over its
// limits: a descriptor is over when a limit of it outside shadow mode
// denied, and the verdict decides from there.
func (p *plan) overLimit(results []algorithms.Result) bool {
	var v verdict
	for _, d := range p.descs {
		if d.unlimited != nil {
			continue
		}
		over := false
		for j := d.first; j < d.first+d.n; j++ {
			if !results[j].Allowed && !p.limits[j].shadow {
				over = true
			}
		}
		v.add(d.quota, over, 0)
	}
	over, _ := v.result()
	return over
}

// failureResponse answers every limited descriptor with code, for a backend
// that could not decide.
func (p *plan) failureResponse(code rlsv3.RateLimitResponse_Code) *rlsv3.RateLimitResponse {
	return p.assemble(func(d descPlan, st *rlsv3.RateLimitResponse_DescriptorStatus) (bool, bool, time.Duration) {
		st.CurrentLimit = currentLimit(p.limits[d.first].limit)
		denied := code == rlsv3.RateLimitResponse_OVER_LIMIT
		return denied && !p.limits[d.first].ruleShadow, denied && !p.limits[d.first].shadow, 0
	})
}

// assemble builds the response: one status per request descriptor, OK for
// the unmatched, unlimited for the unlimited, and for each limited one what
// limited says — whether its status is OVER_LIMIT (denied), whether it is
// over the limit for the request (over: not when shadow mode lets it
// through), and the wait if so. The request is over its limits as a
// verdict decides (quota mode), and then the response carries a
// retry-after header (Options.RetryAfter).
func (p *plan) assemble(limited func(descPlan, *rlsv3.RateLimitResponse_DescriptorStatus) (denied, over bool, wait time.Duration)) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(p.descs)),
	}
	var v verdict
	for i, d := range p.descs {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		if d.unlimited != nil {
			st.LimitRemaining = math.MaxUint32
			continue
		}
		var denied, over bool
		var wait time.Duration
		if d.n > 0 {
			denied, over, wait = limited(d, st)
		}
		if denied {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		v.add(d.quota, over, wait)
	}
	if over, retryAfter := v.result(); over {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		if p.retryAfter {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, retryAfterHeader(retryAfter))
		}
	}
	if p.dynamicMetadata {
		resp.DynamicMetadata = responseMetadata(p.req, p.admittedMetadata(resp.Statuses))
	}
	return resp
}

// admittedMetadata returns the metadata of the rules whose limits applied
// to descriptors that statuses do not say are over their limit, in request
// order, for the response's dynamic metadata (responseMetadata).
func (p *plan) admittedMetadata(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*structpb.Struct {
	var rules []*structpb.Struct
	for i, d := range p.descs {
		if d.unlimited != nil || d.n == 0 || d.rule == nil || d.rule.Metadata == nil ||
			statuses[i].GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			continue
		}
		rules = append(rules, d.rule.Metadata)
	}
	return rules
}

// moreConstrained reports whether result a binds tighter than b.
func moreConstrained(a, b algorithms.Result) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		return a.ResetAfter > b.ResetAfter
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}

// currentLimit describes a configured limit in Envoy's terms.
func currentLimit(rl *config.RateLimit) *rlsv3.RateLimitResponse_RateLimit {
	cl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            rl.Name,
		RequestsPerUnit: uint32(min(rl.Limit.Requests, math.MaxUint32)),
		Unit:            responseUnits[rl.Unit],
	}
	if rl.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(rl.UnitMultiplier)
	}
	return cl
}

// responseUnits maps configured units to the units of Envoy's response.
var responseUnits = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	config.Second: rlsv3.RateLimitResponse_RateLimit_SECOND,
	config.Minute: rlsv3.RateLimitResponse_RateLimit_MINUTE,
	config.Hour:   rlsv3.RateLimitResponse_RateLimit_HOUR,
	config.Day:    rlsv3.RateLimitResponse_RateLimit_DAY,
	config.Week:   rlsv3.RateLimitResponse_RateLimit_WEEK,
	config.Month:  rlsv3.RateLimitResponse_RateLimit_MONTH,
	config.Year:   rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// durationProto returns d as a protobuf Duration, 0 when negative.
func durationProto(d time.Duration) *durationpb.Duration {
	if d < 0 {
		d = 0
	}
	return durationpb.New(d)
}
