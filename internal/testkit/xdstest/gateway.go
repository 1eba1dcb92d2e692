package xdstest

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// This file builds what Envoy Gateway's translator (its
// internal/xds/translator/ratelimit.go) builds from the global rate limit
// rules of BackendTrafficPolicies: the RateLimitConfig resources its xDS
// server sends the rate limit service, and the rate limits it puts on each
// route for Envoy, from which envoymodel computes the requests Envoy sends.

// Rule is one rule of a BackendTrafficPolicy's global rate limit, as Envoy
// Gateway's translator reads it (an ir.RateLimitRule): the requests its
// client selectors select (a rule without any selects every request of its
// route), its limit, what a request and its response cost, and whether it
// is shared or in shadow mode.
type Rule struct {
	Headers []HeaderMatch
	// Methods selects requests by any of these methods: each is a rate
	// limit of its own on the route, and all send one descriptor.
	Methods []MethodMatch
	Path    *PathMatch
	// CIDR selects clients by source address, "" for none; with
	// CIDRDistinct each address has its own limit, else they share one;
	// CIDRInvert selects the addresses outside it.
	CIDR                     string
	CIDRDistinct, CIDRInvert bool
	QueryParams              []QueryMatch
	Requests                 uint32
	Unit                     rlsconfv3.RateLimitUnit
	// LimitFromMetadata lets a request's dynamic metadata override the
	// limit (limit.fromMetadata).
	LimitFromMetadata *MetadataKey
	// RequestCost and ResponseCost are cost.request and cost.response: the
	// hits a request takes on the way in, and those its response takes
	// when the stream is done. nil is Envoy's default: one hit on the way
	// in, nothing at the end.
	RequestCost, ResponseCost *Cost
	Shadow                    bool
	// Shared is the rule's name, "<namespace>/<policy>/rule/<i>", when it
	// is shared (shared: true): its domain is then the policy's,
	// "<namespace>/<policy>", and every route the policy applies to counts
	// against one limit. Empty: the rule is its route's own, in the
	// listener's domain.
	Shared string
}

// HeaderMatch selects requests by a header: with Distinct, every value of
// the header has its own limit; else the value Value (a regular expression
// with Regex) is selected, or every other one with Invert.
type HeaderMatch struct {
	Name, Value             string
	Distinct, Regex, Invert bool
}

// MethodMatch selects requests by method, or every other method with
// Invert.
type MethodMatch struct {
	Method string
	Invert bool
}

// PathMatchType is how a PathMatch compares paths, as the Gateway API's
// path matches do.
type PathMatchType int

// The types of PathMatch. PathPrefix is the zero value, as the API's
// default.
const (
	PathPrefix PathMatchType = iota
	PathExact
	PathRegex
)

// PathMatch selects requests by path, or every other path with Invert.
type PathMatch struct {
	Type   PathMatchType
	Value  string
	Invert bool
}

// QueryMatch selects requests by a query parameter, as HeaderMatch does by
// a header.
type QueryMatch struct {
	Name, Value             string
	Distinct, Regex, Invert bool
}

// Cost is a rule's cost of a request or of a response: a number of hits,
// or the number in the stream's dynamic metadata at Metadata.
type Cost struct {
	Number   *uint64
	Metadata *MetadataKey
}

// MetadataKey is a key of the stream's dynamic metadata.
type MetadataKey struct{ Namespace, Key string }

// Route is a route of a listener with the rules that apply to it: Name is
// Envoy Gateway's name of the route, such as
// "httproute/default/backend/rule/0/match/0/*".
type Route struct {
	Name  string
	Rules []Rule
}

// HTTPRequest is what the rate limit actions of a rule look at.
type HTTPRequest struct {
	// Method is the request's method; "" is GET.
	Method string
	// Path is the request's path with its query; "" is "/".
	Path string
	// Headers are the request's headers, by lower-case name.
	Headers  map[string]string
	ClientIP string
	// Metadata is the stream's dynamic metadata by namespace, as other
	// filters set it: what costs and limits from metadata read. For the
	// requests of a stream that is done, it holds what was set while the
	// response went through too.
	Metadata map[string]map[string]any
}

