package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/explain"
	"github.com/ratewarden/ratewarden/internal/rlqs"
)

// reporter writes the check command's report: text, one finding a line,
// or with json one JSON document (Result, explain.Report or
// explain.BucketReport).
type reporter struct {
	out  io.Writer
	json bool
}

// Result is the JSON report of a check.
type Result struct {
	// OK reports that the limits load, and with -strict warn of nothing.
	OK   bool   `json:"ok"`
	Path string `json:"path,omitempty"`
	// Errors are every error the load found; Warnings what it loaded
	// that is likely a mistake. Notes are what loads and works, but not
	// every way in: each rule the Rate Limit Quota Service grants nothing
	// on (kind rlqs), while RLS_RLQS serves it. Notes never fail the check.
	Errors   []Finding       `json:"errors,omitempty"`
	Warnings []Finding       `json:"warnings,omitempty"`
	Notes    []Finding       `json:"notes,omitempty"`
	Domains  []DomainSummary `json:"domains,omitempty"`
}

// Finding is an error or a warning, where it is and what to do. Line and
// Column are 0 where unknown; Kind names a warning's kind.
type Finding struct {
	Kind    string `json:"kind,omitempty"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// DomainSummary is one domain's line of the report.
type DomainSummary struct {
	Domain     string         `json:"domain"`
	Files      []string       `json:"files"`
	Rules      int            `json:"rules"`
	Unlimited  int            `json:"unlimited,omitempty"`
	Limits     int            `json:"limits"`
	Algorithms map[string]int `json:"algorithms,omitempty"`
}

// failed reports err, which keeps the limits (or the request to explain)
// from loading, and returns the ExitError that ends the command: the
// message the server would give, one error a line, then how many.
func (r *reporter) failed(err error) error {
	found := config.ErrorsOf(err)
	if r.json {
		res := Result{}
		for _, e := range found {
			res.Errors = append(res.Errors, Finding{File: e.File, Line: e.Line, Column: e.Column, Field: e.Field, Message: e.Msg})
		}
		if len(found) == 0 {
			res.Errors = []Finding{{Message: err.Error()}}
		}
		r.writeJSON(res)
		return &ExitError{Code: ExitFailed}
	}
	fmt.Fprintln(r.out, err.Error())
	fmt.Fprintf(r.out, "failed: %s\n", count(max(len(found), 1), "error"))
	return &ExitError{Code: ExitFailed}
}

// loaded reports the limits cfg loaded from path: the warnings, the notes
// of the rules the quota service grants nothing on when rlqs, a line per
// domain and a last line; it fails on warnings when strict.
func (r *reporter) loaded(path string, cfg *config.Config, strict, rlqs bool) error {
	res := Result{OK: true, Path: path}
	for _, w := range cfg.Warnings() {
		res.Warnings = append(res.Warnings, Finding{Kind: string(w.Kind), File: w.File, Line: w.Line, Column: w.Column, Field: w.Field, Message: w.Msg})
	}
	if rlqs {
		res.Notes = rlqsNotes(cfg)
	}
	for _, s := range cfg.Summaries() {
		d := DomainSummary{Domain: s.Domain, Files: s.Files, Rules: s.Rules, Unlimited: s.Unlimited, Limits: s.Limits, Algorithms: map[string]int{}}
		for a, n := range s.Algorithms {
			d.Algorithms[a.String()] = n
		}
		res.Domains = append(res.Domains, d)
	}
	res.OK = !strict || len(res.Warnings) == 0
	var err error
	if !res.OK {
		err = &ExitError{Code: ExitFailed}
	}
	if r.json {
		r.writeJSON(res)
		return err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(r.out, warningLine(w))
	}
	for _, n := range res.Notes {
		fmt.Fprintln(r.out, noteLine(n))
	}
	for _, d := range res.Domains {
		fmt.Fprintln(r.out, domainLine(d))
	}
	files := len(cfg.Files())
	last := fmt.Sprintf("ok: %s in %s", count(len(res.Domains), "domain"), count(files, "file"))
	switch {
	case !res.OK:
		last = fmt.Sprintf("failed: %s (-strict)", count(len(res.Warnings), "warning"))
	case len(res.Warnings) > 0:
		last += ", " + count(len(res.Warnings), "warning")
	}
	if res.OK && len(res.Notes) > 0 {
		last += ", " + count(len(res.Notes), "note")
	}
	fmt.Fprintln(r.out, last)
	return err
}

// explained reports what -explain found.
func (r *reporter) explained(report *explain.Report) error {
	if r.json {
		r.writeJSON(report)
		return nil
	}
	io.WriteString(r.out, report.Text())
	return nil
}

// explainedBucket reports what -explain-bucket found.
func (r *reporter) explainedBucket(report *explain.BucketReport) error {
	if r.json {
		r.writeJSON(report)
		return nil
	}
	io.WriteString(r.out, report.Text())
	return nil
}

func (r *reporter) writeJSON(v any) {
	enc := json.NewEncoder(r.out)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// warningLine renders w as "file:line:column: warning: field: message
// (kind)", where editors find it as they find a compiler's.
func warningLine(w config.Warning) string {
	return findingLine("warning", w.File, w.Line, w.Column, w.Field, w.Msg, string(w.Kind))
}

// findingLine renders "file:line:column: what: field: message (kind)",
// leaving out a line or column of 0 and an empty field.
func findingLine(what, file string, line, column int, field, msg, kind string) string {
	var b strings.Builder
	b.WriteString(file)
	if line > 0 {
		b.WriteString(":" + strconv.Itoa(line))
		if column > 0 {
			b.WriteString(":" + strconv.Itoa(column))
		}
	}
	b.WriteString(": " + what + ": ")
	if field != "" {
		b.WriteString(field + ": ")
	}
	b.WriteString(msg + " (" + kind + ")")
	return b.String()
}

// rlqsKind is the kind of the notes of rules the quota service grants
// nothing on.
const rlqsKind = "rlqs"

// rlqsNotes returns a note for each rule of cfg that the Rate Limit Quota
// Service grants nothing on, or grants short of its limit (rlqs.Decide),
// where its descriptor is, saying why.
func rlqsNotes(cfg *config.Config) []Finding {
	var notes []Finding
	for _, rule := range cfg.Rules() {
		d := rlqs.Decide(rule)
		var msg string
		switch {
		case d.Answer == rlqs.NoAssignment:
			msg = "not granted over RLQS: "
		case d.Answer == rlqs.Grant && len(d.Why) > 0:
			msg = "granted over RLQS short of its limit: "
		case d.Answer == rlqs.AllowAll && len(d.Why) > 0:
			msg = "shadow_mode over RLQS: allowed all, its usage counted nowhere: "
		default:
			continue
		}
		notes = append(notes, Finding{Kind: rlqsKind, File: rule.File, Line: rule.Line, Column: rule.Column, Field: rule.Field,
			Message: msg + strings.Join(d.Why, "; ")})
	}
	return notes
}

// noteLine renders n as "file:line:column: note: field: message (kind)",
// as warningLine renders a warning.
func noteLine(n Finding) string {
	return findingLine("note", n.File, n.Line, n.Column, n.Field, n.Message, n.Kind)
}

// domainLine renders a domain's summary: "domain edge: 6 rules, 7 limits
// (fixed_window 2, token_bucket 1, …) in config/edge.yaml".
func domainLine(d DomainSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s: %s", d.Domain, count(d.Rules, "rule"))
	if d.Unlimited > 0 {
		fmt.Fprintf(&b, " (%d unlimited)", d.Unlimited)
	}
	fmt.Fprintf(&b, ", %s", count(d.Limits, "limit"))
	if len(d.Algorithms) > 0 {
		var algs []string
		for _, a := range algorithms.Algorithms {
			if n := d.Algorithms[a.String()]; n > 0 {
				algs = append(algs, a.String()+" "+strconv.Itoa(n))
			}
		}
		b.WriteString(" (" + strings.Join(algs, ", ") + ")")
	}
	b.WriteString(" in " + strings.Join(d.Files, ", "))
	return b.String()
}

// count renders n things: "1 rule", "2 rules".
func count(n int, thing string) string {
	if n != 1 {
		thing += "s"
	}
	return strconv.Itoa(n) + " " + thing
}
