package explain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/rlqs"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// ErrNotBucketJSON is wrapped by the error of ParseBucket for a body that
// is not a BucketRequest in JSON.
var ErrNotBucketJSON = errors.New(`explain: a bucket is {"domain": "…", "bucket": {"key": "value", …}} in JSON`)

// BucketRequest is a bucket id as an Envoy's rate_limit_quota filter
// reports it, with the filter's domain: what the check command's
// -explain-bucket takes, as {"domain": "quota", "bucket": {"tenant": "acme"}}.
type BucketRequest struct {
	Domain string            `json:"domain"`
	Bucket map[string]string `json:"bucket"`
}

// ParseBucket reads body, a BucketRequest in JSON. Its error wraps
// ErrNotBucketJSON and says what is wrong: JSON that does not parse, a
// field of another name, an empty domain, bucket or key.
func ParseBucket(body []byte) (BucketRequest, error) {
	var req BucketRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	switch {
	case err != nil:
	case dec.More():
		err = errors.New("more than one JSON value")
	case req.Domain == "":
		err = errors.New("the domain is empty")
	case len(req.Bucket) == 0:
		err = errors.New("the bucket has no entries")
	default:
		if _, ok := req.Bucket[""]; ok {
			err = errors.New("the bucket has an empty key")
		}
	}
	if err != nil {
		return BucketRequest{}, fmt.Errorf("%w: %w", ErrNotBucketJSON, err)
	}
	return req, nil
}

// BucketReport is what the Rate Limit Quota Service would do with a bucket
// id, and why: the descriptor the id stands for (rlqs.Entries), how it
// went down its domain's tree, the rule that applies, and the answer
// (rlqs.Decide): a grant, with the limit its hits are reserved on and
// where that limit's state lives, ALLOW_ALL, or no assignment and why. Its
// JSON is for machines, Text for people.
type BucketReport struct {
	Domain string `json:"domain"`
	// Backend is RLS_BACKEND: with memory, the keys are those Redis would
	// use.
	Backend string `json:"backend"`
	// Served is RLS_RLQS: false when the server serves no RLQS.
	Served bool              `json:"served"`
	Bucket map[string]string `json:"bucket"`
	// Entries are the descriptor the bucket id stands for: its entries in
	// the order of their keys.
	Entries []Entry `json:"entries"`
	// Steps are the configured descriptors the entries matched; Rule is
	// the rule that applies, nil when none does.
	Steps []Step `json:"steps,omitempty"`
	Rule  *Rule  `json:"rule,omitempty"`
	// Answer is what the service sends for the bucket: grant, allow_all or
	// no_assignment (rlqs.Answer).
	Answer string `json:"answer"`
	// Why says why the answer is no_assignment: why no rule applies, or
	// what keeps a grant from counting on the rule; for a grant, what keeps
	// grants from admitting all the limit allows.
	Why []string `json:"why,omitempty"`
	// Grant is the limit a grant's hits are reserved on.
	Grant *Grant `json:"grant,omitempty"`
	// Effects say, in sentences, what the answer means.
	Effects []string `json:"effects,omitempty"`
}

// Grant is the limit the grants of a bucket are reserved on, and where its
// state lives: the same state as a RateLimitService descriptor of the same
// entries counts on.
type Grant struct {
	Name            string   `json:"name,omitempty"`
	Algorithm       string   `json:"algorithm"`
	RequestsPerUnit uint64   `json:"requestsPerUnit"`
	Unit            string   `json:"unit"`
	UnitMultiplier  uint32   `json:"unitMultiplier"`
	Burst           uint64   `json:"burst,omitempty"`
	Calendar        bool     `json:"calendar,omitempty"`
	Identity        string   `json:"identity"`
	Keys            []string `json:"keys"`
	HashTag         string   `json:"hashTag"`
	Slot            int      `json:"slot"`
}

// Bucket explains body, a BucketRequest in JSON, under cfg, as a server
// with the settings s would answer it at now, asking no backend: the check
// command's -explain-bucket. Its errors are a body that is not such JSON
// (ErrNotBucketJSON), and those of Explainer.Bucket.
func Bucket(cfg *config.Config, body []byte, s settings.Settings, now time.Time) (*BucketReport, error) {
	req, err := ParseBucket(body)
	if err != nil {
		return nil, err
	}
	e, err := New(s)
	if err != nil {
		return nil, err
	}
	return e.Bucket(cfg, req, now)
}

