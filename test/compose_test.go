package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/envoymodel"
)

// composeServices returns docker-compose.yaml's services.
func composeServices(t *testing.T) map[string]map[string]any {
	t.Helper()
	docs := yamlDocuments(t, filepath.Join(repoRoot, "docker-compose.yaml"))
	require.Len(t, docs, 1)
	out := map[string]map[string]any{}
	for name, s := range at(t, docs[0], "services").(map[string]any) {
		svc, ok := s.(map[string]any)
		require.True(t, ok, "service %s is a mapping", name)
		out[name] = svc
	}
	return out
}

// dependencies returns the services a service's depends_on names, in its
// list or its map form.
func dependencies(svc map[string]any) []string {
	var out []string
	switch d := svc["depends_on"].(type) {
	case []any:
		for _, n := range d {
			out = append(out, fmt.Sprint(n))
		}
	case map[string]any:
		for n := range d {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// strs returns a list of scalars as strings.
func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// flagValue returns the value that follows name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	require.True(t, i >= 0 && i+1 < len(args), "%s in %q", name, args)
	return args[i+1]
}

func TestComposeServices(t *testing.T) {
	services := composeServices(t)
	for name, svc := range services {
		for _, dep := range dependencies(svc) {
			assert.Contains(t, services, dep, "%s depends on %s", name, dep)
		}
		for _, v := range strs(svc["volumes"]) {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(host, ".") {
				_, err := os.Stat(filepath.Join(repoRoot, host))
				assert.NoError(t, err, "%s mounts %s from the repository", name, host)
			}
		}
		if b, ok := svc["build"]; ok {
			_, err := os.Stat(filepath.Join(repoRoot, fmt.Sprint(b), "Dockerfile"))
			assert.NoError(t, err, "%s is built from a Dockerfile", name)
		}
		assert.True(t, svc["image"] != nil || svc["build"] != nil, "%s has an image", name)
	}
	assert.Equal(t, []string{"ratewarden", "upstream"}, dependencies(services["envoy"]))
	assert.Equal(t, []string{"redis-cluster-init"}, dependencies(services["ratewarden"]))
	assert.Equal(t, "service_completed_successfully", at(t, services["ratewarden"], "depends_on", "redis-cluster-init", "condition"))
}

// TestComposeMatchesEnvoyYAML: the Envoy of the demo loads envoy.yaml, listens
// where the compose file publishes, and its clusters reach the services on
// the ports they listen on.
func TestComposeMatchesEnvoyYAML(t *testing.T) {
	services := composeServices(t)
	b, err := envoymodel.LoadBootstrap(envoyFile("envoy.yaml"))
	require.NoError(t, err)
	clusters := clustersOf(b)
	l := frontProxy(t)

	e := services["envoy"]
	assert.Contains(t, fmt.Sprint(e["image"]), "envoyproxy/envoy")
	assert.Contains(t, strs(e["volumes"]), "./envoy/envoy.yaml:/etc/envoy/envoy.yaml:ro", "the image's default config path")
	assert.Contains(t, strs(e["ports"]), fmt.Sprintf("%d:%d", l.Port, l.Port), "Envoy's listener is published")

	rls := l.RateLimit.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	assert.Equal(t, "ratewarden", endpointHost(clusters[rls]), "the cluster resolves the ratewarden service")
	require.Contains(t, services, endpointHost(clusters[rls]))
	env := composeEnv(t, services["ratewarden"])
	assert.EqualValues(t, port(t, orDefault(env, "RLS_GRPC_ADDR", ":8081")), endpointPort(t, clusters[rls]))

	up := clusters["upstream"]
	require.NotNil(t, up)
	require.Contains(t, services, endpointHost(up))
	listen := ""
	for _, arg := range strs(services[endpointHost(up)]["command"]) {
		if v, ok := strings.CutPrefix(arg, "-listen="); ok {
			listen = v
		}
	}
	assert.EqualValues(t, port(t, listen), endpointPort(t, up), "the upstream listens where Envoy sends")
}

// composeEnv returns a service's environment, in its map form.
func composeEnv(t *testing.T, svc map[string]any) map[string]string {
	t.Helper()
	m, ok := svc["environment"].(map[string]any)
	require.True(t, ok, "environment is a mapping")
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func TestComposeRatewardenOnRedisCluster(t *testing.T) {
	services := composeServices(t)
	env := composeEnv(t, services["ratewarden"])
	known, err := knownVariables()
	require.NoError(t, err)
	for name := range env {
		assert.True(t, known[name], "the server does not read %s", name)
	}
	assert.Equal(t, "redis", env["RLS_BACKEND"])
	assert.Equal(t, "cluster", env["RLS_REDIS_MODE"])
	assert.Equal(t, ".", services["ratewarden"]["build"])
	assert.Contains(t, strs(services["ratewarden"]["volumes"]), "./config:"+env["RLS_CONFIG_PATH"]+":ro", "the example limits at RLS_CONFIG_PATH")

	var nodes []string
	for name, svc := range services {
		if strings.Contains(fmt.Sprint(svc["command"]), "--cluster-enabled") {
			nodes = append(nodes, name)
			args := strs(svc["command"])
			assert.Equal(t, "yes", flagValue(t, args, "--cluster-enabled"), name)
			assert.Equal(t, "noeviction", flagValue(t, args, "--maxmemory-policy"), name)
			assert.Equal(t, "", flagValue(t, args, "--save"), name)
			assert.Equal(t, "no", flagValue(t, args, "--appendonly"), name)
			assert.Equal(t, "6379", flagValue(t, args, "--port"), name)
			assert.Equal(t, "no", flagValue(t, args, "--cluster-require-full-coverage"), name)
			assert.Regexp(t, `^redis:7`, svc["image"])
		}
	}
	slices.Sort(nodes)
	assert.Equal(t, []string{"redis-1", "redis-2", "redis-3", "redis-4", "redis-5", "redis-6"}, nodes)
	for _, addr := range strings.Split(env["RLS_REDIS_ADDRS"], ",") {
		host, p, _ := strings.Cut(addr, ":")
		assert.Contains(t, nodes, host, "RLS_REDIS_ADDRS names cluster nodes")
		assert.Equal(t, "6379", p)
	}

	create := services["redis-cluster-init"]
	assert.Equal(t, nodes, dependencies(create), "the cluster is created once every node is up")
	for _, n := range nodes {
		assert.Equal(t, "service_healthy", at(t, create, "depends_on", n, "condition"))
	}
	script := strs(create["command"])
	require.Len(t, script, 1)
	assert.Regexp(t, `redis-cli --cluster create .* --cluster-replicas 1 --cluster-yes`, script[0])
	for _, n := range nodes {
		assert.Contains(t, script[0], n)
	}
	// Compose turns $$ into $; the shell must accept what remains.
	sh := exec.Command("sh", "-n")
	sh.Stdin = strings.NewReader(strings.ReplaceAll(script[0], "$$", "$"))
	out, err := sh.CombinedOutput()
	assert.NoError(t, err, "%s", out)
	assert.NotRegexp(t, regexp.MustCompile(`[^$]\$[a-z(]`), script[0], "a single $ would be interpolated by compose")
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	type stage struct {
		from, name string
		lines      []string
	}
	var stages []*stage
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); strings.EqualFold(f[0], "FROM") {
			s := &stage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
			continue
		}
		require.NotEmpty(t, stages, "an instruction before FROM: %s", line)
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	require.Len(t, stages, 2, "a builder and a final stage")
	builder, final := stages[0], stages[1]

	assert.Regexp(t, `^golang:1\.26`, builder.from)
	require.NotEmpty(t, builder.name)
	var build string
	for _, l := range builder.lines {
		if strings.Contains(l, "go build") {
			build = l
		}
	}
	require.NotEmpty(t, build, "the builder runs go build")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`, "./cmd/server"} {
		assert.Contains(t, build, want)
	}
	out := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(build)
	require.NotNil(t, out, "go build -o names the binary")

	assert.Regexp(t, `^(gcr\.io/distroless/static[^:]*:nonroot|scratch)$`, final.from)
	var user, entrypoint, copied, expose, workdir string
	var copies []string
	for _, l := range final.lines {
		f := strings.Fields(l)
		switch strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entrypoint = l
		case "EXPOSE":
			expose = strings.Join(f[1:], " ")
		case "WORKDIR":
			workdir = f[1]
		case "COPY":
			if f[1] == "--from="+builder.name && f[2] == out[1] {
				if copied == "" {
					copied = f[3]
				}
				copies = append(copies, f[3])
			}
		case "ENV":
			// An RLS_ variable set in the image would win over the
			// envoyproxy/ratelimit variables of a Deployment made for it.
			assert.NotContains(t, l, "RLS_", "the image sets no RLS_ variable")
		case "RUN":
			t.Errorf("the final stage runs nothing: %s", l)
		}
	}
	assert.Contains(t, copies, "/bin/ratelimit", "the binary is also where envoyproxy/ratelimit's manifests run it")
	require.NotEmpty(t, user)
	uid, _, _ := strings.Cut(user, ":")
	assert.NotContains(t, []string{"root", "0"}, uid, "the image runs as a non-root user")
	require.NotEmpty(t, copied, "the final stage copies the binary from the builder")
	assert.Contains(t, entrypoint, `"`+copied+`"`, "and runs it")
	assert.Equal(t, "8080 8081", expose)
	assert.Contains(t, final.lines, "COPY config/ /etc/ratewarden/config/")
	assert.Equal(t, "/etc/ratewarden", workdir, "where RLS_CONFIG_PATH's default, ./config, finds the example limits")
}

func TestDemoScriptSyntax(t *testing.T) {
	out, err := exec.Command("bash", "-n", filepath.Join(repoRoot, "scripts", "demo-burst.sh")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	info, err := os.Stat(filepath.Join(repoRoot, "scripts", "demo-burst.sh"))
	require.NoError(t, err)
	assert.NotZero(t, info.Mode()&0o111, "the script is executable")
}
