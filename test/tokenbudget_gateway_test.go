package test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// llmGateway runs what docs/token-budgets-gateway.md sets up, as processes:
// the Redis of envoy/gateway/redis.yaml, the replicas of ratewarden as the
// Deployment of envoy-gateway.yaml runs them (Envoy Gateway's environment
// and certificates, container.env merged in), an xDS server serving them,
// over mutual TLS, what Envoy Gateway builds of token-budget-policy.yaml,
// and, on an HTTP port, a stand-in for the Gateway's Envoy with Envoy AI
// Gateway's filter in front of an OpenAI-compatible upstream.
//
// The stand-in does for each chat completion what those do:
//
//   - AI Gateway reads the model from the body into x-ai-eg-model, and the
//     route of ai-gateway-route.yaml takes the request when that matches
//     (404 otherwise);
//   - Envoy's rate limit filter sends the requests Envoy Gateway's rate
//     limits make for it (xdstest.RouteRateLimits, envoymodel): a check,
//     answered 429 when over the budget; a failed call lets the request
//     through, as Envoy Gateway's failClosed: false (its default) has it;
//   - the upstream answers with a usage: prompt_tokens the words of the
//     messages, completion_tokens the request's max_tokens, or the words
//     of its reply;
//   - AI Gateway writes the llmRequestCosts of the route to the dynamic
//     metadata, and Envoy sends the charge of the stream's end, once,
//     ignoring the answer and any error.
//
// Each call goes to the next replica of those the rate limit Service holds
// (replicas), as the Service spreads Envoy's connections over its pods. The
// calls carry a deadline this busy test host can keep, where Envoy's is
// Envoy Gateway's 20 ms. The charge is sent before the body is returned,
// where Envoy sends it as the stream ends, so that what the client does
// next sees it.
type llmGateway struct {
	redis *redistest.Server
	URL   string
	// model is the one the route takes, and costs its llmRequestCosts.
	model string
	costs map[string]string // metadata key → cost type
	// limits are the route's rate limits by domain, as Envoy Gateway puts
	// them in each rate limit filter's per-route configuration.
	limits map[string][]*routev3.RateLimit
	start  func() *serverProcess

	mu       sync.Mutex
	replicas []*serverProcess
	next     atomic.Uint64
	// failed counts the calls to the rate limit service that failed:
	// checks let through and charges lost.
	failed atomic.Int64
}

// startLLMGateway starts the walkthrough with n replicas of ratewarden,
// ready with the policy's limits.
func startLLMGateway(t *testing.T, n int) *llmGateway {
	t.Helper()
	certs := redistest.NewCerts(t)
	root := t.TempDir()
	mount := func(path string) string { return filepath.Join(root, filepath.FromSlash(path)) }
	copyFile(t, certs.PeerCertFile, mount("/certs/tls.crt"))
	copyFile(t, certs.PeerKeyFile, mount("/certs/tls.key"))
	copyFile(t, certs.CAFile, mount("/certs/ca.crt"))

	redis := startGatewayRedis(t, readGatewayRedis(t))
	xdsTLS, caPool := xdstest.MutualTLS(t, certs)
	xs := xdstest.Start(t, xdsTLS)
	route := tokenBudgetRoute(t)
	xs.Set("envoy-ratelimit", "1", xdstest.Configs(gatewayListener, route)...)
	xdsServer := strings.Replace(xs.Addr(), "127.0.0.1", "localhost", 1) // the name its certificate carries
	env := withContainerEnv(envoyGatewayDeployment(mount, xdsServer, redis.Addr(), "127.0.0.1:0", false), envoyGatewayConfig(t))
	envoyTLS := credentials.NewTLS(&tls.Config{RootCAs: caPool, MinVersion: tls.VersionTLS12})

	f := readAIGatewayRoute(t)
	rules := f.route.Spec.Rules
	require.Len(t, rules, 1)
	require.Len(t, rules[0].Matches, 1)
	require.Len(t, rules[0].Matches[0].Headers, 1)
	match := rules[0].Matches[0].Headers[0]
	require.Equal(t, "x-ai-eg-model", match.Name)
	g := &llmGateway{redis: redis, model: match.Value, costs: map[string]string{}, limits: xdstest.RouteRateLimits(gatewayListener, route)}
	for _, c := range f.route.Spec.LLMRequestCosts {
		g.costs[c.MetadataKey] = c.Type
	}
	g.start = func() *serverProcess {
		t.Helper()
		p := startServerWith(t, "", env, envoyTLS)
		require.Eventually(t, func() bool { return p.Serving(context.Background()) }, 30*time.Second, 20*time.Millisecond,
			"ready with Envoy Gateway's limits\n%s", p.Output())
		return p
	}
	for range n {
		g.replicas = append(g.replicas, g.start())
	}
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	g.URL = front.URL
	return g
}

