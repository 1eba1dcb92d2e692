package envoymodel_test

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/server"
)

// What Envoy Gateway's rate limit Deployment is (its
// internal/infrastructure/kubernetes/ratelimit/resource.go): the container's
// name, which a patch must name to change it rather than add one, the
// command it runs, and the ports of gRPC and of the probes.
const (
	egContainer = "envoy-ratelimit"
	egCommand   = "/bin/ratelimit"
	egGRPCPort  = 8081
	egProbePort = 8080
)

// egImage is the format Envoy Gateway's API accepts for
// rateLimitDeployment.container.image (its kubebuilder validation).
var egImage = regexp.MustCompile(`^[a-zA-Z0-9._-]+(:[0-9]+)?(/[a-zA-Z0-9._/-]+)?(:[a-zA-Z0-9._-]+)?(@sha256:[a-z0-9]+)?$`)

// The parts of Envoy Gateway's API that envoy/gateway uses, with its JSON
// names. Decoding rejects any field not listed, so a misspelt or misplaced
// field fails; the API's own Go types would bring in Kubernetes' modules.
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
	egProvider struct {
		Type       string `yaml:"type"`
		Kubernetes struct {
			RateLimitDeployment struct {
				Container struct {
					Image string `yaml:"image"`
				} `yaml:"container"`
				Patch egPatch `yaml:"patch"`
			} `yaml:"rateLimitDeployment"`
		} `yaml:"kubernetes"`
	}
	// egPatch is a KubernetesPatchSpec whose value is a strategic merge
	// patch of the Deployment's containers.
	egPatch struct {
		Type  string `yaml:"type"`
		Value struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []egContainerPatch `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"value"`
	}
	egContainerPatch struct {
		Name           string   `yaml:"name"`
		LivenessProbe  *egProbe `yaml:"livenessProbe"`
		StartupProbe   *egProbe `yaml:"startupProbe"`
		ReadinessProbe *egProbe `yaml:"readinessProbe"`
	}
	egProbe struct {
		Patch     string       `yaml:"$patch"`
		HTTPGet   *egHTTPGet   `yaml:"httpGet"`
		TCPSocket *egTCPSocket `yaml:"tcpSocket"`

		TimeoutSeconds   int `yaml:"timeoutSeconds"`
		PeriodSeconds    int `yaml:"periodSeconds"`
		SuccessThreshold int `yaml:"successThreshold"`
		FailureThreshold int `yaml:"failureThreshold"`
	}
	egHTTPGet struct {
		Path   string `yaml:"path"`
		Port   int    `yaml:"port"`
		Scheme string `yaml:"scheme"`
	}
	egTCPSocket struct {
		Port int `yaml:"port"`
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

// egReadinessProbe returns the readiness probe Envoy Gateway generates for
// its container (resource.go): a GET of /healthcheck on the probe port,
// every 5 seconds, out of rotation at the first failure. Its startup and
// liveness probes GET the same path.
func egReadinessProbe() egProbe {
	return egProbe{
		HTTPGet:        &egHTTPGet{Path: "/healthcheck", Port: egProbePort, Scheme: "HTTP"},
		TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// checkProbePatch checks the optional patch of the Deployment: it replaces
// Envoy Gateway's readiness probe by the same probe of /ready, and leaves
// startup and liveness as Envoy Gateway generates them, on /healthcheck,
// which is ratewarden's liveness.
func checkProbePatch(t *testing.T, file string, p egPatch) {
	t.Helper()
	assert.Equal(t, "StrategicMerge", p.Type, file)
	cs := p.Value.Spec.Template.Spec.Containers
	require.Len(t, cs, 1, file)
	assert.Equal(t, egContainer, cs[0].Name, "%s: the patch changes Envoy Gateway's container instead of adding one", file)
	assert.Nil(t, cs[0].LivenessProbe, "%s: liveness stays Envoy Gateway's /healthcheck", file)
	assert.Nil(t, cs[0].StartupProbe, "%s: startup stays Envoy Gateway's /healthcheck", file)
	require.NotNil(t, cs[0].ReadinessProbe, "%s: readinessProbe", file)
	want := egReadinessProbe()
	want.Patch = "replace" // Envoy Gateway's probe is replaced whole, not merged into
	want.HTTPGet.Path = "/ready"
	assert.Equal(t, want, *cs[0].ReadinessProbe, "%s: Envoy Gateway's readiness probe, on /ready", file)
}

// TestEnvoyGatewayConfig checks envoy/gateway/envoy-gateway.yaml, Envoy
// Gateway's configuration with ratewarden as its rate limit service, against
// Envoy Gateway's API and Deployment, and ratewarden's defaults.
func TestEnvoyGatewayConfig(t *testing.T) {
	var c egConfig
	decodeStrict(t, envoyFile("gateway/envoy-gateway.yaml"), &c)
	assert.Equal(t, "gateway.envoyproxy.io/v1alpha1", c.APIVersion)
	assert.Equal(t, "EnvoyGateway", c.Kind)
	assert.Equal(t, "gateway.envoyproxy.io/gatewayclass-controller", c.Gateway.ControllerName)
	assert.Equal(t, "Redis", c.RateLimit.Backend.Type, "global rate limits need Envoy Gateway's rate limit service")
	assert.NotEmpty(t, c.RateLimit.Backend.Redis.URL)
	assert.Equal(t, "Kubernetes", c.Provider.Type)
	image := c.Provider.Kubernetes.RateLimitDeployment.Container.Image
	assert.Regexp(t, egImage, image)
	assert.Contains(t, image, "ratewarden")
	checkProbePatch(t, "envoy-gateway.yaml", c.Provider.Kubernetes.RateLimitDeployment.Patch)
	assert.Contains(t, headComment(t, envoyFile("gateway/envoy-gateway.yaml"), "provider", "kubernetes", "rateLimitDeployment", "patch"), "Optional",
		"the patch says it is optional where it stands")

	// The ports Envoy Gateway sends gRPC and probes to are ratewarden's
	// defaults, which Envoy Gateway's environment does not change.
	assert.Equal(t, ":"+strconv.Itoa(egGRPCPort), defaultOf(t, "RLS_GRPC_ADDR"))
	assert.Equal(t, ":"+strconv.Itoa(egProbePort), defaultOf(t, "RLS_HTTP_ADDR"))
}

// headComment returns the comment above the key at the end of a path of
// mapping keys in a YAML file.
func headComment(t *testing.T, path string, keys ...string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(data, &doc))
	require.NotEmpty(t, doc.Content, path)
	n := doc.Content[0]
	var key *yaml.Node
	for _, k := range keys {
		key = nil
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				key, n = n.Content[i], n.Content[i+1]
				break
			}
		}
		require.NotNil(t, key, "%s: no %s in %v", path, k, keys)
	}
	return key.HeadComment
}

