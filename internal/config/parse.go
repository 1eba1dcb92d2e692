package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// MaxDepth is the deepest descriptors may nest: a request descriptor has at
// most this many entries.
const MaxDepth = 64

// MaxShards is the most keys a limit may be split across.
const MaxShards = 64

// The fields each kind of mapping may hold.
var (
	rootFields       = []string{"domain", "descriptors"}
	descriptorFields = []string{"key", "value", "rate_limit", "rate_limits", "descriptors",
		"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata",
		"allow_negative_hits", "charge"}
	rateLimitFields = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces",
		"unit_multiplier", "algorithm", "burst", "shards", "calendar"}
	rateLimitsItemFields = []string{"unit", "requests_per_unit", "name", "replaces",
		"unit_multiplier", "algorithm", "burst", "shards", "calendar"}
	replacesFields = []string{"name"}
)

// Parse builds a Config from files, in order: one domain per file, or with
// opts.MergeDomains one domain from every file that names it. Invalid opts
// are an error of their own. Otherwise it reports every error it finds, each
// an *Error naming the file, line, column and field, as long as it can go
// on: past an invalid descriptor (with its nested descriptors) to the next
// one, and past an invalid file to the next file, up to MaxErrors. One error
// is returned as the *Error it is, several as Errors; ErrorsOf finds them
// in either. No files give an empty Config, which knows no domain.
//
// Parse is safe for concurrent use: it keeps no state between calls.
func Parse(files []File, opts Options) (*Config, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	def := opts.DefaultAlgorithm
	c := &Config{domains: make(map[string]*domain, len(files))}
	var errs []*Error
	for i, f := range files {
		if len(errs) >= MaxErrors {
			errs = append(errs, &Error{File: f.Name, Msg: fmt.Sprintf("not read: the load stops after %d errors", MaxErrors)})
			break
		}
		if f.Name == "" {
			errs = append(errs, &Error{File: "files[" + strconv.Itoa(i) + "]", Msg: "file has no name"})
			continue
		}
		p := &fileParser{
			decoder:       newDecoder(f.Name, len(f.Data)),
			def:           def,
			mostSpecific:  opts.WildcardPrecedence == MostSpecificWildcard,
			merge:         opts.MergeDomains,
			domains:       c.domains,
			allowNegative: opts.AllowNegativeHits,
			room:          MaxErrors - len(errs),
			warnLifetime:  opts.WarnLifetime,
			warnLogSize:   opts.WarnLogSize,
		}
		d, err := p.parse(f.Data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				return nil, err
			}
			p.errs = append(p.errs, e)
		}
		// The domain of a file with errors counts too, so that a later
		// file of the same domain is reported as the server would once
		// this one is fixed.
		if d != nil && c.domains[d.name] == nil {
			c.domains[d.name] = d
			c.names = append(c.names, d.name)
		}
		if d != nil {
			d.files = append(d.files, f.Name)
		}
		errs = append(errs, p.errs...)
		c.warnings = append(c.warnings, p.warnings...)
		c.rules = append(c.rules, p.rules...)
		c.files = append(c.files, f.Name)
	}
	if err := errorOf(errs); err != nil {
		return nil, err
	}
	slices.Sort(c.names)
	return c, nil
}

// MaxErrors is the most errors Parse reports: past them it stops, saying
// so.
const MaxErrors = 100

// fileParser turns one file into a domain's tree and rules.
type fileParser struct {
	*decoder
	def algorithms.Algorithm
	// mostSpecific orders wildcards by their literal bytes.
	mostSpecific bool
	// merge lets the file add to a domain of an earlier file, which
	// domains holds.
	merge   bool
	domains map[string]*domain
	domain  string
	// allowNegative is the AllowNegativeHits of rules that do not say.
	allowNegative bool
	// rules collects the file's rules in document order.
	rules []*Rule
	// segments holds the path segments ("key" or "key_value") from the top
	// level down to the descriptor being read.
	segments []string
	// errs holds the errors of the descriptors that parsing went on past
	// (see keep), at most room of them.
	errs []*Error
	room int
	// warnLifetime and warnLogSize are Options.WarnLifetime and
	// Options.WarnLogSize.
	warnLifetime time.Duration
	warnLogSize  uint64
}

