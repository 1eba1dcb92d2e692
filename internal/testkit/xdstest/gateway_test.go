package xdstest

import (
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree writes a RateLimitConfig's descriptors one per line, indented by
// depth: "key=value" and, on the one with a limit, " n/UNIT".
func tree(c *rlsconfv3.RateLimitConfig) string {
	var b strings.Builder
	var walk func(ds []*rlsconfv3.RateLimitDescriptor, depth int)
	walk = func(ds []*rlsconfv3.RateLimitDescriptor, depth int) {
		for _, d := range ds {
			b.WriteString(strings.Repeat("  ", depth) + d.GetKey() + "=" + d.GetValue())
			if p := d.GetRateLimit(); p != nil {
				b.WriteString(" " + strconv.FormatUint(uint64(p.GetRequestsPerUnit()), 10) + "/" + p.GetUnit().String())
			}
			if d.GetShadowMode() {
				b.WriteString(" shadow")
			}
			b.WriteString("\n")
			walk(d.GetDescriptors(), depth+1)
		}
	}
	walk(c.GetDescriptors(), 0)
	return b.String()
}

// entries writes each descriptor's entries as "k=v,k=v", with its
// hits_addend and limit override when it has them.
func entries(ds []*ratelimitv3.RateLimitDescriptor) []string {
	out := []string{}
	for _, d := range ds {
		var parts []string
		for _, e := range d.GetEntries() {
			parts = append(parts, e.GetKey()+"="+e.GetValue())
		}
		s := strings.Join(parts, ",")
		if h := d.GetHitsAddend(); h != nil {
			s += " hits=" + strconv.FormatUint(h.GetValue(), 10)
		}
		if l := d.GetLimit(); l != nil {
			s += " limit=" + strconv.FormatUint(uint64(l.GetRequestsPerUnit()), 10) + "/" + l.GetUnit().String()
		}
		out = append(out, s)
	}
	return out
}

// TestConfigsOfSharedAndOwnRules: shared rules go to their policy's domain
// under their own name, numbered apart from the route's own rules, and
// once however many routes they apply to.
func TestConfigsOfSharedAndOwnRules(t *testing.T) {
	user := func(v string) []HeaderMatch { return []HeaderMatch{{Name: "x-user-id", Value: v}} }
	rules := []Rule{
		{Headers: user("one"), Requests: 5, Unit: rlsconfv3.RateLimitUnit_SECOND, Shared: "ns/p/rule/0"},
		{Headers: user("two"), Requests: 5, Unit: rlsconfv3.RateLimitUnit_SECOND},
		{Headers: user("three"), Requests: 5, Unit: rlsconfv3.RateLimitUnit_SECOND, Shared: "ns/p/rule/2"},
		{Headers: user("four"), Requests: 5, Unit: rlsconfv3.RateLimitUnit_SECOND, Shadow: true},
	}
	cs := Configs("l", Route{Name: "first", Rules: rules}, Route{Name: "second", Rules: rules[:1]})
	require.Len(t, cs, 2)
	assert.Equal(t, "l", cs[0].GetName())
	assert.Equal(t, "l", cs[0].GetDomain())
	assert.Equal(t, `first=first
  rule-0-match-0=rule-0-match-0 5/SECOND
  rule-1-match-0=rule-1-match-0 5/SECOND shadow
`, tree(cs[0]))
	assert.Equal(t, "ns/p", cs[1].GetName())
	assert.Equal(t, "ns/p", cs[1].GetDomain())
	assert.Equal(t, `ns/p/rule/0=ns/p/rule/0
  rule-0-match-0=rule-0-match-0 5/SECOND
ns/p/rule/2=ns/p/rule/2
  rule-1-match-0=rule-1-match-0 5/SECOND
`, tree(cs[1]))

	// Envoy calls once per domain, the listener's filter and the policy's.
	reqs := Requests(t, "l", Route{Name: "first", Rules: rules}, HTTPRequest{Headers: map[string]string{"x-user-id": "one"}})
	require.Len(t, reqs, 1)
	assert.Equal(t, "ns/p", reqs[0].GetDomain())
	assert.Equal(t, []string{"ns/p/rule/0=ns/p/rule/0,rule-0-match-0=rule-0-match-0"}, entries(reqs[0].GetDescriptors()))
	reqs = Requests(t, "l", Route{Name: "first", Rules: rules}, HTTPRequest{Headers: map[string]string{"x-user-id": "four"}})
	require.Len(t, reqs, 1)
	assert.Equal(t, "l", reqs[0].GetDomain())
	assert.Equal(t, []string{"first=first,rule-1-match-0=rule-1-match-0"}, entries(reqs[0].GetDescriptors()))
}

// TestRequestsOfEveryMatch: one rule with a match of every kind, in the
// translator's order, and the descriptors Envoy sends for requests it
// selects and does not.
func TestRequestsOfEveryMatch(t *testing.T) {
	rule := Rule{
		Headers:     []HeaderMatch{{Name: "x-org", Distinct: true}, {Name: "x-plan", Value: "free|trial", Regex: true}, {Name: "x-beta", Value: "yes", Invert: true}},
		Methods:     []MethodMatch{{Method: "GET"}, {Method: "HEAD"}},
		Path:        &PathMatch{Value: "/api/"},
		CIDR:        "10.0.0.0/8",
		CIDRInvert:  true,
		QueryParams: []QueryMatch{{Name: "key", Distinct: true}, {Name: "v", Value: "2"}},
		Requests:    10,
		Unit:        rlsconfv3.RateLimitUnit_MINUTE,
	}
	assert.Equal(t, `r=r
  rule-0-match-0=
    rule-0-match-1=rule-0-match-1
      rule-0-match-2=rule-0-match-2
        rule-0-method=rule-0-method
          rule-0-path=rule-0-path
            masked_remote_address=invert:10.0.0.0/8
              rule-0-match-3=
                rule-0-match-4=rule-0-match-4 10/MINUTE
`, tree(Config("l", "r", rule)))
	selected := HTTPRequest{Method: "HEAD", Path: "/api/items?key=k1&v=2", ClientIP: "192.0.2.1",
		Headers: map[string]string{"x-org": "acme", "x-plan": "trial", "x-beta": "no"}}
	want := "r=r,rule-0-match-0=acme,rule-0-match-1=rule-0-match-1,rule-0-match-2=rule-0-match-2,rule-0-method=rule-0-method," +
		"rule-0-path=rule-0-path,masked_remote_address=invert:10.0.0.0/8,rule-0-match-3=k1,rule-0-match-4=rule-0-match-4"
	assert.Equal(t, []string{want}, entries(Descriptors(t, "r", []Rule{rule}, selected)))

	for name, change := range map[string]func(*HTTPRequest){
		"no x-org":    func(r *HTTPRequest) { r.Headers = map[string]string{"x-plan": "trial"} },
		"x-plan paid": func(r *HTTPRequest) { r.Headers = map[string]string{"x-org": "acme", "x-plan": "paid"} },
		"x-beta yes": func(r *HTTPRequest) {
			r.Headers = map[string]string{"x-org": "acme", "x-plan": "free", "x-beta": "yes"}
		},
		"POST":                func(r *HTTPRequest) { r.Method = "POST" },
		"another path":        func(r *HTTPRequest) { r.Path = "/apis?key=k1&v=2" },
		"inside the CIDR":     func(r *HTTPRequest) { r.ClientIP = "10.9.9.9" },
		"no key":              func(r *HTTPRequest) { r.Path = "/api?v=2" },
		"another version":     func(r *HTTPRequest) { r.Path = "/api?key=k1&v=1" },
		"no client address":   func(r *HTTPRequest) { r.ClientIP = "" },
		"the prefix's parent": func(r *HTTPRequest) { r.Path = "/?key=k1&v=2" },
	} {
		r := selected
		change(&r)
		assert.Empty(t, Descriptors(t, "r", []Rule{rule}, r), name)
	}
	r := selected
	r.Path = "/api?key=k1&v=2"
	assert.Len(t, Descriptors(t, "r", []Rule{rule}, r), 1, "the prefix itself")
}

// TestRequestsOfCosts: a request cost is the hits_addend of the request
// path's descriptor; a response cost sends the same descriptor again when
// the stream is done, with its own hits_addend; a limit from metadata is
// an override on both.
func TestRequestsOfCosts(t *testing.T) {
	zero := uint64(0)
	tokens := &MetadataKey{Namespace: "io.envoy.ai_gateway", Key: "llm_total_token"}
	rule := Rule{
		Headers:           []HeaderMatch{{Name: "x-user-id", Distinct: true}},
		Requests:          1000,
		Unit:              rlsconfv3.RateLimitUnit_HOUR,
		RequestCost:       &Cost{Number: &zero},
		ResponseCost:      &Cost{Metadata: tokens},
		LimitFromMetadata: &MetadataKey{Namespace: "io.limits", Key: "tier"},
	}
	route := Route{Name: "r", Rules: []Rule{rule}}
	req := HTTPRequest{Headers: map[string]string{"x-user-id": "alice"}}
	reqs := Requests(t, "l", route, req)
	require.Len(t, reqs, 1)
	assert.Equal(t, []string{"r=r,rule-0-match-0=alice hits=0"}, entries(reqs[0].GetDescriptors()))

	req.Metadata = map[string]map[string]any{
		"io.envoy.ai_gateway": {"llm_total_token": 250},
		"io.limits":           {"tier": map[string]any{"requests_per_unit": 5000, "unit": "HOUR"}},
	}
	reqs = StreamDoneRequests(t, "l", route, req)
	require.Len(t, reqs, 1)
	assert.Equal(t, "l", reqs[0].GetDomain())
	assert.Equal(t, []string{"r=r,rule-0-match-0=alice hits=250 limit=5000/HOUR"}, entries(reqs[0].GetDescriptors()))
	reqs = Requests(t, "l", route, req)
	require.Len(t, reqs, 1)
	assert.Equal(t, []string{"r=r,rule-0-match-0=alice hits=0 limit=5000/HOUR"}, entries(reqs[0].GetDescriptors()))

	rule.ResponseCost = nil
	assert.Empty(t, StreamDoneRequests(t, "l", Route{Name: "r", Rules: []Rule{rule}}, req), "no response cost: nothing at the end")
}
