package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// helmInstall is how scripts/test installs helm: Helm's own command, built
// from its module.
const helmInstall = "go install helm.sh/helm/v3/cmd/helm@v3.22.0"

// helmKubeVersion is the Kubernetes version the chart is rendered for. A
// helm built with go install renders for 1.20, where its release builds
// set their own version with -ldflags, and the chart needs 1.23.
const helmKubeVersion = "v1.30.0"

// chartDir is the Helm chart.
var chartDir = filepath.Join(repoRoot, "deploy", "helm", "ratewarden")

// The release the tests render: its name, and its namespace.
const (
	helmRelease   = "rw"
	helmNamespace = "rl"
	// helmFullname is the name of the release's objects.
	helmFullname = "rw-ratewarden"
)

// runHelm runs helm with args, with directories of its own for its cache
// and configuration, and returns what it prints. Its error holds what it
// printed on stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helm := needHelm(t)
	home := t.TempDir()
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// needHelm returns the path of helm, in PATH or where go install puts it:
// a test without it is skipped, and fails when CI is true.
func needHelm(t *testing.T) string {
	t.Helper()
	return redistest.NeedProgramIn(t, pathWithGoBin(t), "helm", helmInstall)
}

// valuesFile writes values to a file for helm's -f, and returns its path,
// or nil args for no values.
func valuesFile(t *testing.T, values map[string]any) []string {
	t.Helper()
	if values == nil {
		return nil
	}
	data, err := yaml.Marshal(values)
	require.NoError(t, err)
	// Not in t.TempDir, whose name holds the test's, commas too: helm
	// splits -f at commas.
	dir, err := os.MkdirTemp("", "ratewarden-values-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return []string{"-f", path}
}

// templateChart renders the chart in dir with values as the release rw in
// the namespace rl, and returns what helm template prints, or its error.
func templateChart(t *testing.T, dir string, values map[string]any, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"template", helmRelease, dir, "--namespace", helmNamespace, "--kube-version", helmKubeVersion}, valuesFile(t, values)...)
	return runHelm(t, append(all, args...)...)
}

// renderChart renders the chart with values and returns its objects by
// kind and name.
func renderChart(t *testing.T, values map[string]any) manifests {
	t.Helper()
	out, err := templateChart(t, chartDir, values)
	require.NoError(t, err)
	m := manifests{}
	for i, doc := range decodeYAMLDocuments(t, "helm template", []byte(out)) {
		name, _ := at(t, doc, "metadata", "name").(string)
		require.NotEmpty(t, name, "document %d: metadata.name", i+1)
		id := fmt.Sprint(doc["kind"], "/", name)
		require.NotContains(t, m, id, "%s twice", id)
		m[id] = doc
	}
	return m
}

// renderFails renders the chart with values, which must fail, and returns
// helm's error.
func renderFails(t *testing.T, values map[string]any) string {
	t.Helper()
	_, err := templateChart(t, chartDir, values)
	require.Error(t, err, "the chart renders with %v", values)
	return err.Error()
}

// ids returns the kinds and names of m's objects, sorted.
func (m manifests) ids() []string {
	return slices.Sorted(maps.Keys(m))
}

// podEnv is a container's environment: the values of its variables, and
// the sources of those that take theirs from elsewhere (valueFrom).
type podEnv struct {
	values map[string]string
	from   map[string]map[string]any
}

// envOf returns a container's environment. A variable set twice fails the
// test: the kubelet keeps the last, and the chart means one of them.
func envOf(t *testing.T, c map[string]any) podEnv {
	t.Helper()
	e := podEnv{values: map[string]string{}, from: map[string]map[string]any{}}
	list, _ := c["env"].([]any)
	for _, v := range list {
		v := v.(map[string]any)
		name, _ := v["name"].(string)
		require.NotEmpty(t, name)
		_, set := e.values[name]
		_, setFrom := e.from[name]
		require.False(t, set || setFrom, "%s is set twice", name)
		if from, ok := v["valueFrom"].(map[string]any); ok {
			e.from[name] = from
			continue
		}
		value, ok := v["value"].(string)
		require.True(t, ok, "%s: the value %#v is not a string", name, v["value"])
		e.values[name] = value
	}
	return e
}

