package test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// What Envoy Gateway's rate limit Deployment is (its
// internal/infrastructure/kubernetes/ratelimit/resource.go): the command
// its container runs, and the ports of gRPC and of the probes.
const (
	egCommand   = "/bin/ratelimit"
	egGRPCPort  = 8081
	egProbePort = 8080
)

// egImage is the format Envoy Gateway's API accepts for
// rateLimitDeployment.container.image (its kubebuilder validation).
var egImage = regexp.MustCompile(`^[a-zA-Z0-9._-]+(:[0-9]+)?(/[a-zA-Z0-9._/-]+)?(:[a-zA-Z0-9._-]+)?(@sha256:[a-z0-9]+)?$`)

// The parts of Envoy Gateway's API (v1.9.0, api/v1alpha1: EnvoyGateway,
// RateLimit, EnvoyGatewayKubernetesProvider, KubernetesDeploymentSpec,
// KubernetesContainerSpec, KubernetesPodDisruptionBudgetSpec, and
// Kubernetes' EnvVar) that envoy/gateway uses, with their JSON names.
// Decoding rejects any field not listed, so a misspelt or misplaced field
// fails; the API's own Go types would bring in Kubernetes' modules.
type (
	egConfig struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Gateway    struct {
			ControllerName string `yaml:"controllerName"`
		} `yaml:"gateway"`
		Logging struct {
			Level map[string]string `yaml:"level"`
		} `yaml:"logging"`
		RateLimit egRateLimit `yaml:"rateLimit"`
		Provider  egProvider  `yaml:"provider"`
	}
	egRateLimit struct {
		Backend struct {
			Type  string `yaml:"type"`
			Redis struct {
				URL string `yaml:"url"`
			} `yaml:"redis"`
		} `yaml:"backend"`
	}
	// egProvider has no patch: Envoy Gateway generates the Deployment
	// from these fields, and decoding refuses a patch.
	egProvider struct {
		Type       string `yaml:"type"`
		Kubernetes struct {
			RateLimitDeployment struct {
				Replicas  *int32 `yaml:"replicas"`
				Container struct {
					Image string     `yaml:"image"`
					Env   []egEnvVar `yaml:"env"`
				} `yaml:"container"`
			} `yaml:"rateLimitDeployment"`
			RateLimitPDB *struct {
				MinAvailable *int32 `yaml:"minAvailable"`
			} `yaml:"rateLimitPDB"`
		} `yaml:"kubernetes"`
	}
	// egEnvVar is a Kubernetes EnvVar with a value (not valueFrom).
	egEnvVar struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	}
	// egValues are the values of Envoy Gateway's Helm chart that
	// envoy/gateway/values.yaml sets.
	egValues struct {
		Global struct {
			Images struct {
				Ratelimit struct {
					Image string `yaml:"image"`
				} `yaml:"ratelimit"`
			} `yaml:"images"`
		} `yaml:"global"`
		Config struct {
			EnvoyGateway struct {
				RateLimit egRateLimit `yaml:"rateLimit"`
				Provider  egProvider  `yaml:"provider"`
			} `yaml:"envoyGateway"`
		} `yaml:"config"`
	}
)

// withContainerEnv returns env, the environment Envoy Gateway generates for
// the rate limit container, with the configuration's container.env merged
// in as Envoy Gateway merges it (ExpectedContainerEnv in its
// internal/infrastructure/kubernetes/resource/resource.go): a variable of
// the same name replaces the generated one, the others are added.
func withContainerEnv(env map[string]string, c egConfig) map[string]string {
	out := maps.Clone(env)
	for _, e := range c.Provider.Kubernetes.RateLimitDeployment.Container.Env {
		out[e.Name] = e.Value
	}
	return out
}

// envoyGatewayConfig decodes envoy/gateway/envoy-gateway.yaml.
func envoyGatewayConfig(t *testing.T) egConfig {
	t.Helper()
	var c egConfig
	decodeStrict(t, envoyFile("gateway/envoy-gateway.yaml"), &c)
	return c
}

// decodeStrict decodes the one document of a YAML file into v, refusing
// fields v does not have.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(v), path)
}

