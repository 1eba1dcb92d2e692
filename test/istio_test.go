package test

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// manifests are the Kubernetes objects of envoy/istio, by kind and name.
type manifests map[string]map[string]any

func loadManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{}
	for _, file := range []string{"istio/ratewarden.yaml", "istio/envoyfilter.yaml"} {
		for i, doc := range yamlDocuments(t, envoyFile(file)) {
			for _, f := range []string{"apiVersion", "kind"} {
				require.NotEmpty(t, doc[f], "%s document %d: %s", file, i+1, f)
			}
			name, _ := at(t, doc, "metadata", "name").(string)
			require.NotEmpty(t, name, "%s document %d: metadata.name", file, i+1)
			id := fmt.Sprint(doc["kind"], "/", name)
			require.NotContains(t, m, id, "%s: %s twice", file, id)
			m[id] = doc
		}
	}
	return m
}

func (m manifests) get(t *testing.T, id string) map[string]any {
	t.Helper()
	require.Contains(t, m, id)
	return m[id]
}

func TestIstioManifestsParse(t *testing.T) {
	m := loadManifests(t)
	var ids []string
	for id, doc := range m {
		ids = append(ids, id)
		want := map[string]string{
			"ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1",
			"EnvoyFilter": "networking.istio.io/v1alpha3",
		}[doc["kind"].(string)]
		assert.Equal(t, want, doc["apiVersion"], id)
	}
	slices.Sort(ids)
	assert.Equal(t, []string{
		"ConfigMap/ratelimit-config", "Deployment/ratelimit", "Deployment/redis",
		"EnvoyFilter/filter-ratelimit", "EnvoyFilter/filter-ratelimit-svc", "Service/ratelimit", "Service/redis",
	}, ids)
}

// container returns a Deployment's only container.
func container(t *testing.T, deployment map[string]any) map[string]any {
	t.Helper()
	cs := at(t, deployment, "spec", "template", "spec", "containers").([]any)
	require.Len(t, cs, 1)
	return cs[0].(map[string]any)
}

// containerEnv returns a container's environment.
func containerEnv(t *testing.T, c map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	list, _ := c["env"].([]any)
	for _, e := range list {
		e := e.(map[string]any)
		name, _ := e["name"].(string)
		require.NotEmpty(t, name)
		require.NotContains(t, env, name, "%s set twice", name)
		env[name] = fmt.Sprint(e["value"])
	}
	return env
}

// namedPort returns the number of a container port by name.
func namedPort(t *testing.T, c map[string]any, name string) int {
	t.Helper()
	for _, p := range c["ports"].([]any) {
		p := p.(map[string]any)
		if p["name"] == name {
			return p["containerPort"].(int)
		}
	}
	t.Fatalf("container %s has no port %q", c["name"], name)
	return 0
}

// port returns the port number of an address ":8081" or "host:8081".
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	var n int
	_, err = fmt.Sscan(p, &n)
	require.NoError(t, err)
	return n
}

// orDefault returns env[name], or the default the server uses.
func orDefault(env map[string]string, name, def string) string {
	if v, ok := env[name]; ok {
		return v
	}
	return def
}