// settingsOf loads the server's settings from the environment as the
// server would in the pod, giving each variable taken from a Secret the
// value stand-in.
func (e podEnv) settingsOf(t *testing.T) settings.Settings {
	t.Helper()
	known, err := knownVariables()
	require.NoError(t, err)
	for name := range e.values {
		assert.True(t, known[name] || !strings.HasPrefix(name, "RLS_"), "the server does not read %s", name)
	}
	s, err := settings.Load(func(name string) (string, bool) {
		if _, ok := e.from[name]; ok {
			return "stand-in", true
		}
		v, ok := e.values[name]
		return v, ok
	})
	require.NoError(t, err, "the server refuses the chart's environment")
	return s
}

// chartAppVersion returns Chart.yaml's appVersion.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	docs := yamlDocuments(t, filepath.Join(chartDir, "Chart.yaml"))
	require.Len(t, docs, 1)
	v, _ := docs[0]["appVersion"].(string)
	require.NotEmpty(t, v, "Chart.yaml: appVersion, a string")
	require.NotEmpty(t, docs[0]["version"], "Chart.yaml: version")
	return v
}

// configMapVolume lays out the files of a ConfigMap in a new directory the
// way the kubelet mounts them: in a timestamped directory that ..data
// links to, each file a link through ..data. It returns the directory.
func configMapVolume(t *testing.T, data map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	ts := "..2026_01_01_00_00_00.1"
	require.NoError(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
	for name, content := range data {
		text, ok := content.(string)
		require.True(t, ok, "ConfigMap data %s is not a string", name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ts, name), []byte(text), 0o644))
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	require.NoError(t, os.Symlink(ts, filepath.Join(dir, "..data")))
	return dir
}

// limitsMountedAt returns the ConfigMap volume of a Deployment's pods that
// is mounted at path, whole: a subPath mount would never see the
// ConfigMap's changes.
func limitsMountedAt(t *testing.T, d, c map[string]any, path string) string {
	t.Helper()
	var volume string
	for _, mnt := range c["volumeMounts"].([]any) {
		mnt := mnt.(map[string]any)
		if mnt["mountPath"] == path {
			require.Empty(t, volume, "two volumes at %s", path)
			require.Nil(t, mnt["subPath"], "the limits are mounted whole, so that they reload")
			volume = mnt["name"].(string)
		}
	}
	require.NotEmpty(t, volume, "a volume is mounted at RLS_CONFIG_PATH %s", path)
	for _, v := range at(t, d, "spec", "template", "spec", "volumes").([]any) {
		if v := v.(map[string]any); v["name"] == volume {
			name, _ := at(t, v, "configMap", "name").(string)
			require.NotEmpty(t, name)
			return name
		}
	}
	t.Fatalf("no volume %s", volume)
	return ""
}

// serverCheck runs the server binary's check command, -strict, on dir with
// the environment env, and fails the test with its report unless the
// limits pass.
func serverCheck(t *testing.T, env map[string]string, dir string) {
	t.Helper()
	cmd := exec.Command(serverBinary, "check", "-strict", dir)
	cmd.Env = nil
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "server check -strict %s:\n%s", dir, out)
	assert.Contains(t, string(out), "ok: ")
}

// locations matches the "(file:line)" that the dump of a Config gives
// each domain and rule.
var locations = regexp.MustCompile(`\([^()\n]*:\d+\)`)

// limitsDump loads the limits at path as the server with s would, and
// returns their dump without files and lines: what they mean.
func limitsDump(t *testing.T, s settings.Settings, path string) string {
	t.Helper()
	cfg, err := config.LoadContext(context.Background(), path, s.ConfigOptions())
	require.NoError(t, err)
	return locations.ReplaceAllString(cfg.String(), "(…)")
}

// httpGetOK waits until GET url answers 200, and returns the body.
func httpGetOK(t *testing.T, url string) string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return string(body)
		}
		last = fmt.Sprintf("%s: %s", resp.Status, body)
	}
	t.Fatalf("GET %s: %s", url, last)
	return ""
}

