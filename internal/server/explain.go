package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// ExplainReport is the answer of /explain and of the check command's
// -explain: what the service would do with a request, and why, without
// taking or giving back anything. It is rls.Explanation with, for each
// limit, where its state lives in Redis (internal/redisx's keys, hash tags
// and cluster slots), and sentences that say what shards, overrides,
// quota_mode, charges and shadow mode do to it. Its JSON is for machines,
// Text for people.
type ExplainReport struct {
	Domain string `json:"domain"`
	// Backend is RLS_BACKEND: with memory, the keys are those Redis would
	// use.
	Backend string `json:"backend"`
	// ShadowMode and QuotaMode are RLS_SHADOW_MODE and RLS_QUOTA_MODE.
	ShadowMode bool `json:"shadowMode,omitempty"`
	QuotaMode  bool `json:"quotaMode,omitempty"`
	// Effects say, in sentences, what the service's settings do to the
	// whole request.
	Effects     []string              `json:"effects,omitempty"`
	Descriptors []ExplainedDescriptor `json:"descriptors"`
}

// ExplainedDescriptor is what becomes of one request descriptor.
type ExplainedDescriptor struct {
	Entries []ExplainedEntry `json:"entries"`
	// Rule is the rule that applies; Why says why none does.
	Rule *ExplainedRule `json:"rule,omitempty"`
	Why  string         `json:"why,omitempty"`
	// Steps are the configured descriptors the entries matched.
	Steps     []ExplainedStep `json:"steps,omitempty"`
	Unlimited bool            `json:"unlimited,omitempty"`
	Override  bool            `json:"override,omitempty"`
	Quota     bool            `json:"quota,omitempty"`
	// Hits is what the descriptor asks to take, or to give back with
	// Refund.
	Hits   uint64 `json:"hits"`
	Refund bool   `json:"refund,omitempty"`
	// Effects say, in sentences, what the descriptor's settings do.
	Effects []string         `json:"effects,omitempty"`
	Limits  []ExplainedLimit `json:"limits,omitempty"`
}

// ExplainedEntry is one entry of a request descriptor.
type ExplainedEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ExplainedRule is the rule a descriptor matched.
type ExplainedRule struct {
	Path string `json:"path"`
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
}

// ExplainedStep is the configured descriptor one entry matched: by its
// value, by a wildcard (Pattern), or by its key alone.
type ExplainedStep struct {
	Key     string `json:"key"`
	Value   string `json:"value"`
	By      string `json:"by"`
	Pattern string `json:"pattern,omitempty"`
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
}

// ExplainedLimit is one limit of a descriptor, the op the service would
// send for it, and where its state lives.
type ExplainedLimit struct {
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
	Identity string           `json:"identity"`
	Shards   []ExplainedShard `json:"shards"`
	Effects  []string         `json:"effects,omitempty"`
}

// ExplainedShard is where one shard of a limit (the whole of a limit not
// split) keeps its state.
type ExplainedShard struct {
	// Shard is the shard's number; absent for a limit not split.
	Shard           *int     `json:"shard,omitempty"`
	RequestsPerUnit uint64   `json:"requestsPerUnit"`
	Burst           uint64   `json:"burst,omitempty"`
	Keys            []string `json:"keys"`
	HashTag         string   `json:"hashTag"`
	Slot            int      `json:"slot"`
}

// explainer turns an rls.Explanation into an ExplainReport for the
// settings it was made with.
type explainer struct {
	enc     *redisx.Encoder
	backend settings.Backend
}

// newExplainer returns the explainer of the settings s: keys under
// RLS_KEY_PREFIX.
func newExplainer(s settings.Settings) (*explainer, error) {
	enc, err := redisx.NewEncoder(s.KeyPrefix, 0)
	if err != nil {
		return nil, fmt.Errorf("server: RLS_KEY_PREFIX: %w", err)
	}
	return &explainer{enc: enc, backend: s.Backend}, nil
}

// Explain explains the request body, a RateLimitRequest in JSON as /json
// takes it, under cfg, as a server with the settings s would plan it at
// now, asking no backend: the check command's -explain. Its errors are
// those /explain answers with: a body that is not such JSON, a request
// the service refuses (gRPC InvalidArgument), and rls.ErrNoConfig for a
// nil cfg.
func Explain(cfg *config.Config, body []byte, s settings.Settings, now time.Time) (*ExplainReport, error) {
	req, err := rls.ParseRequestJSON(body)
	if err != nil {
		return nil, err
	}
	x, err := rls.Explain(cfg, req, s.ServiceOptions(nil))
	if err != nil {
		return nil, err
	}
	e, err := newExplainer(s)
	if err != nil {
		return nil, err
	}
	return e.report(x, now)
}