// Config returns the RateLimitConfig Envoy Gateway serves for one listener
// whose one route carries rules, none of them shared, as its translator
// builds it: the domain and name are the listener's, the top descriptor is
// the route (key and value its name), and under it each rule is a chain of
// descriptors, one per match, with the limit on the last.
func Config(listener, route string, rules ...Rule) *rlsconfv3.RateLimitConfig {
	for _, c := range Configs(listener, Route{Name: route, Rules: rules}) {
		if c.GetDomain() == listener {
			return c
		}
	}
	return nil
}

// Configs returns the RateLimitConfig resources Envoy Gateway serves for a
// listener and its routes (BuildRateLimitServiceConfig): one per domain,
// the listener's for the routes' own rules and one per policy with shared
// rules, in the order of their domains. Each route's own rules hang under
// a descriptor of the route; each shared rule under one of its name, once
// however many routes it applies to.
func Configs(listener string, routes ...Route) []*rlsconfv3.RateLimitConfig {
	byDomain := map[string][]*rlsconfv3.RateLimitDescriptor{}
	for _, route := range routes {
		for i, r := range route.Rules {
			domain, top := listener, route.Name
			if r.Shared != "" {
				domain, top = sharedDomain(r.Shared), r.Shared
			}
			var parent *rlsconfv3.RateLimitDescriptor
			for _, d := range byDomain[domain] {
				if d.GetKey() == top {
					parent = d
					break
				}
			}
			if parent == nil {
				parent = &rlsconfv3.RateLimitDescriptor{Key: top, Value: top}
				byDomain[domain] = append(byDomain[domain], parent)
			}
			chain := ruleDescriptors(r, domainIndex(route.Rules, i))
			if !slices.ContainsFunc(parent.Descriptors, func(d *rlsconfv3.RateLimitDescriptor) bool { return sameChain(d, chain) }) {
				parent.Descriptors = append(parent.Descriptors, chain)
			}
		}
	}
	var out []*rlsconfv3.RateLimitConfig
	for _, domain := range sortedKeys(byDomain) {
		out = append(out, &rlsconfv3.RateLimitConfig{Name: domain, Domain: domain, Descriptors: byDomain[domain]})
	}
	return out
}

// ruleDescriptors returns the chain of descriptors of rule r, the i-th of
// its domain on its route (buildRateLimitServiceDescriptors): one for each
// header match, the methods, the path, the CIDR (and each address of it
// when distinct), each query parameter match, or one for every request
// when there is no match; the limit is on the last.
func ruleDescriptors(r Rule, i int) *rlsconfv3.RateLimitDescriptor {
	var head, cur *rlsconfv3.RateLimitDescriptor
	link := func(key, value string) {
		d := &rlsconfv3.RateLimitDescriptor{Key: key, Value: value, ShadowMode: r.Shadow}
		if cur == nil {
			head = d
		} else {
			cur.Descriptors = []*rlsconfv3.RateLimitDescriptor{d}
		}
		cur = d
	}
	keyed := func(key string, distinct bool) {
		if distinct {
			link(key, "")
		} else {
			link(key, key)
		}
	}
	for m, h := range r.Headers {
		keyed(matchKey(i, m), h.Distinct)
	}
	if len(r.Methods) > 0 {
		keyed(methodKey(i), false)
	}
	if r.Path != nil {
		keyed(pathKey(i), false)
	}
	if r.CIDR != "" {
		link(maskedRemoteAddress, cidrValue(r))
		if r.CIDRDistinct {
			link(remoteAddress, "")
		}
	}
	for m, q := range r.QueryParams {
		keyed(matchKey(i, len(r.Headers)+m), q.Distinct)
	}
	if !r.matches() {
		keyed(matchKey(i, -1), false)
	}
	cur.RateLimit = &rlsconfv3.RateLimitPolicy{RequestsPerUnit: r.Requests, Unit: r.Unit}
	return head
}