// endpoints returns the replicas the rate limit Service sends calls to.
func (g *llmGateway) endpoints() []*serverProcess {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.replicas)
}

// remove takes a replica out of the Service, as Kubernetes does when its
// pod stops.
func (g *llmGateway) remove(p *serverProcess) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.replicas = slices.DeleteFunc(g.replicas, func(r *serverProcess) bool { return r == p })
}

// call sends one request of the rate limit filter to the next replica.
func (g *llmGateway) call(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	eps := g.endpoints()
	if len(eps) == 0 {
		return nil, fmt.Errorf("the rate limit Service has no endpoints")
	}
	p := eps[int(g.next.Add(1)-1)%len(eps)]
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return p.Client.ShouldRateLimit(ctx, req)
}

// rateLimitRequests returns what Envoy's rate limit filters send for req,
// on the request path or at the stream's end: one request per domain whose
// rate limits make descriptors for it.
func (g *llmGateway) rateLimitRequests(req envoymodel.Request, onStreamDone bool) ([]*rlsv3.RateLimitRequest, error) {
	var out []*rlsv3.RateLimitRequest
	for _, domain := range sortedMapKeys(g.limits) {
		ds, err := envoymodel.PerRouteDescriptors(g.limits[domain], req, onStreamDone)
		if err != nil {
			return nil, err
		}
		if len(ds) > 0 {
			out = append(out, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
		}
	}
	return out, nil
}

// chatRequest is the part of an OpenAI chat completion request the stand-in
// reads.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens uint64 `json:"max_tokens"`
}

// chatUsage is the usage of an OpenAI chat completion.
type chatUsage struct {
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
	TotalTokens      uint64 `json:"total_tokens"`
}

// llmReply is what the upstream answers.
const llmReply = "Hello! How can I help you today?"

func (g *llmGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, "a chat completion is a POST of JSON", http.StatusBadRequest)
		return
	}
	if r.URL.Path != "/v1/chat/completions" || body.Model != g.model {
		http.Error(w, "no matching route", http.StatusNotFound)
		return
	}
	req := envoymodel.Request{Method: r.Method, Path: r.URL.RequestURI(), Headers: map[string]string{"x-ai-eg-model": body.Model}}
	for name := range r.Header {
		req.Headers[strings.ToLower(name)] = r.Header.Get(name)
	}
	checks, err := g.rateLimitRequests(req, false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, c := range checks {
		resp, err := g.call(r.Context(), c)
		if err != nil {
			g.failed.Add(1) // failClosed: false lets the request through
			continue
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.Header().Set("x-envoy-ratelimited", "true")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}

	var usage chatUsage
	for _, m := range body.Messages {
		usage.PromptTokens += uint64(len(strings.Fields(m.Content)))
	}
	usage.CompletionTokens = body.MaxTokens
	if usage.CompletionTokens == 0 {
		usage.CompletionTokens = uint64(len(strings.Fields(llmReply)))
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens

	costs := map[string]any{}
	for key, kind := range g.costs {
		switch kind {
		case "InputToken":
			costs[key] = usage.PromptTokens
		case "OutputToken":
			costs[key] = usage.CompletionTokens
		case "TotalToken":
			costs[key] = usage.TotalTokens
		}
	}
	md, err := structpb.NewStruct(costs)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.DynamicMetadata = map[string]*structpb.Struct{aiGatewayMetadata: md}
	charges, err := g.rateLimitRequests(req, true)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, c := range charges {
		if _, err := g.call(context.Background(), c); err != nil {
			g.failed.Add(1) // Envoy sends a charge once
		}
	}

	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": body.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": llmReply}}},
		"usage": usage,
	})
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// complete sends a chat completion of the API key through the gateway and
// returns its status and, when it is answered, its usage.
func (g *llmGateway) complete(t *testing.T, key string, maxTokens uint64) (int, chatUsage) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say hello"}],"max_tokens":%d}`, g.model, maxTokens)
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("x-api-key", key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Usage chatUsage `json:"usage"`
	}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out.Usage
}