// runPod starts the server binary as the chart's pod runs it: with the
// container's environment and the ConfigMap mounted as the kubelet mounts
// it, on ports the kernel picks and with no delay at shutdown. It returns
// the server's HTTP address.
func runPod(t *testing.T, e podEnv, limits map[string]any) string {
	t.Helper()
	env := maps.Clone(e.values)
	env["RLS_CONFIG_PATH"] = configMapVolume(t, limits)
	env["RLS_HTTP_ADDR"], env["RLS_GRPC_ADDR"] = "127.0.0.1:0", "127.0.0.1:0"
	env["RLS_SHUTDOWN_DELAY"] = "0s"
	env["RLS_LOG_FORMAT"] = "text"
	return startServerAt(t, "", env).HTTPAddr
}

// probePath returns the path and port of a container's HTTP probe.
func probePath(t *testing.T, c map[string]any, probe string) (string, string) {
	t.Helper()
	path, _ := at(t, c, probe, "httpGet", "path").(string)
	port, _ := at(t, c, probe, "httpGet", "port").(string)
	return path, port
}

// TestHelmChartLint runs helm lint --strict on the chart, with its default
// values and with every optional object on, with the helm scripts/test
// installs.
func TestHelmChartLint(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "test"))
	require.NoError(t, err)
	require.Contains(t, string(script), "\n  "+helmInstall+"\n", "scripts/test installs the helm these tests run")
	out, err := runHelm(t, "lint", "--strict", chartDir)
	require.NoError(t, err, out)
	all := map[string]any{
		"redis":          map[string]any{"addrs": []string{"redis:6379"}, "passwordSecret": map[string]any{"name": "redis"}},
		"serviceMonitor": map[string]any{"enabled": true},
		"autoscaling":    map[string]any{"enabled": true},
		"limits":         map[string]any{"edge.yaml": "domain: edge\n"},
	}
	out, err = runHelm(t, append([]string{"lint", "--strict", chartDir}, valuesFile(t, all)...)...)
	require.NoError(t, err, out)
}

