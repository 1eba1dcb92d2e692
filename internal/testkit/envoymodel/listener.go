package envoymodel

import (
	"fmt"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Names of the filters this package looks for.
const (
	HTTPConnectionManagerFilter = "envoy.filters.network.http_connection_manager"
	RateLimitFilter             = "envoy.filters.http.ratelimit"
	RouterFilter                = "envoy.filters.http.router"
)

// HTTPListener is one HTTP connection manager of a static listener: its
// routes and, when it has one, its rate limit filter.
type HTTPListener struct {
	// Name is the listener's name, Port its port.
	Name string
	Port uint32
	// Manager is the listener's HTTP connection manager.
	Manager *hcmv3.HttpConnectionManager
	// Routes is the manager's inline route configuration.
	Routes *routev3.RouteConfiguration
	// RateLimit is the configuration of the manager's rate limit filter,
	// nil when it has none.
	RateLimit *ratelimitfilterv3.RateLimit
}

// HTTPListeners returns the HTTP connection managers of b's static
// listeners, in order. Managers whose routes come from RDS are an error: the
// model needs the routes inline. It is safe for concurrent use.
func HTTPListeners(b *bootstrapv3.Bootstrap) ([]HTTPListener, error) {
	var out []HTTPListener
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				if f.GetName() != HTTPConnectionManagerFilter {
					continue
				}
				hcm := &hcmv3.HttpConnectionManager{}
				if err := f.GetTypedConfig().UnmarshalTo(hcm); err != nil {
					return nil, fmt.Errorf("envoy: listener %s: %w", l.GetName(), err)
				}
				hl := HTTPListener{
					Name:    l.GetName(),
					Port:    l.GetAddress().GetSocketAddress().GetPortValue(),
					Manager: hcm,
					Routes:  hcm.GetRouteConfig(),
				}
				if hl.Routes == nil {
					return nil, fmt.Errorf("envoy: listener %s: routes are not inline (route_config)", l.GetName())
				}
				for _, hf := range hcm.GetHttpFilters() {
					if hf.GetName() != RateLimitFilter {
						continue
					}
					hl.RateLimit = &ratelimitfilterv3.RateLimit{}
					if err := hf.GetTypedConfig().UnmarshalTo(hl.RateLimit); err != nil {
						return nil, fmt.Errorf("envoy: listener %s: %s: %w", l.GetName(), RateLimitFilter, err)
					}
				}
				out = append(out, hl)
			}
		}
	}
	return out, nil
}

// RateLimitRequest returns the request the listener's rate limit filter
// sends to the rate limit service for req, or nil when it sends none (no
// rate limit filter, no matching route, or no descriptor). With Envoy's
// defaults, a route's own rate_limits replace its virtual host's, unless
// the route sets include_vh_rate_limits. It is safe for concurrent use.
func (l HTTPListener) RateLimitRequest(req Request) (*rlsv3.RateLimitRequest, error) {
	if l.RateLimit == nil {
		return nil, nil
	}
	if err := onlyFields(l.RateLimit, "domain", "stage", "request_type", "timeout", "failure_mode_deny",
		"rate_limited_as_resource_exhausted", "rate_limit_service", "enable_x_ratelimit_headers",
		"disable_x_envoy_ratelimited_header", "rate_limited_status", "response_headers_to_add",
		"status_on_error", "stat_prefix"); err != nil {
		return nil, err
	}
	vh := l.virtualHost(req)
	if vh == nil {
		return nil, nil
	}
	route, err := matchRoute(vh.GetRoutes(), req)
	if err != nil || route == nil {
		return nil, err
	}
	if len(route.GetTypedPerFilterConfig()) > 0 || len(vh.GetTypedPerFilterConfig()) > 0 {
		return nil, fmt.Errorf("envoy: typed_per_filter_config is not modelled")
	}
	action := route.GetRoute()
	if action == nil {
		// Redirects and direct responses have no route entry, and the
		// filter does not call the service for them.
		return nil, nil
	}
	limits := action.GetRateLimits()
	//lint:ignore SA1019 Envoy still honours include_vh_rate_limits, so the model does too.
	if len(limits) == 0 || action.GetIncludeVhRateLimits().GetValue() {
		limits = append(limits[:len(limits):len(limits)], vh.GetRateLimits()...)
	}
	if req.DestinationCluster == "" {
		req.DestinationCluster = action.GetCluster()
	}
	ds, err := Descriptors(limits, l.RateLimit.GetStage(), req)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return &rlsv3.RateLimitRequest{Domain: l.RateLimit.GetDomain(), Descriptors: ds}, nil
}

// virtualHost picks the virtual host for req's authority as Envoy does:
// an exact domain, then the longest "*.suffix" or "prefix.*" wildcard,
// then "*".
func (l HTTPListener) virtualHost(req Request) *routev3.VirtualHost {
	host := strings.ToLower(req.Authority)
	var best *routev3.VirtualHost
	bestLen := -1
	for _, vh := range l.Routes.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			n := -1
			switch {
			case d == host:
				return vh
			case d == "*":
				n = 0
			case strings.HasPrefix(d, "*") && strings.HasSuffix(host, d[1:]) && len(host) > len(d)-1:
				n = len(d)
			case strings.HasSuffix(d, "*") && strings.HasPrefix(host, d[:len(d)-1]) && len(host) > len(d)-1:
				n = len(d)
			}
			if n > bestLen {
				best, bestLen = vh, n
			}
		}
	}
	return best
}

// matchRoute returns the first route that matches req, or nil.
func matchRoute(routes []*routev3.Route, req Request) (*routev3.Route, error) {
	path, _, _ := strings.Cut(req.path(), "?")
	for i, r := range routes {
		m := r.GetMatch()
		if err := onlyFields(m, "prefix", "path", "case_sensitive", "headers"); err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		p := path
		fold := m.GetCaseSensitive() != nil && !m.GetCaseSensitive().GetValue()
		if fold {
			p = strings.ToLower(p)
		}
		var ok bool
		switch spec := m.GetPathSpecifier().(type) {
		case *routev3.RouteMatch_Prefix:
			ok = strings.HasPrefix(p, lowerIf(fold, spec.Prefix))
		case *routev3.RouteMatch_Path:
			ok = p == lowerIf(fold, spec.Path)
		}
		if !ok {
			continue
		}
		ok, err := headersMatch(m.GetHeaders(), req)
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		if ok {
			return r, nil
		}
	}
	return nil, nil
}

func lowerIf(fold bool, s string) string {
	if fold {
		return strings.ToLower(s)
	}
	return s
}