// RouteRateLimits returns the rate limits Envoy Gateway puts on a route of
// the listener (buildRouteRateLimits), by domain: each in the per-filter
// configuration of that domain's rate limit filter. A rule is one rate
// limit per method it selects (one without methods, one): its actions
// send the route (or, shared, the rule's name), then an entry per match,
// as its descriptors in the RateLimitConfig; with the limit override and
// the request cost. A response cost adds a second one with the same
// actions, applied when the stream is done.
func RouteRateLimits(listener string, route Route) map[string][]*routev3.RateLimit {
	out := map[string][]*routev3.RateLimit{}
	for i, r := range route.Rules {
		domain, top := listener, route.Name
		if r.Shared != "" {
			domain, top = sharedDomain(r.Shared), r.Shared
		}
		idx := domainIndex(route.Rules, i)
		methods := r.Methods
		if len(methods) == 0 {
			methods = []MethodMatch{{}}
		}
		for _, method := range methods {
			actions := []*routev3.RateLimit_Action{genericKey(top, top)}
			for m, h := range r.Headers {
				if h.Distinct {
					actions = append(actions, &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{
						RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: h.Name, DescriptorKey: matchKey(idx, m)},
					}})
					continue
				}
				actions = append(actions, headerValueMatch(matchKey(idx, m), h.Name, stringMatcher(h.Value, h.Regex), h.Invert))
			}
			if method.Method != "" {
				actions = append(actions, headerValueMatch(methodKey(idx), ":method", stringMatcher(method.Method, false), method.Invert))
			}
			if p := r.Path; p != nil {
				actions = append(actions, headerValueMatch(pathKey(idx), ":path", pathMatcher(*p), p.Invert))
			}
			if r.CIDR != "" {
				actions = append(actions, remoteAddressMatch(maskedRemoteAddress, cidrValue(r), r.CIDR, r.CIDRInvert))
				if r.CIDRDistinct {
					actions = append(actions, remoteAddressMatch(remoteAddress, "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%", r.CIDR, r.CIDRInvert))
				}
			}
			for m, q := range r.QueryParams {
				actions = append(actions, queryAction(matchKey(idx, len(r.Headers)+m), q))
			}
			if !r.matches() {
				actions = append(actions, genericKey(matchKey(idx, -1), matchKey(idx, -1)))
			}
			rl := &routev3.RateLimit{Actions: actions}
			if md := r.LimitFromMetadata; md != nil {
				rl.Limit = &routev3.RateLimit_Override{OverrideSpecifier: &routev3.RateLimit_Override_DynamicMetadata_{
					DynamicMetadata: &routev3.RateLimit_Override_DynamicMetadata{MetadataKey: &metadatav3.MetadataKey{
						Key:  md.Namespace,
						Path: []*metadatav3.MetadataKey_PathSegment{{Segment: &metadatav3.MetadataKey_PathSegment_Key{Key: md.Key}}},
					}},
				}}
			}
			rl.HitsAddend = r.RequestCost.hitsAddend()
			out[domain] = append(out[domain], rl)
			if r.ResponseCost != nil {
				out[domain] = append(out[domain], &routev3.RateLimit{
					Actions: actions, ApplyOnStreamDone: true, HitsAddend: r.ResponseCost.hitsAddend(), Limit: rl.Limit,
				})
			}
		}
	}
	return out
}

// Requests returns the requests Envoy sends the rate limit service for req
// on a route of the listener, as Envoy Gateway configures it: one per rate
// limit filter, in their order (by domain), whose rate limits on the route
// make descriptors for req. It fails t when the rate limits are not valid
// Envoy configuration, or not what envoymodel follows.
func Requests(t testing.TB, listener string, route Route, req HTTPRequest) []*rlsv3.RateLimitRequest {
	t.Helper()
	return requests(t, listener, route, req, false)
}

// StreamDoneRequests returns the requests Envoy sends, as Requests does,
// when the stream of req is done: those of the rate limits of response
// costs.
func StreamDoneRequests(t testing.TB, listener string, route Route, req HTTPRequest) []*rlsv3.RateLimitRequest {
	t.Helper()
	return requests(t, listener, route, req, true)
}