// TestHelmChartDefault renders the chart with its default values: two pods
// of the chart's own version, probes where the server answers them, the
// example limits mounted where it reads them and loaded by the server
// binary, a disruption budget, and the shutdown within the grace period.
func TestHelmChartDefault(t *testing.T) {
	m := renderChart(t, nil)
	assert.Equal(t, []string{
		"ConfigMap/" + helmFullname, "Deployment/" + helmFullname,
		"PodDisruptionBudget/" + helmFullname, "Service/" + helmFullname,
	}, m.ids())
	d := m.get(t, "Deployment/"+helmFullname)
	c := container(t, d)
	e := envOf(t, c)
	s := e.settingsOf(t)

	assert.Equal(t, 2, at(t, d, "spec", "replicas"))
	version := chartAppVersion(t)
	assert.NotEqual(t, "latest", version)
	assert.Equal(t, "ghcr.io/ratewarden/ratewarden:"+version, c["image"], "the image's tag is the chart's appVersion")
	assert.Equal(t, settings.BackendMemory, s.Backend, "no Redis is given")

	// Probes on the port the server serves HTTP on.
	httpPort := namedPort(t, c, "http")
	assert.Equal(t, port(t, s.HTTPAddr), httpPort)
	assert.Equal(t, port(t, s.GRPCAddr), namedPort(t, c, "grpc"))
	for probe, want := range map[string]string{"readinessProbe": "/ready", "livenessProbe": "/healthcheck", "startupProbe": "/healthcheck"} {
		path, port := probePath(t, c, probe)
		assert.Equal(t, want, path, probe)
		assert.Equal(t, "http", port, probe)
	}

	// The limits: the chart's ConfigMap, mounted whole at RLS_CONFIG_PATH,
	// holds the example limits of config/.
	assert.Equal(t, helmFullname, limitsMountedAt(t, d, c, s.ConfigPath))
	data := at(t, m.get(t, "ConfigMap/"+helmFullname), "data").(map[string]any)
	examples, err := filepath.Glob(filepath.Join(repoRoot, "config", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	require.Len(t, data, len(examples))
	for _, path := range examples {
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), data[filepath.Base(path)], "the ConfigMap holds %s as it is", path)
	}
	assert.NotContains(t, at(t, d, "spec", "template", "metadata").(map[string]any), "annotations",
		"the server reloads changed limits itself: no checksum rolls the pods")

	// The server binary, run as the pod runs it, loads them and answers
	// the probes and the metrics there.
	httpAddr := runPod(t, e, data)
	for _, probe := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		path, _ := probePath(t, c, probe)
		httpGetOK(t, "http://"+httpAddr+path)
	}
	rlconfig := httpGetOK(t, "http://"+httpAddr+"/rlconfig")
	assert.Contains(t, rlconfig, `domain "edge"`)
	assert.Contains(t, rlconfig, `domain "internal"`)

	// Shutdown: the grace period outlasts the delay and the timeout, in
	// the server's own defaults where the chart sets none.
	grace := time.Duration(at(t, d, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)) * time.Second
	assert.Greater(t, grace, s.ShutdownDelay+s.ShutdownTimeout)
	assert.Positive(t, s.ShutdownDelay, "time for Kubernetes and Envoy to take a pod out of rotation")

	// Not root, nothing to write, no capabilities; the image's user.
	pod := at(t, d, "spec", "template", "spec").(map[string]any)
	assert.Equal(t, true, at(t, pod, "securityContext", "runAsNonRoot"))
	assert.Equal(t, 65532, at(t, pod, "securityContext", "runAsUser"))
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	assert.Contains(t, string(dockerfile), "\nUSER 65532:65532\n", "the image runs as the chart's user")
	assert.Equal(t, false, at(t, c, "securityContext", "allowPrivilegeEscalation"))
	assert.Equal(t, true, at(t, c, "securityContext", "readOnlyRootFilesystem"))
	assert.Equal(t, []any{"ALL"}, at(t, c, "securityContext", "capabilities", "drop"))
	assert.NotEmpty(t, at(t, c, "resources", "requests", "cpu"))
	assert.NotEmpty(t, at(t, c, "resources", "requests", "memory"))
	assert.NotEmpty(t, at(t, c, "resources", "limits", "memory"))
	assert.Equal(t, false, pod["automountServiceAccountToken"])

	// The Service, the budget and the spread all select the pods.
	labels := at(t, d, "spec", "template", "metadata", "labels").(map[string]any)
	selects := func(what string, selector map[string]any) {
		t.Helper()
		require.NotEmpty(t, selector, what)
		for k, v := range selector {
			assert.Equal(t, v, labels[k], "%s selects the pods by %s", what, k)
		}
	}
	svc := m.get(t, "Service/"+helmFullname)
	selects("the Service", at(t, svc, "spec", "selector").(map[string]any))
	ports := map[string]any{}
	for _, p := range at(t, svc, "spec", "ports").([]any) {
		p := p.(map[string]any)
		ports[p["name"].(string)] = p
		assert.Equal(t, p["name"], p["targetPort"], "the Service targets the container port by name")
	}
	assert.Equal(t, "grpc", at(t, ports, "grpc", "appProtocol"), "Istio and Envoy speak HTTP/2 to it")
	assert.Equal(t, 8081, at(t, ports, "grpc", "port"))
	assert.Equal(t, 8080, at(t, ports, "http", "port"))
	pdb := m.get(t, "PodDisruptionBudget/"+helmFullname)
	assert.Equal(t, 1, at(t, pdb, "spec", "maxUnavailable"))
	selects("the PodDisruptionBudget", at(t, pdb, "spec", "selector", "matchLabels").(map[string]any))
	spread := at(t, pod, "topologySpreadConstraints", 0).(map[string]any)
	assert.Equal(t, "kubernetes.io/hostname", spread["topologyKey"])
	selects("the topology spread", at(t, spread, "labelSelector", "matchLabels").(map[string]any))
}