// keep records err, the error of one descriptor, so that parsing goes on
// with the next one, and reports whether it may: not once the file's
// budget is spent (every later node would fail too), nor once room errors
// are found; then parsing stops with err.
func (p *fileParser) keep(err error) bool {
	e, ok := err.(*Error)
	if !ok || p.budget < 0 || len(p.errs)+1 >= p.room {
		return false
	}
	p.errs = append(p.errs, e)
	return true
}

// parse reads the file's one document into its domain: a new one, or with
// merge the one an earlier file configured. A file of the usual shape is
// read in pieces (see cutPieces), others whole. The errors parsing went on
// past are in p.errs; the error returned, if any, is the one it stopped
// at, and the domain is returned whenever the root was read.
func (p *fileParser) parse(data []byte) (*domain, error) {
	if ps, ok := cutPieces(data); ok {
		budget := p.budget
		if d, err := p.parsePieces(ps); err == nil {
			return d, nil
		}
		p.budget, p.rules, p.segments, p.errs, p.warnings, p.warned = budget, nil, p.segments[:0], nil, nil, nil
	}
	return p.parseWhole(data)
}

// parseWhole reads the file's one document as one YAML tree.
func (p *fileParser) parseWhole(data []byte) (*domain, error) {
	root, err := readDocument(p.file, data)
	if err != nil {
		return nil, err
	}
	d, fs, err := p.parseRoot(root)
	if err != nil {
		return nil, err
	}
	v, ok, err := p.get(fs, "", "descriptors")
	if err != nil {
		return nil, err
	}
	if ok {
		if err := p.descriptors(v, d.top, nil, 1); err != nil {
			return d, err
		}
	}
	return d, nil
}

// parseRoot reads the document's root, whose node is root, and returns its
// domain, new or (with merge) an earlier file's, and its fields.
func (p *fileParser) parseRoot(root *yaml.Node) (*domain, fields, error) {
	rn, err := p.resolve(root, "")
	if err != nil {
		return nil, nil, err
	}
	switch {
	case isNull(rn):
		return nil, nil, p.errorf(root, "", "empty document: want a mapping with domain and descriptors")
	case rn.Kind != yaml.MappingNode:
		return nil, nil, p.errorf(root, "", "want a mapping with domain and descriptors, got %s", describe(rn))
	}
	fs, err := p.mapping(root, "", rootFields)
	if err != nil {
		return nil, nil, err
	}
	name, at, err := p.optionalString(fs, "", "domain")
	if err != nil {
		return nil, nil, err
	}
	if name == "" {
		if at == nil {
			at = root
		}
		return nil, nil, p.errorf(at, "domain", "config file cannot have empty domain")
	}
	p.domain = name
	d := p.domains[name]
	switch {
	case d == nil:
		d = &domain{name: name, file: p.file, line: at.Line, top: &level{}}
	case !p.merge:
		return nil, nil, p.errorf(at, "domain", "duplicate domain %q (also in %s:%d)", name, d.file, d.line)
	}
	return d, fs, nil
}

// optionalString returns field name of fs as a string ("" when absent or
// null) and the node it was read from (nil when absent).
func (p *fileParser) optionalString(fs fields, path, name string) (string, *yaml.Node, error) {
	v, ok, err := p.get(fs, path, name)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		if f, present := fs[name]; present {
			return "", f.value, nil
		}
		return "", nil, nil
	}
	s, err := p.str(v)
	return s, v.at, err
}

// optionalBool returns field name of fs, false when absent or null.
func (p *fileParser) optionalBool(fs fields, path, name string) (bool, error) {
	return p.optionalBoolOr(fs, path, name, false)
}

// optionalBoolOr returns field name of fs, def when absent or null.
func (p *fileParser) optionalBoolOr(fs fields, path, name string, def bool) (bool, error) {
	v, ok, err := p.get(fs, path, name)
	if err != nil || !ok {
		return def, err
	}
	return p.boolean(v)
}

// descriptors reads the descriptor list v into lvl; their parent is parent
// (nil at the top level) and they are at the given depth (1 at the top).
func (p *fileParser) descriptors(v value, lvl *level, parent *node, depth int) error {
	items, err := p.list(v)
	if err != nil {
		return err
	}
	if depth > MaxDepth && len(items) > 0 {
		return p.errorf(v.at, v.path, "descriptors nested more than %d deep", MaxDepth)
	}
	for i, item := range items {
		if err := p.descriptor(item, v.path+"["+strconv.Itoa(i)+"]", i, lvl, parent, depth); err != nil && !p.keep(err) {
			return err
		}
	}
	return nil
}