// report lays x out with the keys of each limit at now.
func (e *explainer) report(x *rls.Explanation, now time.Time) (*ExplainReport, error) {
	r := &ExplainReport{Domain: x.Domain, Backend: string(e.backend), ShadowMode: x.ShadowMode, QuotaMode: x.QuotaMode}
	if x.RefundOnDeny {
		r.Effects = append(r.Effects, "when the request is denied, what its takes took from its other limits is given back (RLS_REFUND_ON_DENY); charges stay")
	}
	for _, d := range x.Descriptors {
		ed := ExplainedDescriptor{Unlimited: d.Unlimited, Override: d.Override, Quota: d.Quota, Hits: d.Hits, Refund: d.Refund, Why: d.Trace.Why}
		for _, en := range d.Entries {
			ed.Entries = append(ed.Entries, ExplainedEntry{Key: en.Key, Value: en.Value})
		}
		for _, st := range d.Trace.Steps {
			ed.Steps = append(ed.Steps, ExplainedStep{Key: st.Entry.Key, Value: st.Entry.Value, By: st.By, Pattern: st.Pattern, File: st.File, Line: st.Line})
		}
		if rule := d.Trace.Rule; rule != nil {
			ed.Rule = &ExplainedRule{Path: rule.Path, File: rule.File, Line: rule.Line}
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
func (e *explainer) limit(l rls.LimitExplanation, d rls.DescriptorExplanation, now time.Time) (ExplainedLimit, error) {
	lim := l.Op.Limit
	el := ExplainedLimit{
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
	switch {
	case l.Op.Refund:
		el.Op = "refund"
	case l.Op.Charge && l.Op.Debt:
		el.Op = "charge"
	case l.Op.Charge:
		el.Op = "record"
	case l.Op.Hits == 0:
		el.Op = "check"
	default:
		el.Op = "take"
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
		es := ExplainedShard{Keys: sk.Keys, Slot: sk.Slot, RequestsPerUnit: sk.Limit.Requests, HashTag: hashTag(sk.Keys[0])}
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
func (e *explainer) limitEffects(l rls.LimitExplanation, d rls.DescriptorExplanation, shards int) []string {
	var out []string
	op := l.Op
	if l.ReplacedBy != "" {
		out = append(out, "replaced by "+l.ReplacedBy+": not counted")
	}
	switch {
	case op.Charge && op.Debt:
		out = append(out, "charge: the hits are usage already spent, recorded even past the limit and never given back; what passes the limit is owed to later windows")
	case op.Charge:
		out = append(out, "charge: the hits are usage already spent, recorded even past the limit and never given back; what passes the limit counts until its window ends")
	case !op.Refund && op.Hits == 0:
		out = append(out, "0 hits: a check that takes nothing")
	case !op.Refund && op.Hits < d.Hits:
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

// trimFiles leaves the prefix root out of the report's file names.
func (r *ExplainReport) trimFiles(root string) {
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

// Text renders the report for people.
func (r *ExplainReport) Text() string {
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
func entriesText(entries []ExplainedEntry) string {
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
func limitText(l ExplainedLimit) string {
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
func windowText(l ExplainedLimit) string {
	return strconv.FormatUint(uint64(l.UnitMultiplier), 10) + " " + l.Unit
}

// serveExplain answers an /explain request: its body, a RateLimitRequest
// in JSON, explained by svc and ex, with file names without the prefix
// root, as /rlconfig shows them; JSON with ?format=json, text otherwise.
// It takes and gives back nothing.
func serveExplain(svc *rls.Service, ex *explainer, root string, w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r, "/explain")
	if !ok {
		return
	}
	x, err := svc.Explain(req)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case status.Code(err) == codes.InvalidArgument:
			code = http.StatusBadRequest
		case errors.Is(err, rls.ErrNoConfig):
			code = http.StatusServiceUnavailable
		}
		httpError(w, code, status.Convert(err).Message())
		return
	}
	report, err := ex.report(x, time.Now())
	if err != nil {
		httpError(w, http.StatusInternalServerError, "rls: "+err.Error())
		return
	}
	report.trimFiles(root)
	switch format := r.URL.Query().Get("format"); format {
	case "", "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, report.Text())
	case "json":
		w.Header().Set("Content-Type", "application/json")
		writeJSON(w, report)
	default:
		httpError(w, http.StatusBadRequest, fmt.Sprintf("rls: format %q: want text or json", format))
	}
}