// TestHelmChartRedis renders the chart with Redis given: the server reads
// where Redis is, how to reach it, and the password from the Secret.
func TestHelmChartRedis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		redis  map[string]any
		addrs  []string
		mode   redisx.Mode
		master string
		secret bool
		tls    bool
	}{
		{
			name:  "standalone, as a string",
			redis: map[string]any{"addrs": "redis.redis-system:6379"},
			addrs: []string{"redis.redis-system:6379"}, mode: redisx.ModeStandalone,
		},
		{
			name: "cluster, with a password and TLS",
			redis: map[string]any{
				"addrs": []string{"redis-0.redis:6379", "redis-1.redis:6379"}, "mode": "cluster", "tls": true,
				"passwordSecret": map[string]any{"name": "redis-auth", "key": "redis-password"},
			},
			addrs: []string{"redis-0.redis:6379", "redis-1.redis:6379"}, mode: redisx.ModeCluster, secret: true, tls: true,
		},
		{
			name:  "sentinel",
			redis: map[string]any{"addrs": []string{"s-0:26379", "s-1:26379", "s-2:26379"}, "mode": "sentinel", "sentinelMaster": "ratelimit"},
			addrs: []string{"s-0:26379", "s-1:26379", "s-2:26379"}, mode: redisx.ModeSentinel, master: "ratelimit",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := renderChart(t, map[string]any{"redis": tc.redis})
			e := envOf(t, container(t, m.get(t, "Deployment/"+helmFullname)))
			s := e.settingsOf(t)
			assert.Equal(t, settings.BackendRedis, s.Backend)
			assert.Equal(t, tc.addrs, s.Redis.Addrs)
			assert.Equal(t, tc.mode, s.Redis.Mode)
			assert.Equal(t, tc.master, s.Redis.SentinelMaster)
			assert.Equal(t, tc.tls, s.Redis.TLS)
			if !tc.secret {
				assert.NotContains(t, e.from, "RLS_REDIS_PASSWORD")
				return
			}
			assert.Equal(t, map[string]any{"name": "redis-auth", "key": "redis-password"},
				at(t, e.from["RLS_REDIS_PASSWORD"], "secretKeyRef"), "the password comes from the Secret")
		})
	}
}

// TestHelmChartLimits renders the chart with limits given as text and as
// YAML: the ConfigMap carries them, `server check -strict` passes them as
// the pod's environment sets the server up, they mean what the files they
// came from mean, and the server binary loads them from the volume.
func TestHelmChartLimits(t *testing.T) {
	src := t.TempDir()
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(repoRoot, "config", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(src, name), data, 0o644))
		return data
	}
	asYAML := func(data []byte) map[string]any {
		var v map[string]any
		require.NoError(t, yaml.Unmarshal(data, &v))
		return v
	}
	// Numbers that Helm, which reads values as floats, must not write as
	// 1e+09.
	numbers := []byte(`domain: numbers
descriptors:
  - key: tenant
    value: big
    rate_limit:
      unit: day
      requests_per_unit: 1000000000
  - key: tenant
    value: "*"
    rate_limit:
      unit: second
      unit_multiplier: 30
      requests_per_unit: 12345678
      algorithm: token_bucket
      burst: 98765432
`)
	require.NoError(t, os.WriteFile(filepath.Join(src, "numbers.yaml"), numbers, 0o644))
	internal := read("internal.yaml")
	values := map[string]any{"limits": map[string]any{
		"edge.yaml":     asYAML(read("edge.yaml")),
		"internal.yaml": string(internal),
		"numbers.yaml":  asYAML(numbers),
	}}

	m := renderChart(t, values)
	d := m.get(t, "Deployment/"+helmFullname)
	c := container(t, d)
	e := envOf(t, c)
	s := e.settingsOf(t)
	assert.Equal(t, helmFullname, limitsMountedAt(t, d, c, s.ConfigPath))
	data := at(t, m.get(t, "ConfigMap/"+helmFullname), "data").(map[string]any)
	assert.Equal(t, []string{"edge.yaml", "internal.yaml", "numbers.yaml"}, slices.Sorted(maps.Keys(data)))
	assert.Equal(t, string(internal), data["internal.yaml"], "a file given as text is mounted as it is")

	mounted := configMapVolume(t, data)
	serverCheck(t, e.values, mounted)
	assert.Equal(t, limitsDump(t, s, src), limitsDump(t, s, mounted), "the mounted limits mean what their files mean")

	httpAddr := runPod(t, e, data)
	path, _ := probePath(t, c, "readinessProbe")
	httpGetOK(t, "http://"+httpAddr+path)
	rlconfig := httpGetOK(t, "http://"+httpAddr+"/rlconfig")
	assert.Contains(t, rlconfig, "requests_per_unit=1000000000 unit=day")
}