// descriptor reads the descriptor at, the index-th of its list, into lvl.
func (p *fileParser) descriptor(at *yaml.Node, path string, index int, lvl *level, parent *node, depth int) error {
	fs, err := p.mapping(at, path, descriptorFields)
	if err != nil {
		return err
	}
	if err := p.charge(len(path)/16, at, path); err != nil {
		return err
	}
	n := &node{parent: parent, file: p.file, line: at.Line, column: int32(at.Column), index: int32(index)}
	key, keyAt, err := p.optionalString(fs, path, "key")
	if err != nil {
		return err
	}
	if key == "" {
		if keyAt == nil {
			keyAt = at
		}
		return p.errorf(keyAt, joinPath(path, "key"), "descriptor has empty key")
	}
	n.key = key
	if n.value, _, err = p.optionalString(fs, path, "value"); err != nil {
		return err
	}
	segment := n.key
	switch {
	case n.value == "":
		n.kind = keyNode
	case strings.Contains(n.value, "*"):
		n.setPattern()
		segment += "_" + n.value
	default:
		n.kind = exactNode
		segment += "_" + n.value
	}
	p.segments = append(p.segments[:depth-1], segment)
	if prev := lvl.add(n, p.mostSpecific); prev != nil {
		first := "line " + strconv.Itoa(prev.line)
		if prev.file != p.file {
			first = prev.file + ":" + strconv.Itoa(prev.line)
		}
		return p.errorf(at, path, "duplicate descriptor %q (first at %s)", p.rulePath(), first)
	}

	var shadow, quota bool
	for _, flag := range []struct {
		name string
		dst  *bool
	}{
		{"shadow_mode", &shadow},
		{"quota_mode", &quota},
		{"detailed_metric", &n.detailedMetric},
		{"value_to_metric", &n.valueToMetric},
		{"share_threshold", &n.share},
	} {
		if *flag.dst, err = p.optionalBool(fs, path, flag.name); err != nil {
			return err
		}
	}
	// As in envoyproxy/ratelimit, a '*' in the key counts too, although
	// keys are matched literally here.
	if n.share && !strings.Contains(n.key, "*") && !strings.Contains(n.value, "*") {
		v, _, _ := p.get(fs, path, "share_threshold")
		return p.errorf(v.at, v.path, "share_threshold can only be used with wildcard values (containing '*'), but found %q", segment)
	}
	n.shareKey = n.kind == wildcardNode && n.share || parent != nil && parent.shareKey
	n.valueMetric = n.valueToMetric && (n.kind == keyNode || n.kind == wildcardNode && !n.share) ||
		parent != nil && parent.valueMetric
	n.detailedValues = n.kind == keyNode || n.kind == wildcardNode && !n.share ||
		parent != nil && parent.detailedValues

	allowNegative, err := p.optionalBoolOr(fs, path, "allow_negative_hits", p.allowNegative)
	if err != nil {
		return err
	}

	rule := &Rule{
		Domain:            p.domain,
		ShadowMode:        shadow,
		QuotaMode:         quota,
		AllowNegativeHits: allowNegative,
		DetailedMetric:    n.detailedMetric,
		ValueToMetric:     n.valueToMetric,
		File:              p.file,
		Line:              at.Line,
		Column:            at.Column,
		Field:             path,
	}
	if v, ok, err := p.get(fs, path, "metadata"); err != nil {
		return err
	} else if ok {
		if rule.Metadata, err = p.metadata(v); err != nil {
			return err
		}
	}
	def, charge, err := p.charges(fs, path, rule)
	if err != nil {
		return err
	}
	limited, err := p.rule(fs, path, rule, def)
	if err != nil {
		return err
	}
	if !limited || rule.Unlimited {
		if charge != nil && rule.Charge {
			return p.errorf(charge.at, charge.path, "charge applies to the hits of a rate limit, and this descriptor has none that counts")
		}
		rule.Charge, rule.Debt = false, false
	}
	if limited {
		rule.Path = p.rulePath()
		if err := p.charge(len(rule.Path)/16, at, path); err != nil {
			return err
		}
		n.rule = rule
		p.rules = append(p.rules, rule)
	}

	v, ok, err := p.get(fs, path, "descriptors")
	if err != nil || !ok {
		return err
	}
	children := &level{}
	if err := p.descriptors(v, children, n, depth+1); err != nil {
		return err
	}
	if !children.empty() {
		n.children = children
	}
	return nil
}