func requests(t testing.TB, listener string, route Route, req HTTPRequest, onStreamDone bool) []*rlsv3.RateLimitRequest {
	t.Helper()
	byDomain := RouteRateLimits(listener, route)
	var out []*rlsv3.RateLimitRequest
	for _, domain := range sortedKeys(byDomain) {
		perRoute := &ratelimitfilterv3.RateLimitPerRoute{Domain: domain, RateLimits: byDomain[domain]}
		if err := envoymodel.Validate(perRoute); err != nil {
			t.Fatalf("xdstest: the rate limits of %s: %v", domain, err)
		}
		ds, err := envoymodel.PerRouteDescriptors(perRoute.GetRateLimits(), req.envoy(t), onStreamDone)
		if err != nil {
			t.Fatalf("xdstest: the rate limits of %s: %v", domain, err)
		}
		if len(ds) > 0 {
			out = append(out, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
		}
	}
	return out
}

// Descriptors returns the descriptors Envoy sends in the listener's domain
// for req on route, whose rules are not shared: one descriptor per rule
// whose every action produces an entry (a header that is present, or has
// the value matched; a client address inside the CIDR; …).
func Descriptors(t testing.TB, route string, rules []Rule, req HTTPRequest) []*ratelimitv3.RateLimitDescriptor {
	t.Helper()
	const listener = "listener"
	for _, r := range Requests(t, listener, Route{Name: route, Rules: rules}, req) {
		if r.GetDomain() == listener {
			return r.GetDescriptors()
		}
	}
	return nil
}

// envoy returns req as envoymodel sees it.
func (r HTTPRequest) envoy(t testing.TB) envoymodel.Request {
	t.Helper()
	out := envoymodel.Request{Method: r.Method, Path: r.Path, Headers: r.Headers}
	if ip, err := netip.ParseAddr(r.ClientIP); err == nil {
		out.RemoteAddress = ip
	}
	for ns, fields := range r.Metadata {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			t.Fatalf("xdstest: metadata %s: %v", ns, err)
		}
		if out.DynamicMetadata == nil {
			out.DynamicMetadata = map[string]*structpb.Struct{}
		}
		out.DynamicMetadata[ns] = s
	}
	return out
}

// matches reports whether the rule has any client selector
// (IsMatchSet).
func (r Rule) matches() bool {
	return len(r.Headers) > 0 || len(r.Methods) > 0 || r.Path != nil || r.CIDR != "" || len(r.QueryParams) > 0
}

// domainIndex returns the index of the i-th of rules among the rules of
// its domain on the route (getDomainRuleIndex): shared rules and the
// route's own are counted apart.
func domainIndex(rules []Rule, i int) int {
	n := 0
	for _, r := range rules[:i] {
		if (r.Shared != "") == (rules[i].Shared != "") {
			n++
		}
	}
	return n
}

// sharedDomain is the domain of a shared rule: its name without
// "/rule/<i>" (stripRuleIndexSuffix).
func sharedDomain(name string) string {
	if i := strings.LastIndex(name, "/rule/"); i != -1 {
		return name[:i]
	}
	return strings.Replace(name, "/", "-", 1)
}

// sameChain reports whether two descriptors have the same keys and values
// all the way down (descriptorsEqual): a shared rule added by a second
// route is not added again.
func sameChain(a, b *rlsconfv3.RateLimitDescriptor) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.GetKey() != b.GetKey() || a.GetValue() != b.GetValue() || len(a.GetDescriptors()) != len(b.GetDescriptors()) {
		return false
	}
	for i := range a.GetDescriptors() {
		if !sameChain(a.GetDescriptors()[i], b.GetDescriptors()[i]) {
			return false
		}
	}
	return true
}

// Envoy Gateway's descriptor keys and values.
const (
	maskedRemoteAddress = "masked_remote_address"
	remoteAddress       = "remote_address"
)

// matchKey is the descriptor key of a rule's match m (-1: the rule matches
// everything).
func matchKey(rule, m int) string {
	return "rule-" + strconv.Itoa(rule) + "-match-" + strconv.Itoa(m)
}