// remaining asks replica p, as Envoy asks before a request (0 hits), how
// much of the key's budget is left.
func (g *llmGateway) remaining(t *testing.T, p *serverProcess, key string) (rlsv3.RateLimitResponse_Code, uint32) {
	t.Helper()
	reqs, err := g.rateLimitRequests(envoymodel.Request{Method: http.MethodPost, Path: "/v1/chat/completions",
		Headers: map[string]string{"x-api-key": key, "x-ai-eg-model": g.model}}, false)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := p.Client.ShouldRateLimit(ctx, reqs[0])
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), 1)
	return resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining()
}

// TestTokenBudgetGatewayReplicas holds the walkthrough's outage table to
// three replicas run as the Deployment runs them, behind the stand-in for
// the Gateway's Envoy and AI Gateway:
//
//   - every replica counts the one budget of a key in Redis, whichever
//     replica took its charges, and a key past its budget is answered 429
//     while another key is served;
//   - a replica that stops takes nothing with it: the others serve, and see
//     the budget as it was; a charge sent to it is lost, and not sent again;
//   - a replica being replaced answers for RLS_SHUTDOWN_DELAY after SIGTERM,
//     so a charge sent to it then is recorded;
//   - while Redis is down the request goes through unchecked (Envoy
//     Gateway's failClosed: false), and its charge waits in the replica's
//     queue and is recorded once Redis is back within RLS_GIVE_BACK_TIMEOUT,
//     unless it may have run already;
//   - a Redis killed and restarted keeps the budgets, from its log.
func TestTokenBudgetGatewayReplicas(t *testing.T) {
	g := startLLMGateway(t, 3)
	ctx := context.Background()
	const budget = 5_000_000
	spent := map[string]uint64{}
	complete := func(key string, maxTokens uint64) int {
		t.Helper()
		status, usage := g.complete(t, key, maxTokens)
		spent[key] += usage.TotalTokens
		return status
	}
	// remainingOnAll checks that every replica in the Service sees the
	// key's budget as spent says.
	remainingOnAll := func(key, msg string) {
		t.Helper()
		for i, p := range g.endpoints() {
			code, left := g.remaining(t, p, key)
			assert.Equal(t, rlsv3.RateLimitResponse_OK, code, "%s: replica %d", msg, i)
			assert.EqualValues(t, budget-spent[key], left, "%s: replica %d", msg, i)
		}
	}

	// One budget per key, whichever replica takes each call.
	for range 4 {
		require.Equal(t, http.StatusOK, complete("k1", 0))
	}
	assert.EqualValues(t, 36, spent["k1"], "2 words asked and 7 answered, four times")
	remainingOnAll("k1", "after four responses")
	require.Equal(t, http.StatusOK, complete("k1", budget-spent["k1"]-10))
	require.Equal(t, http.StatusOK, complete("k1", 100), "8 tokens left: admitted")
	for i, p := range g.endpoints() {
		code, left := g.remaining(t, p, "k1")
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, code, "replica %d: the last response took the key past its budget", i)
		assert.Zero(t, left)
	}
	assert.Equal(t, http.StatusTooManyRequests, complete("k1", 0), "until the month ends")
	assert.Equal(t, http.StatusOK, complete("k2", 0), "another key has its own budget")

	// A replica stops: a charge sent to it fails, and is not sent again;
	// the Service drops it, and the others serve.
	dead := g.endpoints()[1]
	dead.Kill()
	<-dead.Exited()
	_, err := dead.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{})
	assert.Error(t, err)
	g.remove(dead)
	failed := g.failed.Load()
	for range 3 {
		require.Equal(t, http.StatusOK, complete("k3", 0))
	}
	assert.Equal(t, failed, g.failed.Load(), "no call failed once the Service dropped it")
	remainingOnAll("k3", "two replicas")

	// A replica being replaced answers through RLS_SHUTDOWN_DELAY.
	leaving := g.endpoints()[0]
	leaving.Signal(syscall.SIGTERM)
	time.Sleep(500 * time.Millisecond)
	status, usage := g.completeVia(t, leaving, "k3")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, failed, g.failed.Load(), "the check and the charge were answered")
	spent["k3"] += usage.TotalTokens
	g.remove(leaving)
	replacement := g.start()
	g.mu.Lock()
	g.replicas = append(g.replicas, replacement)
	g.mu.Unlock()
	remainingOnAll("k3", "a charge sent in the shutdown delay")

	// Redis down: the request goes through unchecked, and its charge waits
	// for Redis on the replica that took it.
	g.redis.Stop()
	for _, p := range g.endpoints() {
		require.Eventually(t, func() bool { return !p.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "gRPC health follows Redis")
	}
	eps := g.endpoints()
	taker := eps[int(g.next.Load()+1)%len(eps)] // the check goes to the next replica, the charge to the one after
	status, usage = g.complete(t, "k3", 0)
	assert.Equal(t, http.StatusOK, status, "failClosed: false")
	require.NoError(t, g.redis.Start())
	var deferred map[string]float64
	require.Eventually(t, func() bool {
		deferred = scrapeMetrics(t, taker)
		return deferredFate(deferred, "recorded")+deferredFate(deferred, "dropped")+deferredFate(deferred, "uncertain") >= 1
	}, 30*time.Second, 50*time.Millisecond, "the charge of the outage is recorded, dropped or left uncertain")
	t.Logf("the charge of the outage: recorded %d, dropped %d, uncertain %d", deferredFate(deferred, "recorded"), deferredFate(deferred, "dropped"), deferredFate(deferred, "uncertain"))
	assert.Zero(t, deferredFate(deferred, "dropped"), "Redis came back within RLS_GIVE_BACK_TIMEOUT")
	for _, p := range g.endpoints() {
		require.Eventually(t, func() bool { return p.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "ready again with Redis")
	}
	switch {
	case deferredFate(deferred, "recorded") == 1:
		spent["k3"] += usage.TotalTokens
	case deferredFate(deferred, "uncertain") == 1:
		// It may have run before the connection broke.
		if _, left := g.remaining(t, g.endpoints()[0], "k3"); uint64(left) == budget-spent["k3"]-usage.TotalTokens {
			spent["k3"] += usage.TotalTokens
		}
	}
	remainingOnAll("k3", "after the Redis outage")

	// Redis killed and restarted: the budgets come back from its log.
	g.redis.Kill()
	require.NoError(t, g.redis.Start())
	for _, p := range g.endpoints() {
		require.Eventually(t, func() bool { return p.Serving(ctx) }, 10*time.Second, 20*time.Millisecond, "ready again with Redis")
	}
	remainingOnAll("k3", "after Redis was killed and restarted")
	code, _ := g.remaining(t, g.endpoints()[0], "k1")
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, code, "k1's spending too")
}

// completeVia sends a chat completion of the key through the gateway with
// every call of the rate limit filter going to replica p.
func (g *llmGateway) completeVia(t *testing.T, p *serverProcess, key string) (int, chatUsage) {
	t.Helper()
	g.mu.Lock()
	saved := g.replicas
	g.replicas = []*serverProcess{p}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.replicas = saved
		g.mu.Unlock()
	}()
	return g.complete(t, key, 0)
}