// TestHelmChartEnv renders the chart with env: numbers and booleans reach
// the server as it reads them, and a variable the chart sets from its
// values is refused, as are values that cannot work.
func TestHelmChartEnv(t *testing.T) {
	m := renderChart(t, map[string]any{"env": map[string]any{
		"RLS_MAX_HITS":         1000000000,
		"RLS_NEAR_LIMIT_RATIO": 0.9,
		"RLS_SHADOW_MODE":      true,
		"RLS_LOG_LEVEL":        "debug",
	}})
	e := envOf(t, container(t, m.get(t, "Deployment/"+helmFullname)))
	assert.Equal(t, "1000000000", e.values["RLS_MAX_HITS"])
	s := e.settingsOf(t)
	assert.Equal(t, uint64(1000000000), s.MaxHits)
	assert.InDelta(t, 0.9, s.NearLimitRatio, 1e-9)
	assert.True(t, s.ShadowMode)
	assert.Equal(t, "json", e.values["RLS_LOG_FORMAT"], "env adds to the chart's defaults")

	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a variable of redis.addrs", map[string]any{"env": map[string]any{"RLS_REDIS_ADDRS": "redis:6379"}},
			"env.RLS_REDIS_ADDRS: the chart sets RLS_REDIS_ADDRS from redis.addrs"},
		{"the limits' path in extraEnv", map[string]any{"extraEnv": []any{map[string]any{"name": "RLS_CONFIG_PATH", "value": "/x"}}},
			"extraEnv: the chart sets RLS_CONFIG_PATH"},
		{"a grace period within the shutdown", map[string]any{"terminationGracePeriodSeconds": 15},
			"terminationGracePeriodSeconds (15) must be more than shutdown.delaySeconds + shutdown.timeoutSeconds (15)"},
		{"sentinel without a master", map[string]any{"redis": map[string]any{"addrs": "s:26379", "mode": "sentinel"}},
			"redis.sentinelMaster: mode sentinel needs"},
		{"limits and a ConfigMap of them", map[string]any{"limits": map[string]any{"a.yaml": "domain: a\n"}, "limitsConfigMap": "ratelimit-config"},
			"limits and limitsConfigMap: one of them"},
		{"a misspelt value", map[string]any{"replicas": 3}, "additional properties 'replicas' not allowed"},
		{"an unknown Redis mode", map[string]any{"redis": map[string]any{"mode": "single"}}, "/redis/mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Contains(t, renderFails(t, tc.values), tc.want)
		})
	}
}