func TestIstioRatewardenDeployment(t *testing.T) {
	m := loadManifests(t)
	d := m.get(t, "Deployment/ratelimit")
	c := container(t, d)
	env := containerEnv(t, c)
	known, err := knownVariables()
	require.NoError(t, err)
	for name := range env {
		assert.True(t, known[name], "the server does not read %s", name)
	}
	assert.Equal(t, "redis", env["RLS_BACKEND"])

	// The limits: the ConfigMap mounted at RLS_CONFIG_PATH, which is
	// config/edge.yaml and parses.
	var mountedFrom string
	for _, v := range at(t, d, "spec", "template", "spec", "volumes").([]any) {
		for _, mnt := range c["volumeMounts"].([]any) {
			v, mnt := v.(map[string]any), mnt.(map[string]any)
			if v["name"] == mnt["name"] && mnt["mountPath"] == env["RLS_CONFIG_PATH"] {
				mountedFrom = at(t, v, "configMap", "name").(string)
			}
		}
	}
	require.NotEmpty(t, mountedFrom, "a ConfigMap is mounted at RLS_CONFIG_PATH")
	limits := at(t, m.get(t, "ConfigMap/"+mountedFrom), "data", "config.yaml").(string)
	edge, err := os.ReadFile(filepath.Join(repoRoot, "config", "edge.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(edge), limits, "the ConfigMap holds config/edge.yaml")
	cfg, err := config.Parse([]config.File{{Name: "config.yaml", Data: []byte(limits)}}, config.Options{DefaultAlgorithm: algorithms.SlidingWindowCounter})
	require.NoError(t, err)
	assert.True(t, cfg.HasDomain("edge"))

	// Ports and probes.
	httpPort := port(t, orDefault(env, "RLS_HTTP_ADDR", ":8080"))
	grpcPort := port(t, orDefault(env, "RLS_GRPC_ADDR", ":8081"))
	assert.Equal(t, httpPort, namedPort(t, c, "http-port"))
	assert.Equal(t, grpcPort, namedPort(t, c, "grpc-port"))
	assert.Equal(t, "/ready", at(t, c, "readinessProbe", "httpGet", "path"))
	assert.Equal(t, "http-port", at(t, c, "readinessProbe", "httpGet", "port"))
	assert.Equal(t, "/healthcheck", at(t, c, "livenessProbe", "httpGet", "path"))
	assert.Equal(t, "http-port", at(t, c, "livenessProbe", "httpGet", "port"))
	assert.Equal(t, "/healthcheck", at(t, c, "startupProbe", "httpGet", "path"), "time to reach Redis at start")
	assert.Equal(t, "http-port", at(t, c, "startupProbe", "httpGet", "port"))

	// Not root, not privileged, with requests.
	assert.Equal(t, true, at(t, d, "spec", "template", "spec", "securityContext", "runAsNonRoot"))
	assert.NotZero(t, at(t, d, "spec", "template", "spec", "securityContext", "runAsUser"))
	assert.Equal(t, false, at(t, c, "securityContext", "allowPrivilegeEscalation"))
	assert.Equal(t, true, at(t, c, "securityContext", "readOnlyRootFilesystem"))
	assert.NotEmpty(t, at(t, c, "resources", "requests", "cpu"))
	assert.NotEmpty(t, at(t, c, "resources", "requests", "memory"))

	// The Service selects the pods and exposes the ports by the names Istio
	// reads the protocol from.
	svc := m.get(t, "Service/ratelimit")
	labels := at(t, d, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range at(t, svc, "spec", "selector").(map[string]any) {
		assert.Equal(t, v, labels[k], "the Service selects the pods by %s", k)
	}
	ports := map[string]int{}
	for _, p := range at(t, svc, "spec", "ports").([]any) {
		p := p.(map[string]any)
		ports[p["name"].(string)] = p["port"].(int)
		assert.Equal(t, p["name"], p["targetPort"], "the Service targets the container port by name")
	}
	assert.Equal(t, map[string]int{"http-port": httpPort, "grpc-port": grpcPort}, ports)

	// Redis: the address the server is given, and state-only settings.
	redisSvc := m.get(t, "Service/redis")
	host, p, err := net.SplitHostPort(env["RLS_REDIS_ADDRS"])
	require.NoError(t, err)
	assert.Equal(t, "redis", host)
	assert.Equal(t, p, fmt.Sprint(at(t, redisSvc, "spec", "ports", 0, "port")))
	redis := container(t, m.get(t, "Deployment/redis"))
	args := fmt.Sprintf("%q", redis["args"])
	for _, want := range []string{`"--maxmemory-policy" "noeviction"`, `"--save" ""`, `"--appendonly" "no"`} {
		assert.Contains(t, args, want)
	}
	assert.Equal(t, true, at(t, m.get(t, "Deployment/redis"), "spec", "template", "spec", "securityContext", "runAsNonRoot"))
}

// patch returns the one config patch of an EnvoyFilter that applies to
// applyTo.
func patch(t *testing.T, filter map[string]any, applyTo string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, p := range at(t, filter, "spec", "configPatches").([]any) {
		p := p.(map[string]any)
		if p["applyTo"] == applyTo {
			require.Nil(t, found, "one %s patch", applyTo)
			found = p
		}
	}
	require.NotNil(t, found, "a %s patch", applyTo)
	return found
}

func TestIstioEnvoyFilters(t *testing.T) {
	m := loadManifests(t)
	l := frontProxy(t)

	// The HTTP filter: valid Envoy config, before the router, with the
	// settings of envoy.yaml, calling the cluster Istio makes for the
	// Service.
	fp := patch(t, m.get(t, "EnvoyFilter/filter-ratelimit"), "HTTP_FILTER")
	assert.Equal(t, "GATEWAY", at(t, fp, "match", "context"))
	assert.Equal(t, envoymodel.HTTPConnectionManagerFilter, at(t, fp, "match", "listener", "filterChain", "filter", "name"))
	assert.Equal(t, envoymodel.RouterFilter, at(t, fp, "match", "listener", "filterChain", "filter", "subFilter", "name"))
	assert.Equal(t, "INSERT_BEFORE", at(t, fp, "patch", "operation"))
	hf := &hcmv3.HttpFilter{}
	require.NoError(t, envoymodel.FromValue(at(t, fp, "patch", "value"), hf))
	require.NoError(t, envoymodel.Validate(hf))
	assert.Equal(t, envoymodel.RateLimitFilter, hf.GetName())
	rl := &ratelimitfilterv3.RateLimit{}
	require.NoError(t, hf.GetTypedConfig().UnmarshalTo(rl))

	svc := m.get(t, "Service/ratelimit")
	grpcPort := 0
	for _, p := range at(t, svc, "spec", "ports").([]any) {
		if p := p.(map[string]any); strings.HasPrefix(p["name"].(string), "grpc") {
			grpcPort = p["port"].(int)
		}
	}
	host := fmt.Sprintf("%s.default.svc.cluster.local", at(t, svc, "metadata", "name"))
	grpc := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc()
	assert.Equal(t, fmt.Sprintf("outbound|%d||%s", grpcPort, host), grpc.GetClusterName())
	assert.Equal(t, host, grpc.GetAuthority())
	// Apart from the cluster, the same filter as envoy.yaml's.
	rl.RateLimitService.GrpcService = nil
	want := proto.Clone(l.RateLimit).(*ratelimitfilterv3.RateLimit)
	want.RateLimitService.GrpcService = nil
	assert.True(t, proto.Equal(want, rl), "the filter settings are envoy.yaml's:\n%v\n%v", want, rl)

	// The descriptors: valid Envoy config, merged into every gateway
	// virtual host, the same as envoy.yaml's.
	vp := patch(t, m.get(t, "EnvoyFilter/filter-ratelimit-svc"), "VIRTUAL_HOST")
	assert.Equal(t, "GATEWAY", at(t, vp, "match", "context"))
	assert.Equal(t, "MERGE", at(t, vp, "patch", "operation"))
	value := at(t, vp, "patch", "value").(map[string]any)
	assert.Len(t, value, 1, "the patch only adds rate_limits")
	vh := &routev3.VirtualHost{}
	require.NoError(t, envoymodel.FromValue(value, vh))
	require.NotEmpty(t, vh.GetRateLimits())
	for i, r := range vh.GetRateLimits() {
		assert.NoError(t, envoymodel.Validate(r), "rate_limits[%d]", i)
	}
	fromEnvoyYAML := l.Routes.GetVirtualHosts()[0].GetRateLimits()
	require.Len(t, vh.GetRateLimits(), len(fromEnvoyYAML))
	for i := range fromEnvoyYAML {
		assert.True(t, proto.Equal(fromEnvoyYAML[i], vh.GetRateLimits()[i]), "rate_limits[%d] is envoy.yaml's", i)
	}
	for _, tc := range frontProxyCases() {
		ds, err := envoymodel.Descriptors(vh.GetRateLimits(), rl.GetStage(), tc.req)
		require.NoError(t, err)
		assert.Equal(t, tc.want, envoymodel.Describe(ds), tc.name)
	}
}

// istioTaskEnv is the environment of the Deployment "ratelimit" in Istio's
// global rate limit task, which runs envoyproxy/ratelimit.
var istioTaskEnv = map[string]string{
	"LOG_LEVEL": "debug", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "USE_STATSD": "false",
	"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_WATCH_ROOT": "false",
	"RUNTIME_IGNOREDOTFILES": "true",
}

// TestIstioSwapPatch: envoy/istio/swap-patch.yaml is a strategic merge
// patch of the task's container "ratelimit" that pins a released image,
// adds the variables that keep envoyproxy/ratelimit's answers, which the
// server reads beside the task's own as it should (fixed windows, no
// refund on deny, no retry-after, both metric names, Redis and the limits
// where the task has them), and probes on the ports the server serves.
func TestIstioSwapPatch(t *testing.T) {
	docs := yamlDocuments(t, envoyFile("istio/swap-patch.yaml"))
	require.Len(t, docs, 1)
	c := container(t, map[string]any{"spec": docs[0]["spec"]})
	assert.Equal(t, "ratelimit", c["name"], "the task's container, which the patch merges into by name")
	chart, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "helm", "ratewarden", "Chart.yaml"))
	require.NoError(t, err)
	appVersion := regexp.MustCompile(`(?m)^appVersion: "?([0-9.]+)"?$`).FindStringSubmatch(string(chart))
	require.NotNil(t, appVersion)
	assert.Equal(t, "ghcr.io/ratewarden/ratewarden:"+appVersion[1], c["image"], "the release the chart installs, pinned")

	env := containerEnv(t, c)
	known, err := knownVariables()
	require.NoError(t, err)
	for name := range env {
		assert.True(t, known[name], "the server does not read %s", name)
	}
	merged := maps.Clone(istioTaskEnv)
	maps.Copy(merged, env)
	s, err := settings.Load(func(k string) (string, bool) { v, ok := merged[k]; return v, ok })
	require.NoError(t, err)
	opts := s.ServiceOptions(slog.New(slog.DiscardHandler))
	assert.Equal(t, algorithms.FixedWindow, opts.DefaultAlgorithm)
	assert.False(t, opts.RefundOnDeny)
	assert.False(t, opts.RetryAfter)
	assert.Equal(t, "both", s.MetricsNames.String())
	assert.Equal(t, settings.BackendRedis, s.Backend, "REDIS_URL")
	assert.Equal(t, "/data/ratelimit/config", s.ConfigPath, "RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config")

	httpPort := port(t, ":8080")
	for probe, path := range map[string]string{"readinessProbe": "/ready", "livenessProbe": "/healthcheck", "startupProbe": "/healthcheck"} {
		assert.Equal(t, path, at(t, c, probe, "httpGet", "path"), probe)
		assert.Equal(t, httpPort, at(t, c, probe, "httpGet", "port"), probe)
	}
}