// charges sets r.Charge and r.Debt from the descriptor fs at path and
// returns the algorithm of its limits that name none, and the charge field
// when it is set. A quota_mode descriptor counts as envoyproxy/ratelimit
// counts a quota: every hit recorded, even past the limit, until its window
// ends (charge: window), in fixed windows; an explicit charge or algorithm
// overrides either. The field is a boolean, true meaning debt (usage past
// the limit is owed to later windows), or window or debt.
func (p *fileParser) charges(fs fields, path string, r *Rule) (algorithms.Algorithm, *value, error) {
	quota := r.QuotaMode
	r.Charge, r.Debt = quota, false
	v, ok, err := p.get(fs, path, "charge")
	if err != nil {
		return 0, nil, err
	}
	var set *value
	if ok {
		if r.Charge, r.Debt, err = p.chargeMode(v); err != nil {
			return 0, nil, err
		}
		set = &v
	}
	if quota {
		return algorithms.FixedWindow, set, nil
	}
	return p.def, set, nil
}

// chargeMode reads a charge field: false, true or debt (charges, owing what
// they record past the limit), or window (charges that owe nothing past
// their window).
func (p *fileParser) chargeMode(v value) (charge, debt bool, err error) {
	if n := v.node; n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		switch n.Value {
		case "window":
			return true, false, nil
		case "debt":
			return true, true, nil
		}
	}
	b, err := p.boolean(v)
	if err != nil {
		return false, false, p.errorf(v.at, v.path, "want true, false, window or debt, got %s", describe(v.node))
	}
	return b, b, nil
}

// rulePath returns the Rule.Path of the descriptor being read.
func (p *fileParser) rulePath() string {
	return p.domain + "." + strings.Join(p.segments, ".")
}

// parsedLimit is one limit of a rule and where it was configured.
type parsedLimit struct {
	RateLimit
	at   *yaml.Node
	path string
	// replacesAt locates each entry of Replaces.
	replacesAt []*yaml.Node
	// replacesPaths names each entry of Replaces.
	replacesPaths []string
}

// rule fills in r's limits from the rate_limit and rate_limits fields of the
// descriptor fs at path, and reports whether it has any (or is unlimited).
// def is the algorithm of the limits that name none.
func (p *fileParser) rule(fs fields, path string, r *Rule, def algorithms.Algorithm) (bool, error) {
	one, hasOne, err := p.get(fs, path, "rate_limit")
	if err != nil {
		return false, err
	}
	many, hasMany, err := p.get(fs, path, "rate_limits")
	if err != nil {
		return false, err
	}
	var limits []parsedLimit
	if hasOne {
		rfs, err := p.mapping(one.at, one.path, rateLimitFields)
		if err != nil {
			return false, err
		}
		unlimited, err := p.optionalBool(rfs, one.path, "unlimited")
		if err != nil {
			return false, err
		}
		if unlimited {
			if hasMany {
				return false, p.errorf(many.at, many.path, "should not be combined with an unlimited rate_limit")
			}
			return true, p.unlimited(rfs, one.path, r)
		}
		l, err := p.limit(rfs, one.at, one.path, def)
		if err != nil {
			return false, err
		}
		limits = append(limits, l)
	}
	if hasMany {
		items, err := p.list(many)
		if err != nil {
			return false, err
		}
		for j, item := range items {
			ip := many.path + "[" + strconv.Itoa(j) + "]"
			ifs, err := p.mapping(item, ip, rateLimitsItemFields)
			if err != nil {
				return false, err
			}
			l, err := p.limit(ifs, item, ip, def)
			if err != nil {
				return false, err
			}
			limits = append(limits, l)
		}
	}
	for j, b := range limits {
		for _, a := range limits[:j] {
			if a.Limit.Algorithm == b.Limit.Algorithm && a.Limit.Window == b.Limit.Window {
				return false, p.errorf(b.at, b.path, "same algorithm (%s) and window (%s) as %s: the two would share one state",
					b.Limit.Algorithm, windowString(b.Unit, b.UnitMultiplier), a.path)
			}
		}
		for k, name := range b.Replaces {
			for _, a := range limits {
				if a.Name == name {
					return false, p.errorf(b.replacesAt[k], b.replacesPaths[k],
						"replaces should not name %q, a limit of the same descriptor", name)
				}
			}
		}
	}
	for _, l := range limits {
		r.Limits = append(r.Limits, l.RateLimit)
	}
	return len(r.Limits) > 0, nil
}

