// Package explain says what the service would do with a request, and why,
// without taking or giving back anything: the report of the server's
// /explain and of the check command's -explain. Its parts come from where
// each decision is made: rls.Explain plans the request as ShouldRateLimit
// would (the matching, limits, overrides, hits and replaces), config.Trace
// tells how each descriptor went down its domain's tree, and internal/redisx
// names the keys each limit's state lives in. Report lays them out with
// sentences that say what shards, overrides, quota_mode, charges and shadow
// mode do; its JSON is for machines, its Text for people.
package explain

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// Report is the answer of /explain and of the check command's -explain:
// what the service would do with a request, and why, without taking or
// giving back anything. It is rls.Explanation with, for each limit, where
// its state lives in Redis (internal/redisx's keys, hash tags and cluster
// slots), and sentences that say what shards, overrides, quota_mode,
// charges and shadow mode do to it. Its JSON is for machines, Text for
// people.
type Report struct {
	Domain string `json:"domain"`
	// Backend is RLS_BACKEND: with memory, the keys are those Redis would
	// use.
	Backend string `json:"backend"`
	// ShadowMode and QuotaMode are RLS_SHADOW_MODE and RLS_QUOTA_MODE.
	ShadowMode bool `json:"shadowMode,omitempty"`
	QuotaMode  bool `json:"quotaMode,omitempty"`
	// Effects say, in sentences, what the service's settings do to the
	// whole request.
	Effects     []string     `json:"effects,omitempty"`
	Descriptors []Descriptor `json:"descriptors"`
}

