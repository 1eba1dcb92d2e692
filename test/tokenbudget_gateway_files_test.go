package test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// The parts of the APIs that envoy/gateway/ai-gateway-route.yaml and
// token-budget-policy.yaml use, with their JSON names, from the Go types of
// Envoy AI Gateway v1.1.0 (api/v1beta1: AIGatewayRoute, AIGatewayRouteRule,
// AIGatewayRouteRuleBackendRef, AIGatewayRouteRuleMatch, LLMRequestCost,
// AIServiceBackend, VersionedAPISchema), Envoy Gateway v1.9.0
// (api/v1alpha1: BackendTrafficPolicy, PolicyTargetReferences,
// RateLimitSpec, GlobalRateLimit, RateLimitRule, RateLimitSelectCondition,
// HeaderMatch, RateLimitValue, RateLimitCost, RateLimitCostSpecifier,
// RateLimitCostMetadata, EnvoyProxy, Backend, FQDNEndpoint) and the Gateway
// API v1.5.1 that AI Gateway builds on (GatewayClass, Gateway, Listener,
// GatewayInfrastructure, LocalParametersReference, ParentReference,
// BackendObjectReference, HTTPHeaderMatch,
// LocalPolicyTargetReferenceWithSectionName). Decoding rejects any field
// not listed, so a misspelt or misplaced field fails.
type (
	k8sObjectMeta struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	}
	k8sTypeMeta struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
	}
	// objectRef is a Gateway API reference: ParentReference,
	// BackendObjectReference, LocalParametersReference,
	// LocalPolicyTargetReferenceWithSectionName, as far as they are used.
	objectRef struct {
		Group string `yaml:"group"`
		Kind  string `yaml:"kind"`
		Name  string `yaml:"name"`
	}

	gatewayClass struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			ControllerName string `yaml:"controllerName"`
		} `yaml:"spec"`
	}
	gateway struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			GatewayClassName string `yaml:"gatewayClassName"`
			Infrastructure   struct {
				ParametersRef objectRef `yaml:"parametersRef"`
			} `yaml:"infrastructure"`
			Listeners []struct {
				Name     string `yaml:"name"`
				Protocol string `yaml:"protocol"`
				Port     int32  `yaml:"port"`
			} `yaml:"listeners"`
		} `yaml:"spec"`
	}
	envoyProxy struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			Provider struct {
				Type       string `yaml:"type"`
				Kubernetes struct {
					EnvoyService struct {
						Name string `yaml:"name"`
					} `yaml:"envoyService"`
				} `yaml:"kubernetes"`
			} `yaml:"provider"`
		} `yaml:"spec"`
	}
	aiGatewayRoute struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			ParentRefs []objectRef `yaml:"parentRefs"`
			Rules      []struct {
				Matches []struct {
					Headers []struct {
						Type  string `yaml:"type"`
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"headers"`
				} `yaml:"matches"`
				BackendRefs []struct {
					Name string `yaml:"name"`
				} `yaml:"backendRefs"`
			} `yaml:"rules"`
			LLMRequestCosts []struct {
				MetadataKey string  `yaml:"metadataKey"`
				Type        string  `yaml:"type"`
				CEL         *string `yaml:"cel"`
			} `yaml:"llmRequestCosts"`
		} `yaml:"spec"`
	}
	aiServiceBackend struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			Schema struct {
				Name string `yaml:"name"`
			} `yaml:"schema"`
			BackendRef objectRef `yaml:"backendRef"`
		} `yaml:"spec"`
	}
	egBackend struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			Endpoints []struct {
				FQDN struct {
					Hostname string `yaml:"hostname"`
					Port     int32  `yaml:"port"`
				} `yaml:"fqdn"`
			} `yaml:"endpoints"`
		} `yaml:"spec"`
	}

	backendTrafficPolicy struct {
		k8sTypeMeta `yaml:",inline"`
		Metadata    k8sObjectMeta `yaml:"metadata"`
		Spec        struct {
			TargetRefs []objectRef `yaml:"targetRefs"`
			RateLimit  struct {
				Type   string `yaml:"type"`
				Global struct {
					Rules []rateLimitRule `yaml:"rules"`
				} `yaml:"global"`
			} `yaml:"rateLimit"`
		} `yaml:"spec"`
	}
	rateLimitRule struct {
		ClientSelectors []struct {
			Headers []struct {
				Type  *string `yaml:"type"`
				Name  string  `yaml:"name"`
				Value *string `yaml:"value"`
			} `yaml:"headers"`
		} `yaml:"clientSelectors"`
		Limit struct {
			Requests uint32 `yaml:"requests"`
			Unit     string `yaml:"unit"`
		} `yaml:"limit"`
		Cost *struct {
			Request  *rateLimitCost `yaml:"request"`
			Response *rateLimitCost `yaml:"response"`
		} `yaml:"cost"`
		Shared *bool `yaml:"shared"`
	}
	rateLimitCost struct {
		From     string  `yaml:"from"`
		Number   *uint64 `yaml:"number"`
		Metadata *struct {
			Namespace string `yaml:"namespace"`
			Key       string `yaml:"key"`
		} `yaml:"metadata"`
	}
)

// The enumerations of those APIs (their kubebuilder validation) that the
// files use.
var (
	rateLimitUnits     = []string{"Second", "Minute", "Hour", "Day", "Week", "Month", "Year"}
	headerMatchTypes   = []string{"Exact", "RegularExpression", "Distinct"}
	rateLimitCostFroms = []string{"Number", "Metadata"}
	llmRequestCostType = []string{"OutputToken", "InputToken", "CachedInputToken", "CacheCreationInputToken", "TotalToken", "ReasoningToken", "CEL"}
	apiSchemas         = []string{"OpenAI", "Cohere", "AWSBedrock", "AzureOpenAI", "GCPVertexAI", "GCPAnthropic", "Anthropic", "AWSAnthropic"}
)

// aiGatewayMetadata is the namespace of the dynamic metadata Envoy AI
// Gateway writes the costs of llmRequestCosts to
// (AIGatewayFilterMetadataNamespace).
const aiGatewayMetadata = "io.envoy.ai_gateway"

// llmGatewayService is the name the walkthrough's EnvoyProxy gives the
// Gateway's Envoy Service, which docs/token-budgets-gateway.md reaches.
const llmGatewayService = "llm-gateway"

// manifest is one document of a file of Kubernetes resources.
type manifest struct {
	k8sTypeMeta
	Name string
	data []byte
}

// readManifests returns the documents of the file at path.
func readManifests(t *testing.T, path string) []manifest {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []manifest
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, path)
		var head struct {
			k8sTypeMeta `yaml:",inline"`
			Metadata    struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		require.NoError(t, node.Decode(&head), path)
		doc, err := yaml.Marshal(&node)
		require.NoError(t, err)
		out = append(out, manifest{k8sTypeMeta: head.k8sTypeMeta, Name: head.Metadata.Name, data: doc})
	}
}

// decode decodes the document into v, refusing fields v does not have.
func (m manifest) decode(t *testing.T, v any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(m.data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), "%s %s", m.Kind, m.Name)
}

// only decodes into v the one document of ms of the kind and API version,
// failing when there is not exactly one.
func only(t *testing.T, ms []manifest, apiVersion, kind string, v any) {
	t.Helper()
	var found []manifest
	for _, m := range ms {
		if m.Kind == kind {
			found = append(found, m)
		}
	}
	require.Len(t, found, 1, "one %s", kind)
	assert.Equal(t, apiVersion, found[0].APIVersion, kind)
	found[0].decode(t, v)
}

// aiGatewayFiles are the resources of envoy/gateway/ai-gateway-route.yaml.
type aiGatewayFiles struct {
	class   gatewayClass
	proxy   envoyProxy
	gateway gateway
	route   aiGatewayRoute
	backend aiServiceBackend
	target  egBackend
}

// readAIGatewayRoute decodes envoy/gateway/ai-gateway-route.yaml.
func readAIGatewayRoute(t *testing.T) aiGatewayFiles {
	t.Helper()
	ms := readManifests(t, envoyFile("gateway/ai-gateway-route.yaml"))
	require.Len(t, ms, 6)
	var f aiGatewayFiles
	only(t, ms, "gateway.networking.k8s.io/v1", "GatewayClass", &f.class)
	only(t, ms, "gateway.envoyproxy.io/v1alpha1", "EnvoyProxy", &f.proxy)
	only(t, ms, "gateway.networking.k8s.io/v1", "Gateway", &f.gateway)
	only(t, ms, "aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute", &f.route)
	only(t, ms, "aigateway.envoyproxy.io/v1beta1", "AIServiceBackend", &f.backend)
	only(t, ms, "gateway.envoyproxy.io/v1alpha1", "Backend", &f.target)
	return f
}

// readTokenBudgetPolicy decodes envoy/gateway/token-budget-policy.yaml.
func readTokenBudgetPolicy(t *testing.T) backendTrafficPolicy {
	t.Helper()
	ms := readManifests(t, envoyFile("gateway/token-budget-policy.yaml"))
	var p backendTrafficPolicy
	only(t, ms, "gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy", &p)
	require.Len(t, ms, 1)
	return p
}

// TestTokenBudgetGatewayRoute checks envoy/gateway/ai-gateway-route.yaml
// against Envoy AI Gateway's, Envoy Gateway's and the Gateway API's types
// and validation, and that its resources name each other: the Gateway its
// class (Envoy Gateway's controller, as envoy-gateway.yaml names it) and its
// EnvoyProxy, the AIGatewayRoute the Gateway and its AIServiceBackend, the
// AIServiceBackend the Backend; and that the route's llmRequestCosts write
// the total tokens to the metadata key the policy charges.
func TestTokenBudgetGatewayRoute(t *testing.T) {
	f := readAIGatewayRoute(t)
	ns := f.gateway.Metadata.Namespace
	require.NotEmpty(t, ns)

	assert.Equal(t, envoyGatewayConfig(t).Gateway.ControllerName, f.class.Spec.ControllerName)
	assert.Equal(t, f.class.Metadata.Name, f.gateway.Spec.GatewayClassName)
	assert.Equal(t, objectRef{Group: "gateway.envoyproxy.io", Kind: "EnvoyProxy", Name: f.proxy.Metadata.Name}, f.gateway.Spec.Infrastructure.ParametersRef)
	require.Len(t, f.gateway.Spec.Listeners, 1)
	assert.Equal(t, "HTTP", f.gateway.Spec.Listeners[0].Protocol)
	assert.Equal(t, "Kubernetes", f.proxy.Spec.Provider.Type)
	assert.Equal(t, llmGatewayService, f.proxy.Spec.Provider.Kubernetes.EnvoyService.Name)

	r := f.route
	for _, m := range []k8sObjectMeta{f.proxy.Metadata, r.Metadata, f.backend.Metadata, f.target.Metadata} {
		assert.Equal(t, ns, m.Namespace, "%s: all in the Gateway's namespace", m.Name)
	}
	assert.Equal(t, []objectRef{{Group: "gateway.networking.k8s.io", Kind: "Gateway", Name: f.gateway.Metadata.Name}}, r.Spec.ParentRefs,
		"only a Gateway may be a parent")
	require.NotEmpty(t, r.Spec.Rules)
	assert.LessOrEqual(t, len(r.Spec.Rules), 15)
	for _, rule := range r.Spec.Rules {
		for _, m := range rule.Matches {
			for _, h := range m.Headers {
				assert.Contains(t, []string{"Exact", "RegularExpression"}, h.Type)
			}
		}
		for _, b := range rule.BackendRefs {
			assert.Equal(t, f.backend.Metadata.Name, b.Name, "an AIServiceBackend of the file")
		}
	}
	totals := 0
	for _, c := range r.Spec.LLMRequestCosts {
		assert.Contains(t, llmRequestCostType, c.Type)
		assert.Equal(t, c.Type == "CEL", c.CEL != nil, "cel goes with type CEL")
		if c.Type == "TotalToken" {
			totals++
			assert.Equal(t, chargedMetadata(t, readTokenBudgetPolicy(t)), c.MetadataKey, "the key the policy charges")
		}
	}
	assert.Equal(t, 1, totals, "one cost writes the total tokens")

	assert.Contains(t, apiSchemas, f.backend.Spec.Schema.Name)
	assert.Equal(t, "OpenAI", f.backend.Spec.Schema.Name, "the upstream speaks OpenAI's API, with the usage of each response")
	assert.Equal(t, objectRef{Group: "gateway.envoyproxy.io", Kind: "Backend", Name: f.target.Metadata.Name}, f.backend.Spec.BackendRef)
	require.Len(t, f.target.Spec.Endpoints, 1)
	assert.NotEmpty(t, f.target.Spec.Endpoints[0].FQDN.Hostname)
	assert.Positive(t, f.target.Spec.Endpoints[0].FQDN.Port)
}

// chargedMetadata returns the metadata key of the one rule's response cost,
// in AI Gateway's namespace.
func chargedMetadata(t *testing.T, p backendTrafficPolicy) string {
	t.Helper()
	rules := p.Spec.RateLimit.Global.Rules
	require.Len(t, rules, 1)
	require.True(t, rules[0].Cost != nil && rules[0].Cost.Response != nil && rules[0].Cost.Response.Metadata != nil, "a response cost from metadata")
	md := rules[0].Cost.Response.Metadata
	assert.Equal(t, aiGatewayMetadata, md.Namespace)
	return md.Key
}

// TestTokenBudgetGatewayPolicy checks envoy/gateway/token-budget-policy.yaml
// against Envoy Gateway's types and validation, and what Envoy Gateway
// builds from it: a policy on the HTTPRoute AI Gateway makes of the
// AIGatewayRoute (named after it), whose one shared rule is a budget a
// month per x-api-key, checked with no hits on the request path and charged
// with the total tokens of the response. Its RateLimitConfig loads as a
// charging fixed window of a calendar month, and Envoy sends the descriptor the
// file's comments name, in the policy's domain.
func TestTokenBudgetGatewayPolicy(t *testing.T) {
	p := readTokenBudgetPolicy(t)
	f := readAIGatewayRoute(t)
	assert.Equal(t, f.route.Metadata.Namespace, p.Metadata.Namespace)
	assert.Equal(t, []objectRef{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: f.route.Metadata.Name}}, p.Spec.TargetRefs,
		"the HTTPRoute AI Gateway makes of the AIGatewayRoute")
	assert.Equal(t, "Global", p.Spec.RateLimit.Type)

	rules := p.Spec.RateLimit.Global.Rules
	require.Len(t, rules, 1)
	r := rules[0]
	require.Len(t, r.ClientSelectors, 1)
	require.Len(t, r.ClientSelectors[0].Headers, 1)
	h := r.ClientSelectors[0].Headers[0]
	require.NotNil(t, h.Type)
	assert.Contains(t, headerMatchTypes, *h.Type)
	assert.Equal(t, "Distinct", *h.Type, "a budget per value of the header")
	assert.Equal(t, "x-api-key", h.Name)
	assert.Nil(t, h.Value, "a distinct match has no value")
	assert.Contains(t, rateLimitUnits, r.Limit.Unit)
	assert.Equal(t, "Month", r.Limit.Unit)
	assert.EqualValues(t, 5_000_000, r.Limit.Requests)
	require.NotNil(t, r.Cost)
	for _, c := range []*rateLimitCost{r.Cost.Request, r.Cost.Response} {
		require.NotNil(t, c)
		assert.Contains(t, rateLimitCostFroms, c.From)
		assert.False(t, c.Number != nil && c.Metadata != nil, "only one of number or metadata")
	}
	require.True(t, r.Cost.Request.From == "Number" && r.Cost.Request.Number != nil)
	assert.Zero(t, *r.Cost.Request.Number, "the request path checks and takes nothing")
	assert.Equal(t, "Metadata", r.Cost.Response.From)
	assert.Equal(t, "llm_total_token", chargedMetadata(t, p))
	require.NotNil(t, r.Shared)
	assert.True(t, *r.Shared, "one budget per key across the route's rules")

	// What Envoy Gateway builds: the rate limit service's configuration
	// loads as a fixed window of a calendar month (RLS_XDS_CALENDAR) that
	// charges, and Envoy sends the
	// check and the charge with the descriptor the comments name.
	route := tokenBudgetRoute(t)
	cs := xdstest.Configs(gatewayListener, route)
	require.Len(t, cs, 1)
	assert.Equal(t, "default/token-budget", cs[0].GetDomain())
	c, err := config.FromRateLimitConfigs(cs, deploymentXDSOptions(t))
	require.NoError(t, err)
	rule := budgetRule(t, c, "k1")
	require.Len(t, rule.Limits, 1)
	l := rule.Limits[0]
	assert.Equal(t, algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5_000_000, Window: 30 * 24 * time.Hour, Calendar: true}, l.Limit)
	assert.Equal(t, config.Month, l.Unit)
	assert.True(t, rule.Charge && !rule.Debt, "charge: window, as every limit over xDS")

	req := xdstest.HTTPRequest{Headers: map[string]string{"x-api-key": "k1"},
		Metadata: map[string]map[string]any{aiGatewayMetadata: {"llm_total_token": 31}}}
	check := xdstest.Requests(t, gatewayListener, route, req)
	charge := xdstest.StreamDoneRequests(t, gatewayListener, route, req)
	require.Len(t, check, 1)
	require.Len(t, charge, 1)
	const top = "default/token-budget/rule/0"
	for _, r := range []*rlsv3.RateLimitRequest{check[0], charge[0]} {
		assert.Equal(t, "default/token-budget", r.GetDomain())
		require.Len(t, r.GetDescriptors(), 1)
		var entries []rate.Entry
		for _, e := range r.GetDescriptors()[0].GetEntries() {
			entries = append(entries, rate.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		assert.Equal(t, []rate.Entry{{Key: top, Value: top}, {Key: "rule-0-match-0", Value: "k1"}}, entries)
	}
	assert.EqualValues(t, 0, check[0].GetDescriptors()[0].GetHitsAddend().GetValue())
	assert.EqualValues(t, 31, charge[0].GetDescriptors()[0].GetHitsAddend().GetValue())
	assert.Empty(t, xdstest.Requests(t, gatewayListener, route, xdstest.HTTPRequest{}), "no x-api-key: nothing checked")
}

// The names Envoy Gateway gives the walkthrough's listener and the route AI
// Gateway's HTTPRoute makes (irListenerName, irRouteName).
const (
	gatewayListener  = "default/llm/http"
	gatewayRouteName = "httproute/default/llm/rule/0/match/0/*"
)

// tokenBudgetRoute returns the route of the walkthrough with the rules of
// token-budget-policy.yaml, as Envoy Gateway's translator reads them
// (buildRateLimitRule, irRuleName): headers by their match type, the limit
// with its unit as the RateLimitConfig enum, the costs, and a shared rule
// named <namespace>/<policy>/rule/<index>.
func tokenBudgetRoute(t *testing.T) xdstest.Route {
	t.Helper()
	p := readTokenBudgetPolicy(t)
	route := xdstest.Route{Name: gatewayRouteName}
	for i, r := range p.Spec.RateLimit.Global.Rules {
		unit, ok := rlsconfv3.RateLimitUnit_value[strings.ToUpper(r.Limit.Unit)]
		require.True(t, ok, r.Limit.Unit)
		rule := xdstest.Rule{Requests: r.Limit.Requests, Unit: rlsconfv3.RateLimitUnit(unit)}
		for _, s := range r.ClientSelectors {
			for _, h := range s.Headers {
				require.NotNil(t, h.Type)
				switch *h.Type {
				case "Distinct":
					rule.Headers = append(rule.Headers, xdstest.HeaderMatch{Name: h.Name, Distinct: true})
				case "Exact":
					require.NotNil(t, h.Value)
					rule.Headers = append(rule.Headers, xdstest.HeaderMatch{Name: h.Name, Value: *h.Value})
				default:
					t.Fatalf("header match %s: not one the walkthrough uses", *h.Type)
				}
			}
		}
		if r.Cost != nil {
			rule.RequestCost, rule.ResponseCost = xdsCost(r.Cost.Request), xdsCost(r.Cost.Response)
		}
		if r.Shared != nil && *r.Shared {
			rule.Shared = p.Metadata.Namespace + "/" + p.Metadata.Name + "/rule/" + strconv.Itoa(i)
		}
		route.Rules = append(route.Rules, rule)
	}
	return route
}

// xdsCost is a cost as xdstest takes it.
func xdsCost(c *rateLimitCost) *xdstest.Cost {
	switch {
	case c == nil:
		return nil
	case c.Metadata != nil:
		return &xdstest.Cost{Metadata: &xdstest.MetadataKey{Namespace: c.Metadata.Namespace, Key: c.Metadata.Key}}
	}
	return &xdstest.Cost{Number: c.Number}
}

// deploymentXDSOptions returns the options the server loads limits from
// xDS with, as the Deployment of envoy-gateway.yaml runs it: Envoy
// Gateway's environment with container.env merged in (internal/server's
// newXDSClient).
func deploymentXDSOptions(t *testing.T) config.Options {
	t.Helper()
	env := withContainerEnv(envoyGatewayDeployment(func(p string) string { return p }, "envoy-gateway:18001", "redis:6379", ":19001", false), envoyGatewayConfig(t))
	s, err := settings.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	return s.XDSConfigOptions()
}

// budgetRule returns the rule of c that the policy's descriptor for the API
// key matches.
func budgetRule(t *testing.T, c *config.Config, key string) *config.Rule {
	t.Helper()
	const top = "default/token-budget/rule/0"
	m, ok := c.Match("default/token-budget", []rate.Entry{{Key: top, Value: top}, {Key: "rule-0-match-0", Value: key}})
	require.True(t, ok, "the descriptor of key %s matches a rule", key)
	return m.Rule
}

// TestTokenBudgetGatewayDocQuotesValues: the values that
// docs/token-budgets-gateway.md shows are those of envoy/gateway/values.yaml.
func TestTokenBudgetGatewayDocQuotesValues(t *testing.T) {
	var v egValues
	decodeStrict(t, envoyFile("gateway/values.yaml"), &v)
	quoted := 0
	for _, b := range readMarkdown(t, "docs/token-budgets-gateway.md").Blocks {
		if b.Lang != "yaml" {
			continue
		}
		var shown egValues
		dec := yaml.NewDecoder(strings.NewReader(b.Text))
		dec.KnownFields(true)
		require.NoError(t, dec.Decode(&shown), "%s", b)
		assert.Equal(t, v.Config.EnvoyGateway.Provider.Kubernetes, shown.Config.EnvoyGateway.Provider.Kubernetes, "%s", b)
		quoted++
	}
	assert.Equal(t, 1, quoted)
}
