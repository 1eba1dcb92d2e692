package envoymodel

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Request is what Envoy's rate limit actions can see of an HTTP request.
// The zero value is a GET of "/" with no headers from no IP address.
type Request struct {
	// Method is the :method pseudo-header; empty means GET.
	Method string
	// Authority is the :authority (Host) header.
	Authority string
	// Path is the :path pseudo-header: the path and the query string.
	// Empty means "/".
	Path string
	// Headers are the other request headers, by lower-case name.
	Headers map[string]string
	// RemoteAddress is the client address Envoy trusts: the connection's
	// peer with use_remote_address. An IPv4-mapped IPv6 address is sent as
	// IPv4, as a dual-stack listener sees it. The zero Addr is no IP
	// address, for which remote_address actions produce nothing.
	RemoteAddress netip.Addr
	// SourceCluster and DestinationCluster are what the source_cluster and
	// destination_cluster actions send: Envoy's --service-cluster and the
	// route's cluster.
	SourceCluster, DestinationCluster string
}

// header returns a request header by name, pseudo-headers included.
func (r Request) header(name string) (string, bool) {
	switch name = strings.ToLower(name); name {
	case ":method":
		if r.Method == "" {
			return "GET", true
		}
		return r.Method, true
	case ":path":
		return r.path(), true
	case ":authority", "host":
		return r.Authority, r.Authority != ""
	}
	v, ok := r.Headers[name]
	return v, ok
}

func (r Request) path() string {
	if r.Path == "" {
		return "/"
	}
	return r.Path
}

// Descriptors returns the descriptors Envoy sends for req from the
// rate_limits entries of stage: one per entry, in order, unless one of the
// entry's actions produces nothing for req, in which case the entry sends
// none. It returns an error for settings the model does not follow. It is
// safe for concurrent use.
func Descriptors(limits []*routev3.RateLimit, stage uint32, req Request) ([]*ratelimitv3.RateLimitDescriptor, error) {
	var out []*ratelimitv3.RateLimitDescriptor
	for i, rl := range limits {
		if err := onlyFields(rl, "stage", "actions"); err != nil {
			return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
		}
		if rl.GetStage().GetValue() != stage {
			continue
		}
		d := &ratelimitv3.RateLimitDescriptor{}
		complete := true
		for j, a := range rl.GetActions() {
			entry, ok, err := actionEntry(a, req)
			if err != nil {
				return nil, fmt.Errorf("rate_limits[%d].actions[%d]: %w", i, j, err)
			}
			if !ok {
				complete = false
				break
			}
			if entry != nil {
				d.Entries = append(d.Entries, entry)
			}
		}
		if complete && len(d.Entries) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// actionEntry returns the entry one action adds for req. ok is false when the
// action has nothing to say, which drops the whole descriptor; a nil entry
// with ok true adds nothing and keeps the descriptor (skip_if_absent).
func actionEntry(a *routev3.RateLimit_Action, req Request) (entry *ratelimitv3.RateLimitDescriptor_Entry, ok bool, err error) {
	e := func(key, value string) (*ratelimitv3.RateLimitDescriptor_Entry, bool, error) {
		return &ratelimitv3.RateLimitDescriptor_Entry{Key: key, Value: value}, true, nil
	}
	switch act := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_RemoteAddress_:
		if !req.RemoteAddress.IsValid() {
			return nil, false, nil
		}
		return e("remote_address", req.RemoteAddress.Unmap().String())
	case *routev3.RateLimit_Action_RequestHeaders_:
		h := act.RequestHeaders
		v, present := req.header(h.GetHeaderName())
		switch {
		case present:
			return e(h.GetDescriptorKey(), v)
		case h.GetSkipIfAbsent():
			return nil, true, nil
		default:
			return nil, false, nil
		}
	case *routev3.RateLimit_Action_GenericKey_:
		g := act.GenericKey
		if err := onlyFields(g, "descriptor_value", "descriptor_key"); err != nil {
			return nil, false, err
		}
		return e(orDefault(g.GetDescriptorKey(), "generic_key"), g.GetDescriptorValue())
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		m := act.HeaderValueMatch
		if err := onlyFields(m, "descriptor_value", "descriptor_key", "expect_match", "headers"); err != nil {
			return nil, false, err
		}
		matched, err := headersMatch(m.GetHeaders(), req)
		if err != nil {
			return nil, false, err
		}
		expect := m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()
		if matched != expect {
			return nil, false, nil
		}
		return e(orDefault(m.GetDescriptorKey(), "header_match"), m.GetDescriptorValue())
	case *routev3.RateLimit_Action_SourceCluster_:
		return e("source_cluster", req.SourceCluster)
	case *routev3.RateLimit_Action_DestinationCluster_:
		return e("destination_cluster", req.DestinationCluster)
	default:
		return nil, false, fmt.Errorf("envoy: rate limit action %T is not modelled", act)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// headersMatch reports whether req has every header the matchers ask for.
func headersMatch(ms []*routev3.HeaderMatcher, req Request) (bool, error) {
	for _, m := range ms {
		ok, err := headerMatches(m, req)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func headerMatches(m *routev3.HeaderMatcher, req Request) (bool, error) {
	if err := onlyFields(m, "name", "present_match", "string_match"); err != nil {
		return false, err
	}
	v, present := req.header(m.GetName())
	switch spec := m.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		return present == spec.PresentMatch, nil
	case *routev3.HeaderMatcher_StringMatch:
		if !present {
			return false, nil
		}
		return stringMatches(spec.StringMatch, v)
	default:
		return false, fmt.Errorf("envoy: header matcher %T is not modelled", spec)
	}
}

// stringMatches applies a StringMatcher as Envoy does: a regex must match
// the whole value.
func stringMatches(m *matcherv3.StringMatcher, v string) (bool, error) {
	fold := m.GetIgnoreCase()
	if fold {
		v = strings.ToLower(v)
	}
	low := func(s string) string {
		if fold {
			return strings.ToLower(s)
		}
		return s
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return v == low(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(v, low(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(v, low(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(v, low(p.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		if fold {
			return false, fmt.Errorf("envoy: ignore_case with safe_regex is not modelled")
		}
		re, err := regexp.Compile(`^(?:` + p.SafeRegex.GetRegex() + `)$`)
		if err != nil {
			return false, fmt.Errorf("envoy: regex %q: %w", p.SafeRegex.GetRegex(), err)
		}
		return re.MatchString(v), nil
	default:
		return false, fmt.Errorf("envoy: string matcher %T is not modelled", p)
	}
}