// Descriptor is what becomes of one request descriptor.
type Descriptor struct {
	Entries []Entry `json:"entries"`
	// Rule is the rule that applies; Why says why none does.
	Rule *Rule  `json:"rule,omitempty"`
	Why  string `json:"why,omitempty"`
	// Steps are the configured descriptors the entries matched.
	Steps     []Step `json:"steps,omitempty"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Override  bool   `json:"override,omitempty"`
	Quota     bool   `json:"quota,omitempty"`
	// Hits is what the descriptor asks to take, or to give back with
	// Refund.
	Hits   uint64 `json:"hits"`
	Refund bool   `json:"refund,omitempty"`
	// Effects say, in sentences, what the descriptor's settings do.
	Effects []string `json:"effects,omitempty"`
	Limits  []Limit  `json:"limits,omitempty"`
}

// Entry is one entry of a request descriptor.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Rule is the rule a descriptor matched.
type Rule struct {
	Path string `json:"path"`
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
}

// Step is the configured descriptor one entry matched: by its
// value, by a wildcard (Pattern), or by its key alone.
type Step struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	By      string `json:"by"`
	Pattern string `json:"pattern,omitempty"`
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
}

// Limit is one limit of a descriptor, the op the service would
// send for it, and where its state lives.
type Limit struct {
	Name            string `json:"name,omitempty"`
	Algorithm       string `json:"algorithm"`
	RequestsPerUnit uint64 `json:"requestsPerUnit"`
	Unit            string `json:"unit"`
	UnitMultiplier  uint32 `json:"unitMultiplier"`
	Burst           uint64 `json:"burst,omitempty"`
	Calendar        bool   `json:"calendar,omitempty"`
	// Op says what the hits do: take, check (0 hits), charge (recorded
	// past the limit, owed to later windows), record (recorded past the
	// limit until its window ends) or refund.
	Op string `json:"op"`
	// Hits are the op's hits as sent: what is asked, except that a take of
	// more than the limit can hold asks for one more than it holds.
	Hits uint64 `json:"hits"`
	// Shadow is "rule" (shadow_mode: the status is OK too) or "service"
	// (RLS_SHADOW_MODE: the status stays OVER_LIMIT) when a denial is let
	// through.
	Shadow string `json:"shadow,omitempty"`
	// ReplacedBy names what replaces this limit: it is not sent.
	ReplacedBy string `json:"replacedBy,omitempty"`
	// Identity is the state's identity, the hash tag of its keys.
	Identity string   `json:"identity"`
	Shards   []Shard  `json:"shards"`
	Effects  []string `json:"effects,omitempty"`
}

// Shard is where one shard of a limit (the whole of a limit not
// split) keeps its state.
type Shard struct {
	// Shard is the shard's number; absent for a limit not split.
	Shard           *int     `json:"shard,omitempty"`
	RequestsPerUnit uint64   `json:"requestsPerUnit"`
	Burst           uint64   `json:"burst,omitempty"`
	Keys            []string `json:"keys"`
	HashTag         string   `json:"hashTag"`
	Slot            int      `json:"slot"`
}

// Explainer lays an rls.Explanation out as a Report, with the keys of the
// settings it was made with. It is safe for concurrent use.
type Explainer struct {
	enc     *redisx.Encoder
	backend settings.Backend
	// rlqs and shadowMode are RLS_RLQS and RLS_SHADOW_MODE, for Bucket.
	rlqs, shadowMode bool
}

// New returns the Explainer of the settings s: keys under RLS_KEY_PREFIX,
// for RLS_BACKEND, and buckets as RLS_RLQS serves them.
func New(s settings.Settings) (*Explainer, error) {
	enc, err := redisx.NewEncoder(s.KeyPrefix, 0)
	if err != nil {
		return nil, fmt.Errorf("server: RLS_KEY_PREFIX: %w", err)
	}
	return &Explainer{enc: enc, backend: s.Backend, rlqs: s.RLQS, shadowMode: s.ShadowMode}, nil
}

// Request explains the request body, a RateLimitRequest in JSON as /json
// takes it, under cfg, as a server with the settings s would plan it at
// now, asking no backend: the check command's -explain. Its errors are
// those /explain answers with: a body that is not such JSON
// (rls.ErrNotRequestJSON), a request the service refuses (gRPC
// InvalidArgument), and rls.ErrNoConfig for a nil cfg.
func Request(cfg *config.Config, body []byte, s settings.Settings, now time.Time) (*Report, error) {
	req, err := rls.ParseRequestJSON(body)
	if err != nil {
		return nil, err
	}
	x, err := rls.Explain(cfg, req, s.ServiceOptions(nil))
	if err != nil {
		return nil, err
	}
	e, err := New(s)
	if err != nil {
		return nil, err
	}
	return e.Report(x, now)
}

// Report lays x out with the keys of each limit at now. It fails when a
// limit of x is invalid (algorithms.ErrInvalidLimit), as the backend would
// refuse it.
func (e *Explainer) Report(x *rls.Explanation, now time.Time) (*Report, error) {
	r := &Report{Domain: x.Domain, Backend: string(e.backend), ShadowMode: x.ShadowMode, QuotaMode: x.QuotaMode}
	if x.RefundOnDeny {
		r.Effects = append(r.Effects, "when the request is denied, what its takes took from its other limits is given back (RLS_REFUND_ON_DENY); charges stay")
	}
	for _, d := range x.Descriptors {
		ed := Descriptor{Unlimited: d.Unlimited, Override: d.Override, Quota: d.Quota, Hits: d.Hits, Refund: d.Refund, Why: d.Trace.Why}
		for _, en := range d.Entries {
			ed.Entries = append(ed.Entries, Entry{Key: en.Key, Value: en.Value})
		}
		for _, st := range d.Trace.Steps {
			ed.Steps = append(ed.Steps, Step{Key: st.Entry.Key, Value: st.Entry.Value, By: st.By, Pattern: st.Pattern, File: st.File, Line: st.Line})
		}
		if rule := d.Trace.Rule; rule != nil {
			ed.Rule = &Rule{Path: rule.Path, File: rule.File, Line: rule.Line}
		}
		ed.Effects = descriptorEffects(d, x)
		for _, l := range d.Limits {
			el, err := e.limit(l, d, now)
			if err != nil {
				return nil, err
			}
			ed.Limits = append(ed.Limits, el)
		}
		r.Descriptors = append(r.Descriptors, ed)
	}
	return r, nil
}

// descriptorEffects says what the settings of descriptor d do.
func descriptorEffects(d rls.DescriptorExplanation, x *rls.Explanation) []string {
	var out []string
	rule := d.Trace.Rule
	switch {
	case d.Unlimited:
		out = append(out, "unlimited: matched and answered OK, counted nowhere")
	case d.UnlimitedReplacedBy != "":
		out = append(out, "its unlimited rule is replaced by "+d.UnlimitedReplacedBy+": the descriptor is answered OK, as one that matches nothing")
	case d.Override && rule == nil:
		out = append(out, "the request's own limit (descriptor.limit) counts it, though it matches no rule, under its entries, with "+x.DefaultAlgorithm.String()+" (RLS_DEFAULT_ALGORITHM)")
	case d.Override:
		out = append(out, "the request's own limit (descriptor.limit) replaces the rule's limits, with the algorithm and shards of its first")
	case rule == nil:
		out = append(out, "no limit applies: the descriptor is answered OK")
	}
	if d.Quota {
		why := "quota_mode"
		if x.QuotaMode && (rule == nil || !rule.QuotaMode) {
			why = "RLS_QUOTA_MODE"
		}
		out = append(out, why+": over its limit the descriptor is reported OVER_LIMIT, but denies the request only when every quota descriptor of it is over")
	}
	if d.Refund {
		out = append(out, fmt.Sprintf("is_negative_hits: gives %d hits back instead of taking them", d.Hits))
	}
	return out
}

// limit lays out one limit of descriptor d with its keys at now.
func (e *Explainer) limit(l rls.LimitExplanation, d rls.DescriptorExplanation, now time.Time) (Limit, error) {
	lim := l.Op.Limit
	el := Limit{
		Name:            l.Limit.Name,
		Algorithm:       lim.Algorithm.String(),
		RequestsPerUnit: lim.Requests,
		Unit:            l.Limit.Unit.String(),
		UnitMultiplier:  l.Limit.UnitMultiplier,
		Calendar:        lim.Calendar,
		Hits:            l.Op.Hits,
		ReplacedBy:      l.ReplacedBy,
		Identity:        l.Op.Identity(),
	}
	if lim.Algorithm.Spec().Burst {
		el.Burst = lim.Capacity()
	}
	switch k := l.Op.Kind; {
	case k == rate.Charge && !l.Op.Debt:
		el.Op = "record"
	case k == rate.Take && l.Op.Hits == 0:
		el.Op = "check"
	default:
		el.Op = k.String()
	}
	switch {
	case l.RuleShadow:
		el.Shadow = "rule"
	case l.Shadow:
		el.Shadow = "service"
	}
	sks, err := e.enc.StateKeys(&l.Op, now)
	if err != nil {
		return el, err
	}
	for _, sk := range sks {
		es := Shard{Keys: sk.Keys, Slot: sk.Slot, RequestsPerUnit: sk.Limit.Requests, HashTag: hashTag(sk.Keys[0])}
		if lim.Algorithm.Spec().Burst {
			es.Burst = sk.Limit.Capacity()
		}
		if sk.Shard != redisx.Unsharded {
			es.Shard = &sk.Shard
		}
		el.Shards = append(el.Shards, es)
	}
	el.Effects = e.limitEffects(l, d, len(sks))
	return el, nil
}

// hashTag returns the hash tag of key, between its first braces.
func hashTag(key string) string {
	_, rest, _ := strings.Cut(key, "{")
	tag, _, _ := strings.Cut(rest, "}")
	return tag
}

// limitEffects says what the op of limit l, of descriptor d, split over
// shards, does.
func (e *Explainer) limitEffects(l rls.LimitExplanation, d rls.DescriptorExplanation, shards int) []string {
	var out []string
	op := l.Op
	if l.ReplacedBy != "" {
		out = append(out, "replaced by "+l.ReplacedBy+": not counted")
	}
	switch {
	case op.Kind == rate.Charge && op.Debt:
		out = append(out, "charge: the hits are usage already spent, recorded even past the limit and never given back; what passes the limit is owed to later windows")
	case op.Kind == rate.Charge:
		out = append(out, "charge: the hits are usage already spent, recorded even past the limit and never given back; what passes the limit counts until its window ends")
	case op.Kind == rate.Take && op.Hits == 0:
		out = append(out, "0 hits: a check that takes nothing")
	case op.Kind == rate.Take && op.Hits < d.Hits:
		out = append(out, fmt.Sprintf("asks %d hits, more than the limit can ever hold: denied, taking nothing", d.Hits))
	}
	switch {
	case l.RuleShadow:
		out = append(out, "shadow_mode: a denial is counted in the metrics, and the descriptor answered OK")
	case l.Shadow:
		out = append(out, "RLS_SHADOW_MODE: a denial is counted in the metrics and the request answered OK; the descriptor's status stays OVER_LIMIT")
	}
	if shards > 1 {
		s := fmt.Sprintf("split over %d shards whose limits add up to %d: a take goes to one at random and may try one other before it is denied", shards, op.Limit.Requests)
		if e.backend == settings.BackendMemory {
			s += "; the memory backend keeps one state, not split"
		}
		out = append(out, s)
	} else if op.Shards > 1 {
		out = append(out, fmt.Sprintf("shards: %d, but a limit of %d hits is too small to split", op.Shards, min(op.Limit.Requests, op.Limit.Capacity())))
	}
	if spec := op.Limit.Algorithm.Spec(); spec.Counter && !op.Debt {
		out = append(out, "one key per window: the key of the window that holds the time of this answer")
	}
	return out
}

// TrimFiles leaves the prefix root out of the report's file names, as
// /rlconfig does: "edge.yaml" for "/etc/ratewarden/config/edge.yaml" with
// the root "/etc/ratewarden/config/".
func (r *Report) TrimFiles(root string) {
	if root == "" {
		return
	}
	for i := range r.Descriptors {
		d := &r.Descriptors[i]
		if d.Rule != nil {
			d.Rule.File = strings.TrimPrefix(d.Rule.File, root)
		}
		for j := range d.Steps {
			d.Steps[j].File = strings.TrimPrefix(d.Steps[j].File, root)
		}
		d.Why = strings.ReplaceAll(d.Why, root, "")
	}
}