// Bucket lays out what the quota service does with req's bucket under cfg,
// with the keys of its limit at now. It fails when the limit is invalid
// (algorithms.ErrInvalidLimit), as the backend would refuse it.
func (e *Explainer) Bucket(cfg *config.Config, req BucketRequest, now time.Time) (*BucketReport, error) {
	entries := rlqs.Entries(req.Bucket)
	r := &BucketReport{Domain: req.Domain, Backend: string(e.backend), Served: e.rlqs, Bucket: req.Bucket}
	if !e.rlqs {
		r.Effects = append(r.Effects, "RLS_RLQS=false: this server serves no RLQS, and an Envoy's stream to it fails; the answer is a server's that serves it")
	}
	for _, en := range entries {
		r.Entries = append(r.Entries, Entry{Key: en.Key, Value: en.Value})
	}
	tr := cfg.Trace(req.Domain, entries)
	for _, st := range tr.Steps {
		r.Steps = append(r.Steps, Step{Key: st.Entry.Key, Value: st.Entry.Value, By: st.By, Pattern: st.Pattern, File: st.File, Line: st.Line})
	}
	m, ok := cfg.Match(req.Domain, entries)
	if !ok {
		r.Answer, r.Why = rlqs.NoAssignment.String(), []string{tr.Why}
		r.Effects = append(r.Effects, "no action is sent: the Envoy's no_assignment_behavior decides the bucket's requests")
		return r, nil
	}
	r.Rule = &Rule{Path: m.Rule.Path, File: m.Rule.File, Line: m.Rule.Line}
	d := rlqs.Decide(m.Rule)
	if d.Answer == rlqs.Grant && e.shadowMode {
		d.Answer = rlqs.Record
	}
	r.Answer, r.Why = d.Answer.String(), d.Why
	switch d.Answer {
	case rlqs.AllowAll:
		if m.Rule.ShadowMode {
			r.Effects = append(r.Effects, "shadow_mode: the bucket is assigned ALLOW_ALL, for an hour at a time, and its usage is counted nowhere")
			return r, nil
		}
		r.Effects = append(r.Effects, "unlimited: the bucket is assigned ALLOW_ALL, for an hour at a time, and counted nowhere")
		return r, nil
	case rlqs.NoAssignment:
		r.Effects = append(r.Effects, "no action is sent: the Envoy's no_assignment_behavior decides the bucket's requests; a RateLimitService descriptor of the same entries is counted by the rule as ever")
		return r, nil
	}
	op := rate.Op{Key: m.Key, Limit: d.Limit.Limit, Tag: m.MetricKey}
	g, err := e.grant(&op, d.Limit, now)
	if err != nil {
		return nil, err
	}
	r.Grant = g
	if d.Answer == rlqs.Record {
		why := "shadow_mode"
		if !m.Rule.ShadowMode {
			why = "RLS_SHADOW_MODE"
		}
		r.Effects = append(r.Effects, why+": the bucket is assigned ALLOW_ALL, for an hour at a time, and what the Envoys report they allowed is charged to the limit, where RateLimitService counts the same entries")
		return r, nil
	}
	r.Effects = append(r.Effects, "a grant is k hits reserved on the limit in one backend call, in the state that RateLimitService counts the same entries in, and sent as a token bucket of k tokens that does not refill: grants never add up past the limit")
	if op.Limit.Algorithm.Spec().Windowed {
		r.Effects = append(r.Effects, "a grant ends a second before its window does: none is made in a window's last 2 seconds")
	}
	return r, nil
}

// grant lays out the limit l that op counts on, with its keys at now.
func (e *Explainer) grant(op *rate.Op, l *config.RateLimit, now time.Time) (*Grant, error) {
	sks, err := e.enc.StateKeys(op, now)
	if err != nil {
		return nil, err
	}
	lim := op.Limit
	g := &Grant{
		Name:            l.Name,
		Algorithm:       lim.Algorithm.String(),
		RequestsPerUnit: lim.Requests,
		Unit:            l.Unit.String(),
		UnitMultiplier:  l.UnitMultiplier,
		Calendar:        lim.Calendar,
		Identity:        op.Identity(),
		Keys:            sks[0].Keys,
		HashTag:         hashTag(sks[0].Keys[0]),
		Slot:            sks[0].Slot,
	}
	if lim.Algorithm.Spec().Burst {
		g.Burst = lim.Capacity()
	}
	return g, nil
}