// TestHelmChartOptional renders the chart with its optional objects: the
// ServiceMonitor scrapes the path and port the server serves its metrics
// on, the autoscaler owns the replicas, a ConfigMap of the operator's
// replaces the chart's, and limits that the server does not watch roll the
// pods when they change.
func TestHelmChartOptional(t *testing.T) {
	t.Run("monitoring and autoscaling", func(t *testing.T) {
		m := renderChart(t, map[string]any{
			"serviceMonitor":      map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
			"autoscaling":         map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 6},
			"podDisruptionBudget": map[string]any{"enabled": false},
		})
		assert.Equal(t, []string{
			"ConfigMap/" + helmFullname, "Deployment/" + helmFullname, "HorizontalPodAutoscaler/" + helmFullname,
			"Service/" + helmFullname, "ServiceMonitor/" + helmFullname,
		}, m.ids())
		d := m.get(t, "Deployment/"+helmFullname)
		c := container(t, d)
		s := envOf(t, c).settingsOf(t)
		assert.NotContains(t, at(t, d, "spec").(map[string]any), "replicas", "the autoscaler sets them")
		hpa := m.get(t, "HorizontalPodAutoscaler/"+helmFullname)
		assert.Equal(t, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": helmFullname}, at(t, hpa, "spec", "scaleTargetRef"))
		assert.Equal(t, 3, at(t, hpa, "spec", "minReplicas"))
		assert.Equal(t, 6, at(t, hpa, "spec", "maxReplicas"))

		sm := m.get(t, "ServiceMonitor/"+helmFullname)
		assert.Equal(t, "kube-prometheus-stack", at(t, sm, "metadata", "labels", "release"))
		endpoint := at(t, sm, "spec", "endpoints", 0).(map[string]any)
		svc := m.get(t, "Service/"+helmFullname)
		var target any
		for _, p := range at(t, svc, "spec", "ports").([]any) {
			if p := p.(map[string]any); p["name"] == endpoint["port"] {
				target = p["targetPort"]
			}
		}
		require.NotNil(t, target, "the ServiceMonitor scrapes a port of the Service")
		assert.Equal(t, port(t, s.HTTPAddr), namedPort(t, c, target.(string)), "the metrics are on the HTTP port")
		assert.Empty(t, s.MetricsAddr)
		for k, v := range at(t, sm, "spec", "selector", "matchLabels").(map[string]any) {
			assert.Equal(t, v, at(t, svc, "metadata", "labels", k), "the ServiceMonitor selects the Service by %s", k)
		}
		// The server serves its metrics there.
		httpAddr := runPod(t, envOf(t, c), at(t, m.get(t, "ConfigMap/"+helmFullname), "data").(map[string]any))
		assert.Contains(t, httpGetOK(t, "http://"+httpAddr+endpoint["path"].(string)), "\nratewarden_")
	})

	t.Run("a ConfigMap of the operator's", func(t *testing.T) {
		m := renderChart(t, map[string]any{"limitsConfigMap": "ratelimit-config"})
		assert.NotContains(t, m, "ConfigMap/"+helmFullname)
		d := m.get(t, "Deployment/"+helmFullname)
		c := container(t, d)
		s := envOf(t, c).settingsOf(t)
		assert.Equal(t, "ratelimit-config", limitsMountedAt(t, d, c, s.ConfigPath))
	})

	t.Run("limits not watched", func(t *testing.T) {
		checksum := func(limit string) string {
			m := renderChart(t, map[string]any{
				"env":    map[string]any{"RLS_CONFIG_WATCH": false},
				"limits": map[string]any{"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: " + limit + "}\n"},
			})
			d := m.get(t, "Deployment/"+helmFullname)
			assert.False(t, envOf(t, container(t, d)).settingsOf(t).ConfigWatch)
			sum, _ := at(t, d, "spec", "template", "metadata", "annotations", "checksum/limits").(string)
			require.NotEmpty(t, sum)
			return sum
		}
		assert.NotEqual(t, checksum("10"), checksum("20"), "a change of limits changes the pods")
	})
}

// TestHelmChartNotes renders the chart's NOTES.txt, which helm template
// leaves out, as helm install prints it: it names the gRPC address, and
// says that limits on the memory backend are per pod.
func TestHelmChartNotes(t *testing.T) {
	// A copy of the chart whose one template renders NOTES.txt into a
	// ConfigMap, with the chart's helpers.
	dir := filepath.Join(t.TempDir(), "ratewarden")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir)))
	notes := filepath.Join(dir, "templates", "NOTES.txt")
	text, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.NoError(t, os.Remove(notes))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), text, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "notes.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ tpl (.Files.Get \"notes.txt\") . | quote }}\n"), 0o644))
	render := func(values map[string]any) string {
		t.Helper()
		out, err := templateChart(t, dir, values, "--show-only", "templates/notes.yaml")
		require.NoError(t, err)
		docs := decodeYAMLDocuments(t, "NOTES.txt", []byte(out))
		require.Len(t, docs, 1)
		return at(t, docs[0], "data", "notes").(string)
	}

	grpcAddr := fmt.Sprintf("%s.%s.svc.cluster.local:8081", helmFullname, helmNamespace)
	memory := render(nil)
	assert.Contains(t, memory, grpcAddr)
	assert.Contains(t, memory, "Backend: memory")
	assert.Contains(t, memory, "every limit holds per pod")
	assert.Contains(t, memory, "up to 2 times the\nlimit passes")
	redis := render(map[string]any{"redis": map[string]any{"addrs": "redis:6379"}})
	assert.Contains(t, redis, grpcAddr)
	assert.Contains(t, redis, "Backend: Redis (standalone) at redis:6379")
	assert.NotContains(t, redis, "per pod")
}