func methodKey(rule int) string { return "rule-" + strconv.Itoa(rule) + "-method" }

func pathKey(rule int) string { return "rule-" + strconv.Itoa(rule) + "-path" }

// cidrValue is the value of a rule's masked_remote_address: its CIDR,
// "invert:" before it when inverted.
func cidrValue(r Rule) string {
	if r.CIDRInvert {
		return "invert:" + r.CIDR
	}
	return r.CIDR
}

func genericKey(key, value string) *routev3.RateLimit_Action {
	return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{
		GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorKey: key, DescriptorValue: value},
	}}
}

// headerValueMatch sends key=key when the header matches, or when it does
// not with invert.
func headerValueMatch(key, header string, m *matcherv3.StringMatcher, invert bool) *routev3.RateLimit_Action {
	return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{
		HeaderValueMatch: &routev3.RateLimit_Action_HeaderValueMatch{
			DescriptorKey:   key,
			DescriptorValue: key,
			ExpectMatch:     wrapperspb.Bool(!invert),
			Headers: []*routev3.HeaderMatcher{{
				Name:                 header,
				HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: m},
			}},
		},
	}}
}

func stringMatcher(value string, regex bool) *matcherv3.StringMatcher {
	if regex {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: value}}}
	}
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: value}}
}

// pathMatcher matches :path as Envoy Gateway translates a path match: a
// prefix other than "/" becomes a regular expression that matches whole
// segments, as route matching does.
func pathMatcher(p PathMatch) *matcherv3.StringMatcher {
	switch {
	case p.Type == PathExact:
		return stringMatcher(p.Value, false)
	case p.Type == PathRegex:
		return stringMatcher(p.Value, true)
	case p.Value == "/":
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p.Value}}
	}
	prefix := regexp.QuoteMeta(strings.TrimSuffix(p.Value, "/"))
	return stringMatcher("^"+prefix+`(/.*|\?.*|#.*|;.*|$)`, true)
}

// remoteAddressMatch sends key=value when the client's address is inside
// cidr, or outside it with invert.
func remoteAddressMatch(key, value, cidr string, invert bool) *routev3.RateLimit_Action {
	prefix := netip.MustParsePrefix(cidr)
	return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddressMatch_{
		RemoteAddressMatch: &routev3.RateLimit_Action_RemoteAddressMatch{
			DescriptorKey:   key,
			DescriptorValue: value,
			AddressMatcher: &matcherv3.AddressMatcher{
				Ranges:      []*xdscorev3.CidrRange{{AddressPrefix: prefix.Masked().Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(prefix.Bits()))}},
				InvertMatch: invert,
			},
		},
	}}
}

// queryAction sends the parameter's value for a distinct match, else
// key=key when the parameter matches (or does not, with Invert).
func queryAction(key string, q QueryMatch) *routev3.RateLimit_Action {
	if q.Distinct {
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_QueryParameters_{
			QueryParameters: &routev3.RateLimit_Action_QueryParameters{QueryParameterName: q.Name, DescriptorKey: key},
		}}
	}
	return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_QueryParameterValueMatch_{
		QueryParameterValueMatch: &routev3.RateLimit_Action_QueryParameterValueMatch{
			DescriptorKey:   key,
			DescriptorValue: key,
			ExpectMatch:     wrapperspb.Bool(!q.Invert),
			QueryParameters: []*routev3.QueryParameterMatcher{{
				Name:                         q.Name,
				QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: stringMatcher(q.Value, q.Regex)},
			}},
		},
	}}
}

// hitsAddend is the hits_addend of a cost: its number, or its metadata as
// a %DYNAMIC_METADATA(namespace:key)% format; nil for no cost.
func (c *Cost) hitsAddend() *routev3.RateLimit_HitsAddend {
	if c == nil {
		return nil
	}
	h := &routev3.RateLimit_HitsAddend{}
	if c.Number != nil {
		h.Number = wrapperspb.UInt64(*c.Number)
	}
	if c.Metadata != nil {
		h.Format = "%DYNAMIC_METADATA(" + c.Metadata.Namespace + ":" + c.Metadata.Key + ")%"
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