// unlimited makes r an unlimited rule from the rate_limit fs at path.
func (p *fileParser) unlimited(fs fields, path string, r *Rule) error {
	unit, at, err := p.optionalString(fs, path, "unit")
	if err != nil {
		return err
	}
	if unit != "" {
		return p.errorf(at, joinPath(path, "unit"), "should not specify rate limit unit when unlimited")
	}
	for _, name := range []string{"unit_multiplier", "algorithm", "burst", "shards"} {
		v, ok, err := p.get(fs, path, name)
		if err != nil {
			return err
		}
		if ok {
			return p.errorf(v.at, v.path, "should not be set when unlimited")
		}
	}
	// requests_per_unit means nothing here, but envoyproxy/ratelimit accepts
	// it (in its range), so it is checked and ignored.
	if v, ok, err := p.get(fs, path, "requests_per_unit"); err != nil {
		return err
	} else if ok {
		if _, err := p.uint(v, 0, algorithms.MaxRequests); err != nil {
			return err
		}
	}
	l := parsedLimit{}
	if err := p.names(fs, path, &l); err != nil {
		return err
	}
	r.Unlimited = true
	r.Name = l.Name
	r.Replaces = l.Replaces
	return nil
}

// names reads the name and replaces of the rate limit fs at path into l.
func (p *fileParser) names(fs fields, path string, l *parsedLimit) error {
	var err error
	if l.Name, _, err = p.optionalString(fs, path, "name"); err != nil {
		return err
	}
	v, ok, err := p.get(fs, path, "replaces")
	if err != nil || !ok {
		return err
	}
	items, err := p.list(v)
	if err != nil {
		return err
	}
	for j, item := range items {
		ip := v.path + "[" + strconv.Itoa(j) + "]"
		ifs, err := p.mapping(item, ip, replacesFields)
		if err != nil {
			return err
		}
		name, at, err := p.optionalString(ifs, ip, "name")
		if err != nil {
			return err
		}
		if at == nil {
			at = item
		}
		np := joinPath(ip, "name")
		switch name {
		case "":
			return p.errorf(at, np, "should not have an empty replaces entry")
		case l.Name:
			return p.errorf(at, np, "replaces should not contain name of same descriptor")
		}
		l.Replaces = append(l.Replaces, name)
		l.replacesAt = append(l.replacesAt, at)
		l.replacesPaths = append(l.replacesPaths, np)
	}
	return nil
}

// unitsWanted lists the valid units for error messages.
const unitsWanted = "want second, minute, hour, day, week, month or year"

// parseUnit returns the unit named s, in any case, as envoyproxy/ratelimit
// reads it.
func parseUnit(s string) (Unit, bool) {
	upper := strings.ToUpper(s)
	for u := Second; u <= Year; u++ {
		if strings.ToUpper(u.String()) == upper {
			return u, true
		}
	}
	return 0, false
}