// TestEnvoyGatewayConfig checks envoy/gateway/envoy-gateway.yaml, Envoy
// Gateway's configuration with ratewarden as its rate limit service, against
// Envoy Gateway's API and Deployment, and ratewarden's defaults and
// settings: a released image, three replicas of which a disruption takes
// one at most, and container.env variables that the server reads beside
// Envoy Gateway's own environment, with the values the file's comments give.
func TestEnvoyGatewayConfig(t *testing.T) {
	c := envoyGatewayConfig(t)
	assert.Equal(t, "gateway.envoyproxy.io/v1alpha1", c.APIVersion)
	assert.Equal(t, "EnvoyGateway", c.Kind)
	assert.Equal(t, "gateway.envoyproxy.io/gatewayclass-controller", c.Gateway.ControllerName)
	assert.Equal(t, "Redis", c.RateLimit.Backend.Type, "global rate limits need Envoy Gateway's rate limit service")
	assert.NotEmpty(t, c.RateLimit.Backend.Redis.URL)
	assert.Equal(t, "Kubernetes", c.Provider.Type)
	d := c.Provider.Kubernetes.RateLimitDeployment
	assert.Regexp(t, egImage, d.Container.Image)
	assert.Regexp(t, `^ghcr\.io/ratewarden/ratewarden:\d+\.\d+\.\d+$`, d.Container.Image, "a released image, pinned")
	require.NotNil(t, d.Replicas)
	assert.EqualValues(t, 3, *d.Replicas)
	pdb := c.Provider.Kubernetes.RateLimitPDB
	require.True(t, pdb != nil && pdb.MinAvailable != nil, "a disruption budget")
	assert.EqualValues(t, *d.Replicas-1, *pdb.MinAvailable, "a drain takes one replica at most")

	// The ports Envoy Gateway sends gRPC and probes to are ratewarden's
	// defaults, which Envoy Gateway's environment does not change.
	assert.Equal(t, ":"+strconv.Itoa(egGRPCPort), defaultOf(t, "RLS_GRPC_ADDR"))
	assert.Equal(t, ":"+strconv.Itoa(egProbePort), defaultOf(t, "RLS_HTTP_ADDR"))

	// container.env holds ratewarden's variables only, none of Envoy
	// Gateway's, which the merge would replace, and the server starts with
	// them merged into the generated environment.
	known, err := knownVariables()
	require.NoError(t, err)
	generated := envoyGatewayDeployment(func(p string) string { return p }, "envoy-gateway:18001", "redis:6379", ":19001", false)
	for _, e := range d.Container.Env {
		assert.True(t, known[e.Name], "the server does not read %s", e.Name)
		assert.NotContains(t, generated, e.Name, "%s would replace Envoy Gateway's own", e.Name)
	}
	env := withContainerEnv(generated, c)
	s, err := settings.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err, "the server starts with Envoy Gateway's environment and container.env")
	assert.Equal(t, settings.ConfigFromXDS, s.ConfigSource, "CONFIG_TYPE=GRPC_XDS_SOTW")
	assert.Equal(t, 5*time.Second, s.ShutdownDelay)
	assert.Less(t, s.ShutdownDelay+s.ShutdownTimeout, egTerminationGracePeriod, "the pod's grace period covers the shutdown")
	assert.Equal(t, time.Minute, s.GiveBackTimeout)
	assert.Equal(t, algorithms.FixedWindow, s.XDSDefaultAlgorithm)
}

// egTerminationGracePeriod is the terminationGracePeriodSeconds of Envoy
// Gateway's rate limit pods (its ratelimit/resource_provider.go).
const egTerminationGracePeriod = 300 * time.Second

// defaultOf returns the default of a variable, as `server -h` prints it.
func defaultOf(t *testing.T, name string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, settings.PrintUsage(&out))
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == name {
			return f[1]
		}
	}
	t.Fatalf("server -h does not list %s with a default", name)
	return ""
}

// TestEnvoyGatewayHelmValues checks envoy/gateway/values.yaml: the chart's
// image value, in the registry/repository:tag form its template splits, and
// the same configuration as envoy-gateway.yaml once the chart has written
// the image into it.
func TestEnvoyGatewayHelmValues(t *testing.T) {
	var v egValues
	decodeStrict(t, envoyFile("gateway/values.yaml"), &v)
	c := envoyGatewayConfig(t)

	image := v.Global.Images.Ratelimit.Image
	assert.Equal(t, c.Provider.Kubernetes.RateLimitDeployment.Container.Image, image)
	registry, rest, ok := strings.Cut(image, "/")
	assert.True(t, ok && strings.Contains(registry, "."), "the chart takes the part before the first / as the registry: %q", image)
	assert.Regexp(t, `^[a-z0-9._/-]+:[a-zA-Z0-9._-]+$`, rest, "repository:tag")

	eg := v.Config.EnvoyGateway
	assert.Empty(t, eg.Provider.Kubernetes.RateLimitDeployment.Container.Image, "the chart writes the image from global.images.ratelimit")
	eg.Provider.Kubernetes.RateLimitDeployment.Container.Image = image
	assert.Equal(t, c.RateLimit, eg.RateLimit)
	assert.Equal(t, c.Provider, eg.Provider)
}

// TestImageRunsAsEnvoyGatewayStartsIt: Envoy Gateway runs the image with the
// command /bin/ratelimit; the image has the server there.
func TestImageRunsAsEnvoyGatewayStartsIt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	var build, final []string
	stage := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if strings.EqualFold(f[0], "FROM") {
			stage++
			continue
		}
		if stage == 1 {
			build = append(build, line)
		} else {
			final = append(final, line)
		}
	}
	var binary string
	for _, l := range build {
		if m := regexp.MustCompile(`go build .*-o (\S+) \./cmd/server`).FindStringSubmatch(l); m != nil {
			binary = m[1]
		}
	}
	require.NotEmpty(t, binary, "the builder builds ./cmd/server")
	assert.Contains(t, final, "COPY --from=builder "+binary+" "+egCommand)
}
