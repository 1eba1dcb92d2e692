package envoymodel

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
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
	// DynamicMetadata is the stream's dynamic metadata by filter namespace,
	// as other filters set it: what a hits_addend format and a limit
	// override read. At stream done it holds what was set while the
	// response went through too.
	DynamicMetadata map[string]*structpb.Struct
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

// Describe returns each descriptor's entries as "key=value,key=value", in
// the order of ds: how the tests write down what Envoy sends. It leaves out
// hits_addend and limit overrides.
func Describe(ds []*ratelimitv3.RateLimitDescriptor) []string {
	out := []string{}
	for _, d := range ds {
		parts := make([]string, 0, len(d.GetEntries()))
		for _, e := range d.GetEntries() {
			parts = append(parts, e.GetKey()+"="+e.GetValue())
		}
		out = append(out, strings.Join(parts, ","))
	}
	return out
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
		d, err := descriptor(rl.GetActions(), req)
		if err != nil {
			return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// PerRouteDescriptors returns the descriptors Envoy's rate limit filter
// sends for req from the rate_limits of a route's RateLimitPerRoute (its
// typed_per_filter_config), which is how Envoy Gateway configures routes:
// with onStreamDone false, those of the request path, from the entries
// without apply_on_stream_done; with it true, those sent when the stream
// is done, from the entries with it. An entry sends one descriptor unless
// one of its actions produces nothing for req, and the descriptor carries
// the entry's hits_addend (a number, or a %DYNAMIC_METADATA(namespace:key)%
// format, whose value must be a number from 0 to 1e9, or a string of one,
// else the descriptor is not sent) and its limit override from dynamic
// metadata (a struct of requests_per_unit, a number, and unit, the name of
// a unit; else no override). It returns an error for settings the model
// does not follow, stage and disable_key among them, which Envoy refuses
// there. It is safe for concurrent use.
func PerRouteDescriptors(limits []*routev3.RateLimit, req Request, onStreamDone bool) ([]*ratelimitv3.RateLimitDescriptor, error) {
	var out []*ratelimitv3.RateLimitDescriptor
	for i, rl := range limits {
		if err := onlyFields(rl, "actions", "hits_addend", "limit", "apply_on_stream_done", "x_ratelimit_option"); err != nil {
			return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
		}
		if rl.GetApplyOnStreamDone() != onStreamDone {
			continue
		}
		d, err := descriptor(rl.GetActions(), req)
		if err != nil {
			return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
		}
		if d == nil {
			continue
		}
		if h := rl.GetHitsAddend(); h != nil {
			n, ok, err := hitsAddend(h, req)
			if err != nil {
				return nil, fmt.Errorf("rate_limits[%d].hits_addend: %w", i, err)
			}
			if !ok {
				continue
			}
			d.HitsAddend = wrapperspb.UInt64(n)
			d.IsNegativeHits = h.GetIsNegativeHits()
		}
		if o := rl.GetLimit(); o != nil {
			limit, err := limitOverride(o, req)
			if err != nil {
				return nil, fmt.Errorf("rate_limits[%d].limit: %w", i, err)
			}
			d.Limit = limit
		}
		out = append(out, d)
	}
	return out, nil
}

// descriptor returns the descriptor actions make for req, nil when one of
// them produces nothing or none produces an entry.
func descriptor(actions []*routev3.RateLimit_Action, req Request) (*ratelimitv3.RateLimitDescriptor, error) {
	d := &ratelimitv3.RateLimitDescriptor{}
	for j, a := range actions {
		entry, ok, err := actionEntry(a, req)
		if err != nil {
			return nil, fmt.Errorf("actions[%d]: %w", j, err)
		}
		if !ok {
			return nil, nil
		}
		if entry != nil {
			d.Entries = append(d.Entries, entry)
		}
	}
	if len(d.Entries) == 0 {
		return nil, nil
	}
	return d, nil
}

// maxHitsAddend is the largest hits_addend Envoy sends.
const maxHitsAddend = 1_000_000_000

// hitsAddend returns the hits an entry's hits_addend gives for req; ok is
// false when its format yields no valid number, which drops the
// descriptor.
func hitsAddend(h *routev3.RateLimit_HitsAddend, req Request) (n uint64, ok bool, err error) {
	if err := onlyFields(h, "number", "format", "is_negative_hits"); err != nil {
		return 0, false, err
	}
	if h.GetFormat() == "" {
		if h.GetNumber() == nil {
			return 0, false, fmt.Errorf("envoy: hits_addend needs a number or a format")
		}
		return h.GetNumber().GetValue(), true, nil
	}
	m := dynamicMetadataFormat.FindStringSubmatch(h.GetFormat())
	if m == nil {
		return 0, false, fmt.Errorf("envoy: hits_addend format %q is not modelled (only %%DYNAMIC_METADATA(namespace:key)%%)", h.GetFormat())
	}
	v := req.metadata(m[1], strings.Split(m[2], ":"))
	var f float64
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		f = k.NumberValue
	case *structpb.Value_StringValue:
		if f, err = strconv.ParseFloat(k.StringValue, 64); err != nil {
			return 0, false, nil
		}
	default:
		return 0, false, nil
	}
	if math.IsNaN(f) || f < 0 || f > maxHitsAddend {
		return 0, false, nil
	}
	return uint64(f), true, nil
}

// dynamicMetadataFormat is the one substitution format the model reads.
var dynamicMetadataFormat = regexp.MustCompile(`^%DYNAMIC_METADATA\(([^:()]+):([^()]+)\)%$`)

// limitOverride returns the limit override o gives for req, nil when the
// metadata holds none.
func limitOverride(o *routev3.RateLimit_Override, req Request) (*ratelimitv3.RateLimitDescriptor_RateLimitOverride, error) {
	md := o.GetDynamicMetadata()
	if md == nil {
		return nil, fmt.Errorf("envoy: limit override %T is not modelled", o.GetOverrideSpecifier())
	}
	var path []string
	for _, seg := range md.GetMetadataKey().GetPath() {
		path = append(path, seg.GetKey())
	}
	fields := req.metadata(md.GetMetadataKey().GetKey(), path).GetStructValue().GetFields()
	rpu, unit := fields["requests_per_unit"], fields["unit"]
	if _, ok := rpu.GetKind().(*structpb.Value_NumberValue); !ok {
		return nil, nil
	}
	u, ok := typev3.RateLimitUnit_value[unit.GetStringValue()]
	if _, isString := unit.GetKind().(*structpb.Value_StringValue); !ok || !isString {
		return nil, nil
	}
	return &ratelimitv3.RateLimitDescriptor_RateLimitOverride{
		RequestsPerUnit: uint32(rpu.GetNumberValue()),
		Unit:            typev3.RateLimitUnit(u),
	}, nil
}

// metadata returns the value of the dynamic metadata of namespace at path,
// nil when there is none.
func (r Request) metadata(namespace string, path []string) *structpb.Value {
	s := r.DynamicMetadata[namespace]
	if s == nil || len(path) == 0 {
		return nil
	}
	v := structpb.NewStructValue(s)
	for _, key := range path {
		v = v.GetStructValue().GetFields()[key]
		if v == nil {
			return nil
		}
	}
	return v
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
	case *routev3.RateLimit_Action_QueryParameters_:
		q := act.QueryParameters
		v, present := req.queryParam(q.GetQueryParameterName())
		switch {
		case present:
			return e(q.GetDescriptorKey(), v)
		case q.GetSkipIfAbsent():
			return nil, true, nil
		default:
			return nil, false, nil
		}
	case *routev3.RateLimit_Action_QueryParameterValueMatch_:
		m := act.QueryParameterValueMatch
		if err := onlyFields(m, "descriptor_value", "descriptor_key", "expect_match", "query_parameters"); err != nil {
			return nil, false, err
		}
		matched, err := queryParamsMatch(m.GetQueryParameters(), req)
		if err != nil {
			return nil, false, err
		}
		expect := m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()
		if matched != expect {
			return nil, false, nil
		}
		return e(orDefault(m.GetDescriptorKey(), "query_match"), m.GetDescriptorValue())
	case *routev3.RateLimit_Action_RemoteAddressMatch_:
		m := act.RemoteAddressMatch
		if err := onlyFields(m, "descriptor_value", "descriptor_key", "default_value", "address_matcher"); err != nil {
			return nil, false, err
		}
		v, err := remoteAddressValue(m.GetDescriptorValue(), req)
		if err != nil || !req.RemoteAddress.IsValid() {
			return nil, false, err
		}
		matched, err := addressMatches(m.GetAddressMatcher(), req.RemoteAddress.Unmap())
		if err != nil || !matched {
			return nil, false, err
		}
		// The value is never empty (Envoy demands a descriptor_value, and
		// the client's address is never empty), so default_value is unused.
		return e(orDefault(m.GetDescriptorKey(), "remote_address_match"), v)
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

// queryParam returns the first value of the query parameter name in req's
// path, percent-decoded, and whether there is one.
func (r Request) queryParam(name string) (string, bool) {
	_, query, ok := strings.Cut(r.path(), "?")
	if !ok {
		return "", false
	}
	query, _, _ = strings.Cut(query, "#")
	for _, pair := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if k != name {
			continue
		}
		if d, err := url.PathUnescape(v); err == nil {
			v = d
		}
		return v, true
	}
	return "", false
}

// queryParamsMatch reports whether req's query has what every matcher
// asks for.
func queryParamsMatch(ms []*routev3.QueryParameterMatcher, req Request) (bool, error) {
	for _, m := range ms {
		if err := onlyFields(m, "name", "string_match", "present_match"); err != nil {
			return false, err
		}
		v, present := req.queryParam(m.GetName())
		if !present {
			return false, nil
		}
		if sm := m.GetStringMatch(); sm != nil {
			ok, err := stringMatches(sm, v)
			if err != nil || !ok {
				return false, err
			}
		}
	}
	return true, nil
}

// addressMatches applies an AddressMatcher to addr: inside any of its
// ranges, or outside all of them with invert_match.
func addressMatches(m *matcherv3.AddressMatcher, addr netip.Addr) (bool, error) {
	if err := onlyFields(m, "ranges", "invert_match"); err != nil {
		return false, err
	}
	inside := false
	for _, r := range m.GetRanges() {
		a, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return false, fmt.Errorf("envoy: address_prefix %q: %w", r.GetAddressPrefix(), err)
		}
		bits := a.BitLen()
		if r.GetPrefixLen() != nil {
			bits = int(r.GetPrefixLen().GetValue())
		}
		prefix, err := a.Unmap().Prefix(bits)
		if err != nil {
			return false, fmt.Errorf("envoy: %s/%d: %w", r.GetAddressPrefix(), bits, err)
		}
		if prefix.Contains(addr) {
			inside = true
		}
	}
	return inside != m.GetInvertMatch(), nil
}

// remoteAddressValue evaluates a remote_address_match's descriptor value:
// literal text, or %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%, the client's
// address.
func remoteAddressValue(format string, req Request) (string, error) {
	const clientAddress = "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"
	v := strings.ReplaceAll(format, clientAddress, req.RemoteAddress.Unmap().String())
	if strings.Contains(v, "%") {
		return "", fmt.Errorf("envoy: descriptor_value %q: only %s is modelled", format, clientAddress)
	}
	return v, nil
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