// defaultOf returns the default of a variable, as `server -h` prints it.
func defaultOf(t *testing.T, name string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, server.PrintUsage(&out))
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
// the same configuration as envoy-gateway.yaml.
func TestEnvoyGatewayHelmValues(t *testing.T) {
	var v egValues
	decodeStrict(t, envoyFile("gateway/values.yaml"), &v)
	var c egConfig
	decodeStrict(t, envoyFile("gateway/envoy-gateway.yaml"), &c)

	image := v.Global.Images.Ratelimit.Image
	assert.Equal(t, c.Provider.Kubernetes.RateLimitDeployment.Container.Image, image)
	registry, rest, ok := strings.Cut(image, "/")
	assert.True(t, ok && strings.Contains(registry, "."), "the chart takes the part before the first / as the registry: %q", image)
	assert.Regexp(t, `^[a-z0-9._/-]+:[a-zA-Z0-9._-]+$`, rest, "repository:tag")

	eg := v.Config.EnvoyGateway
	assert.Equal(t, c.RateLimit, eg.RateLimit)
	assert.Equal(t, c.Provider.Type, eg.Provider.Type)
	assert.Empty(t, eg.Provider.Kubernetes.RateLimitDeployment.Container.Image, "the chart writes the image from global.images.ratelimit")
	assert.Equal(t, c.Provider.Kubernetes.RateLimitDeployment.Patch, eg.Provider.Kubernetes.RateLimitDeployment.Patch)
	checkProbePatch(t, "values.yaml", eg.Provider.Kubernetes.RateLimitDeployment.Patch)
	assert.Contains(t, headComment(t, envoyFile("gateway/values.yaml"), "config", "envoyGateway", "provider", "kubernetes", "rateLimitDeployment", "patch"), "Optional",
		"the patch says it is optional where it stands")
}

// TestImageRunsAsEnvoyGatewayStartsIt: Envoy Gateway runs the image with the
// command /bin/ratelimit; the image has the server there.
func TestImageRunsAsEnvoyGatewayStartsIt(t *testing.T) {
	data, err := os.ReadFile(repoFile("Dockerfile"))
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