// limit reads the rate limit fs, written at at with path path; def is its
// algorithm unless it names one.
func (p *fileParser) limit(fs fields, at *yaml.Node, path string, def algorithms.Algorithm) (parsedLimit, error) {
	l := parsedLimit{at: at, path: path}
	unitName, unitAt, err := p.optionalString(fs, path, "unit")
	if err != nil {
		return l, err
	}
	unit, ok := parseUnit(unitName)
	if !ok {
		if unitAt == nil {
			unitAt = at
		}
		return l, p.errorf(unitAt, joinPath(path, "unit"), "invalid rate limit unit %q (%s)", unitName, unitsWanted)
	}
	windowAt, windowPath := unitAt, joinPath(path, "unit")

	number := func(name string, lo, hi, def uint64) (uint64, *yaml.Node, error) {
		v, ok, err := p.get(fs, path, name)
		if err != nil || !ok {
			return def, nil, err
		}
		n, err := p.uint(v, lo, hi)
		return n, v.at, err
	}
	requests, requestsAt, err := number("requests_per_unit", 0, algorithms.MaxRequests, 0)
	if err != nil {
		return l, err
	}
	multiplier, multiplierAt, err := number("unit_multiplier", 1, math.MaxUint32, 1)
	if err != nil {
		return l, err
	}
	if multiplierAt != nil {
		windowAt, windowPath = multiplierAt, joinPath(path, "unit_multiplier")
	}

	calendar, calendarAt, err := p.calendar(fs, path, unit, multiplier, multiplierAt)
	if err != nil {
		return l, err
	}
	alg := def
	if calendar {
		alg = algorithms.FixedWindow
	}
	algName, algAt, err := p.optionalString(fs, path, "algorithm")
	if err != nil {
		return l, err
	}
	if algAt != nil {
		if alg, err = algorithms.ParseAlgorithm(algName); err != nil {
			e := p.errorf(algAt, joinPath(path, "algorithm"),
				"unknown algorithm %q (want %s)", algName, algorithms.Names(nil))
			e.Err = err
			return l, e
		}
		if calendar && !alg.Spec().Calendar {
			return l, p.errorf(calendarAt, joinPath(path, "calendar"), "calendar windows apply only to %s, not %s",
				algorithms.Names(func(s algorithms.Spec) bool { return s.Calendar }), alg)
		}
	}

	var burst uint64
	var burstAt *yaml.Node
	if v, ok, err := p.get(fs, path, "burst"); err != nil {
		return l, err
	} else if ok {
		if !alg.Spec().Burst {
			return l, p.errorf(v.at, v.path, "burst applies only to %s, not %s",
				algorithms.Names(func(s algorithms.Spec) bool { return s.Burst }), alg)
		}
		if burst, err = p.uint(v, 1, algorithms.MaxRequests); err != nil {
			return l, err
		}
		burstAt = v.at
	}
	shards, shardsAt, err := number("shards", 1, MaxShards, 1)
	if err != nil {
		return l, err
	}
	if err := p.names(fs, path, &l); err != nil {
		return l, err
	}

	if multiplier > uint64(algorithms.MaxWindow/unit.Duration()) {
		return l, p.errorf(windowAt, windowPath, "window of %s exceeds the longest window, %d days",
			windowString(unit, uint32(multiplier)), algorithms.MaxWindow/(24*time.Hour))
	}
	limit := algorithms.Limit{Algorithm: alg, Window: time.Duration(multiplier) * unit.Duration(), Calendar: calendar}
	// Validate grows field by field, so that its error names the right one.
	for _, step := range []struct {
		set  func()
		at   *yaml.Node
		path string
	}{
		{func() {}, windowAt, windowPath},
		{func() { limit.Requests = requests }, requestsAt, joinPath(path, "requests_per_unit")},
		{func() { limit.Burst = burst }, burstAt, joinPath(path, "burst")},
	} {
		step.set()
		if err := limit.Validate(); err != nil {
			if step.at == nil {
				step.at = at
			}
			e := p.errorf(step.at, step.path, "%v", err)
			e.Err = err
			return l, e
		}
	}
	l.Limit = limit
	l.Unit = unit
	l.UnitMultiplier = uint32(multiplier)
	l.Shards = uint32(shards)
	p.limitWarnings(l.RateLimit, at, requestsAt, shardsAt, path)
	return l, nil
}

// calendar reads the calendar field of the rate limit fs at path, whose
// unit is unit and whose unit_multiplier, multiplier, is at multiplierAt: a
// calendar limit counts in UTC days, ISO weeks, months or years, one at a
// time. It returns where the field is, when set.
func (p *fileParser) calendar(fs fields, path string, unit Unit, multiplier uint64, multiplierAt *yaml.Node) (bool, *yaml.Node, error) {
	v, ok, err := p.get(fs, path, "calendar")
	if err != nil || !ok {
		return false, nil, err
	}
	on, err := p.boolean(v)
	if err != nil || !on {
		return false, v.at, err
	}
	switch {
	case !unit.calendar():
		return false, nil, p.errorf(v.at, v.path, "calendar windows are a day, a week, a month or a year, not a %s", unit)
	case multiplier != 1:
		return false, nil, p.errorf(multiplierAt, joinPath(path, "unit_multiplier"), "a calendar window is one %s: unit_multiplier must be 1", unit)
	}
	return true, v.at, nil
}

// windowString names a window for humans: "1 second", "5 minute".
func windowString(u Unit, multiplier uint32) string {
	return strconv.FormatUint(uint64(multiplier), 10) + " " + u.String()
}
