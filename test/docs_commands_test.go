package test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v3"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// runCall runs, or checks, a command the stand-in recorded, which the
// document runs with the variables env:
//
//   - go run ./cmd/server, with RLS_* variables: the server binary built by
//     TestMain (what go run builds), in the repository's root as a user runs
//     it, on ports the kernel picks; the documented ports (8081 and 8080, or
//     those the command sets) are mapped to them for the blocks that
//     follow (see docAddrs).
//     RLS_REDIS_ADDRS (and the Sentinel master's name) are replaced by a
//     real Redis of the mode the command asks for. The server must turn
//     SERVING and decide a request.
//   - go test, or go -C bench test for the load generator's module: the
//     packages must exist in that module and hold tests that -run selects
//     (read from their source: the suite runs them, so the docs test
//     neither compiles other packages nor starts their Redis servers).
//   - redis-server: started for real on a port of its own; every setting given
//     must read back from CONFIG GET.
//   - anything in docsCovered: the files it uses must exist and the tests
//     that check them must exist.
//
// Anything else is an error.
func (s *docSession) runCall(c docCall, env map[string]string) error {
	args := c.Args
	if i, spec, ok := coveredCommand(args); ok {
		s.coveredUsed[i] = true
		return spec.check(env)
	}
	isServer := slices.Equal(args, []string{"go", "run", "./cmd/server"})
	if len(env) > 0 && !isServer {
		return errors.New("only go run ./cmd/server may have variables before it")
	}
	switch {
	case isServer:
		return s.startServer(env)
	case slices.Equal(args, istioPortForward):
		return s.startIstioTask()
	case slices.Equal(args, gatewayPortForward), slices.Equal(args, rateLimitPortForward):
		return s.startGatewayWalkthrough()
	case len(args) >= 2 && args[0] == "go" && args[1] == "test":
		return checkGoTest(".", args[2:])
	case len(args) >= 4 && args[0] == "go" && args[1] == "-C" && args[3] == "test":
		return checkGoTest(args[2], args[4:])
	case args[0] == "redis-server":
		return s.redisServer(args[1:])
	}
	return errors.New("the docs test neither runs this command nor knows a test that covers it: teach docs_commands_test.go to run it, or add it to docsCovered")
}

// istioPortForward is the command of docs/swap-in-istio.md that reaches the
// patched Deployment's server from the reader's machine.
var istioPortForward = []string{"kubectl", "-n", "default", "port-forward", "deployment/ratelimit", "8080:8080", "8081:8081"}

// gatewayPortForward and rateLimitPortForward are the commands of
// docs/token-budgets-gateway.md that reach, from the reader's machine, the
// Gateway's Envoy and a replica of ratewarden.
var (
	gatewayPortForward   = []string{"kubectl", "-n", "envoy-gateway-system", "port-forward", "service/" + llmGatewayService, "8888:80"}
	rateLimitPortForward = []string{"kubectl", "-n", "envoy-gateway-system", "port-forward", "deployment/envoy-ratelimit", "8080:8080"}
)

// startGatewayWalkthrough runs what docs/token-budgets-gateway.md set up
// (startLLMGateway): the Redis of envoy/gateway/redis.yaml, three replicas
// as the Deployment of envoy-gateway.yaml runs them, with the limits Envoy
// Gateway serves them for token-budget-policy.yaml, and the Gateway of
// ai-gateway-route.yaml as a stand-in for Envoy and Envoy AI Gateway in
// front of an OpenAI-compatible upstream. Its port 8888 is the Gateway,
// and 8080 the HTTP port of the first replica, as the port-forwards name
// them. Either command starts it, once.
func (s *docSession) startGatewayWalkthrough() error {
	if s.gateway == nil {
		s.stopServer()
		s.t.Logf("%s: starting the Gateway and three replicas as the walkthrough deploys them", s.doc.Path)
		s.gateway = startLLMGateway(s.t, 3)
	}
	gateway, err := url.Parse(s.gateway.URL)
	if err != nil {
		return err
	}
	s.srv = &docServer{serverProcess: s.gateway.endpoints()[0], httpPort: "8080", more: map[string]string{"8888": gateway.Host}}
	return nil
}

// startIstioTask starts the server as the Deployment of Istio's global rate
// limit task runs it once envoy/istio/swap-patch.yaml is applied: the
// task's envoyproxy/ratelimit variables (istioTaskEnv), its limits
// (testdata/istio-task/config.yaml) under RUNTIME_ROOT, a real Redis at
// REDIS_URL, and the patch's variables; on the ports the port-forward
// names. It waits until the server is ready.
func (s *docSession) startIstioTask() error {
	patch, err := os.ReadFile(filepath.Join(repoRoot, "envoy", "istio", "swap-patch.yaml"))
	if err != nil {
		return err
	}
	var doc struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Env []struct{ Name, Value string }
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(patch, &doc); err != nil {
		return err
	}
	root := s.t.TempDir()
	limits, err := os.ReadFile(filepath.Join(repoRoot, "test", "testdata", "istio-task", "config.yaml"))
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), limits, 0o644); err != nil {
		return err
	}
	env := maps.Clone(istioTaskEnv)
	env["RUNTIME_ROOT"], env["REDIS_URL"] = root, redistest.Standalone(s.t).Addr()
	for _, c := range doc.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	s.stopServer()
	s.t.Logf("%s: starting the server as the patched Deployment of Istio's task runs it", s.doc.Path)
	p, err := launchServer(s.t, repoRoot, env, insecure.NewCredentials())
	if err != nil {
		return err
	}
	s.srv = &docServer{serverProcess: p, grpcPort: "8081", httpPort: "8080"}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return p.WaitServing(ctx)
}

// docServer is the server a document's last server command started, and the
// ports the document uses for it.
type docServer struct {
	*serverProcess
	grpcPort, httpPort string
	// more maps other documented ports to the addresses the test serves
	// them on.
	more map[string]string
}

func (s *docSession) stopServer() {
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	}
}

// knownVariables returns the variables `server -h` lists.
var knownVariables = sync.OnceValues(func() (map[string]bool, error) {
	out, err := exec.Command(serverBinary, "-h").Output()
	if err != nil {
		return nil, err
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(RLS_[A-Z0-9_]+)\s`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	return vars, nil
})

// startServer starts the server as `go run ./cmd/server` with env would,
// and waits until it serves and decides.
func (s *docSession) startServer(docEnv map[string]string) error {
	known, err := knownVariables()
	if err != nil {
		return err
	}
	env := map[string]string{}
	grpcPort, httpPort := "8081", "8080"
	for k, v := range docEnv {
		if !known[k] {
			return fmt.Errorf("%s is not a variable the server reads (server -h)", k)
		}
		switch k {
		case "RLS_GRPC_ADDR":
			_, grpcPort, err = net.SplitHostPort(v)
		case "RLS_HTTP_ADDR":
			if v == "" {
				httpPort, env[k] = "", "" // no HTTP, as documented
			} else {
				_, httpPort, err = net.SplitHostPort(v)
			}
		default:
			env[k] = v
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if env["RLS_BACKEND"] == "redis" {
		switch env["RLS_REDIS_MODE"] {
		case "", "standalone":
			env["RLS_REDIS_ADDRS"] = redistest.Standalone(s.t).Addr()
		case "cluster":
			env["RLS_REDIS_ADDRS"] = strings.Join(redistest.SharedCluster(s.t).Addrs(), ",")
		case "sentinel":
			sentinel := redistest.Sentinel(s.t)
			env["RLS_REDIS_ADDRS"] = strings.Join(sentinel.SentinelAddrs(), ",")
			env["RLS_REDIS_SENTINEL_MASTER"] = sentinel.MasterName()
		}
	}
	s.stopServer()
	s.t.Logf("%s: starting the server with %v", s.doc.Path, docEnv)
	p, err := launchServer(s.t, repoRoot, env, insecure.NewCredentials())
	if err != nil {
		return err
	}
	s.srv = &docServer{serverProcess: p, grpcPort: grpcPort, httpPort: httpPort}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.WaitServing(ctx); err != nil {
		return err
	}
	// A decided answer carries limit_remaining; a failure mode's does not.
	// The first decisions of a new server may miss the backend timeout on a
	// busy machine (a cluster client still connecting), and then answer by
	// the failure mode: what this checks is that the documented settings
	// decide at all, so a few tries are allowed.
	var notDecided error
	for range 20 {
		if notDecided = decides(ctx, p); notDecided == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return notDecided
}

// decides reports whether p decides a request of the example limits.
func decides(ctx context.Context, p *serverProcess) error {
	key := fmt.Sprintf("docs-%d", rand.Uint64())
	resp, err := p.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "api_key", Value: key}}},
	}})
	if err != nil {
		return fmt.Errorf("the server does not decide: %w", err)
	}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() == 0 {
		return fmt.Errorf("the server does not decide: it answered %v", resp)
	}
	return nil
}

// docAddrs replaces, in a block's commands, the addresses the document
// gives its server (localhost:8081 and localhost:8080, or the ports its
// server command set, also as 127.0.0.1) with those of the server the test
// started for it: the one thing of a block that does not run as written.
func (s *docSession) docAddrs(text string) (string, error) {
	ports := map[string]string{"8081": "", "8080": ""}
	if s.srv != nil {
		ports = map[string]string{s.srv.grpcPort: s.srv.GRPCAddr, s.srv.httpPort: s.srv.HTTPAddr}
		maps.Copy(ports, s.srv.more)
	}
	var replace []string
	for port, addr := range ports {
		for _, host := range []string{"localhost", "127.0.0.1"} {
			documented := host + ":" + port
			if port == "" || !strings.Contains(text, documented) {
				continue
			}
			if s.srv == nil {
				return "", fmt.Errorf("%s: no server runs: the document starts none (go run ./cmd/server) before this block", documented)
			}
			replace = append(replace, documented, addr)
		}
	}
	return strings.NewReplacer(replace...).Replace(text), nil
}

// checkGoTest checks `go test [flags] PACKAGES` run in module, a directory
// of the repository with a go.mod: every package exists in that module and
// holds tests, and -run selects at least one of them.
func checkGoTest(module string, args []string) error {
	if _, err := os.Stat(filepath.Join(repoRoot, module, "go.mod")); err != nil {
		return fmt.Errorf("go -C %s: not a module of the repository: %w", module, err)
	}
	var pkgs []string
	run := ""
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-run" && i+1 < len(args):
			i++
			run = args[i]
		case a == "-count" || a == "-timeout" || a == "-bench":
			i++
		case a == "-v" || a == "-race" || a == "-short":
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("go test flag %s is not one the docs test knows", a)
		default:
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) == 0 {
		return errors.New("go test: name the packages")
	}
	top, _, _ := strings.Cut(run, "/")
	re, err := regexp.Compile(top)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	selected := 0
	for _, pkg := range pkgs {
		if !strings.HasPrefix(pkg, "./") {
			return fmt.Errorf("package %s: name it by its directory, ./…", pkg)
		}
		dir := filepath.Join(repoRoot, module, strings.TrimSuffix(pkg, "/..."))
		if inner := innerModule(filepath.Join(repoRoot, module), dir); inner != "" {
			return fmt.Errorf("package %s is in the module in %s: go -C %[2]s test runs it", pkg, inner)
		}
		tests, err := testFuncs(dir, strings.HasSuffix(pkg, "/..."))
		if err != nil {
			return fmt.Errorf("package %s: %w", pkg, err)
		}
		if len(tests) == 0 {
			return fmt.Errorf("package %s has no tests", pkg)
		}
		for _, name := range tests {
			if re.MatchString(name) {
				selected++
			}
		}
	}
	if selected == 0 {
		return fmt.Errorf("-run %q selects no test of %s", run, strings.Join(pkgs, " "))
	}
	return nil
}

// testFuncs returns the Test functions of the package in dir, and of the
// packages under it when recursive, as ./... names them: not those of a
// module inside it (bench/ in the root).
func testFuncs(dir string, recursive bool) ([]string, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	var names []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (!recursive || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || isModule(path)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				names = append(names, fn.Name.Name)
			}
		}
		return nil
	})
	return names, err
}

// innerModule returns the directory, from the repository's root, of the
// module inside the one at root that holds dir (a directory under root),
// or "" when dir is root's.
func innerModule(root, dir string) string {
	for d := dir; len(d) > len(root); d = filepath.Dir(d) {
		if isModule(d) {
			rel, _ := filepath.Rel(repoRoot, d)
			return filepath.ToSlash(rel)
		}
	}
	return ""
}

// isModule reports whether dir holds a go.mod: the root of a module.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// redisServer starts redis-server with the documented settings on a port
// of its own and checks that each one reads back from CONFIG GET.
func (s *docSession) redisServer(args []string) error {
	settings := map[string]string{}
	var names []string
	var cfg proc.RedisConfig
	for i := 0; i < len(args); i += 2 {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok || i+1 == len(args) {
			return fmt.Errorf("want --name value pairs, got %q", args[i])
		}
		settings[name] = args[i+1]
		names = append(names, name)
		// The port is the one thing the test picks: a port of its own,
		// not the document's.
		if name != "port" {
			cfg.Args = append(cfg.Args, args[i], args[i+1])
		}
	}
	if settings["cluster-enabled"] == "yes" {
		cfg.Cluster, cfg.NodeTimeout = true, 5*time.Second
	}
	client := redistest.StartRedis(s.t, cfg).Client(s.t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range names {
		if name == "port" {
			continue
		}
		got, err := client.ConfigGet(ctx, name).Result()
		if err != nil {
			return fmt.Errorf("CONFIG GET %s: %w", name, err)
		}
		want, err := redisConfigValue(settings[name])
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		if got[name] != want {
			return fmt.Errorf("--%s %q reads back as %q", name, settings[name], got[name])
		}
	}
	return nil
}

// redisConfigValue returns the value CONFIG GET gives for a setting written
// as v: memory sizes in bytes, the rest as written.
func redisConfigValue(v string) (string, error) {
	m := regexp.MustCompile(`^(\d+)(k|kb|m|mb|g|gb)$`).FindStringSubmatch(strings.ToLower(v))
	if m == nil {
		return v, nil
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return "", err
	}
	unit := map[string]uint64{"k": 1000, "kb": 1 << 10, "m": 1000 * 1000, "mb": 1 << 20, "g": 1000 * 1000 * 1000, "gb": 1 << 30}[m[2]]
	return strconv.FormatUint(n*unit, 10), nil
}

// coveredCommandSpec is a documented command that this machine cannot run
// (it needs Docker, Kubernetes, or is the test suite itself), and the tests
// that check everything it uses.
type coveredCommandSpec struct {
	// prefix is the command's first words; more words may follow.
	prefix []string
	// env lists the variables the command may be given.
	env []string
	// files must exist.
	files []string
	// tests are "package.TestName", with the package as a directory of the
	// repository; each must exist.
	tests []string
	// why says why the command is not run here.
	why string
}

// docsCovered lists the documented commands the docs test does not run,
// with the tests that cover them.
var docsCovered = []coveredCommandSpec{
	{
		prefix: []string{"scripts/test"},
		files:  []string{"scripts/test"},
		why:    "it runs every test, this one included: CI runs it",
	},
	{
		prefix: []string{"scripts/demo-burst.sh"},
		env:    []string{"ENVOY_URL"},
		files:  []string{"scripts/demo-burst.sh"},
		tests:  []string{"test.TestTopologyDemoScript", "test.TestDemoScriptSyntax"},
		why:    "it needs the demo's Envoy: TestTopologyDemoScript runs it against a stand-in for Envoy built from envoy/envoy.yaml",
	},
	{
		prefix: []string{"docker", "compose", "up"},
		files:  []string{"docker-compose.yaml", "Dockerfile", "envoy/envoy.yaml"},
		tests:  []string{"test.TestComposeServices", "test.TestComposeMatchesEnvoyYAML", "test.TestComposeRatewardenOnRedisCluster", "test.TestDockerfile", "test.TestTopology"},
		why:    "Docker does not run in the tests: the compose file is checked against envoy.yaml and the server, and its topology runs as processes",
	},
	{
		prefix: []string{"sha256sum", "--ignore-missing", "-c"},
		files:  []string{".goreleaser.yaml"},
		tests:  []string{"test.TestReleaseSnapshot"},
		why:    "a release's files exist only once it is published: TestReleaseSnapshot builds them as the release does and checks every line of the checksums file",
	},
	{
		prefix: []string{"gh", "attestation", "verify"},
		files:  []string{".github/workflows/release.yml"},
		tests:  []string{"test.TestWorkflows"},
		why:    "a release's attestations exist only once it is published: TestWorkflows checks that the release workflow attests the archives, through the checksums file, and the image",
	},
	{
		prefix: []string{"docker", "build"},
		files:  []string{"Dockerfile"},
		tests:  []string{"test.TestDockerfile"},
		why:    "Docker does not run in the tests: the Dockerfile is checked to build a static binary that runs as non-root",
	},
	{
		prefix: []string{"helm", "upgrade", "--install", "eg", "oci://docker.io/envoyproxy/gateway-helm"},
		files:  []string{"envoy/gateway/values.yaml", "envoy/gateway/envoy-gateway.yaml", "Dockerfile"},
		tests:  []string{"test.TestEnvoyGatewayHelmValues", "test.TestEnvoyGatewayConfig", "test.TestImageRunsAsEnvoyGatewayStartsIt", "test.TestXDSFromEnvoyGateway", "test.TestEnvoyGatewayDeployment", "test.TestTokenBudgetGatewayReplicas"},
		why:    "Kubernetes does not run in the tests: the values are checked against Envoy Gateway's API and Deployment, and the server binary runs as Envoy Gateway's Deployment runs it, limits from its xDS server, its probes as generated",
	},
	{
		prefix: []string{"kubectl", "-n", "envoy-gateway-system", "rollout", "status", "deployment/envoy-ratelimit"},
		tests:  []string{"test.TestEnvoyGatewayDeployment", "test.TestTokenBudgetGatewayReplicas"},
		why:    "Kubernetes does not run in the tests: it waits for the replicas to pass the probes Envoy Gateway generates, which the server runs against with Envoy Gateway's environment and container.env",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/gateway/redis.yaml"},
		files:  []string{"envoy/gateway/redis.yaml"},
		tests:  []string{"test.TestEnvoyGatewayRedisManifest", "test.TestEnvoyGatewayRedisKeepsBudgets"},
		why:    "Kubernetes does not run in the tests: the manifest is decoded against Kubernetes' fields, and redis-server runs with its arguments, killed and restarted under a budget",
	},
	{
		prefix: []string{"helm", "upgrade", "--install", "aieg-crd", "oci://docker.io/envoyproxy/ai-gateway-crds-helm"},
		tests:  []string{"test.TestTokenBudgetGatewayRoute"},
		why:    "Kubernetes does not run in the tests: it installs Envoy AI Gateway's resource definitions, against whose v1.1.0 Go types the route is decoded",
	},
	{
		prefix: []string{"helm", "upgrade", "--install", "aieg", "oci://docker.io/envoyproxy/ai-gateway-helm"},
		tests:  []string{"test.TestTokenBudgetGatewayRoute", "test.TestTokenBudgetGatewayReplicas"},
		why:    "Kubernetes does not run in the tests: it installs Envoy AI Gateway's controller, whose part (the model's header, the costs in dynamic metadata) a stand-in plays",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/gateway/ai-gateway-route.yaml"},
		files:  []string{"envoy/gateway/ai-gateway-route.yaml"},
		tests:  []string{"test.TestTokenBudgetGatewayRoute", "test.TestTokenBudgetGatewayReplicas"},
		why:    "Kubernetes does not run in the tests: the resources are decoded against the fields of their Go types and checked to name each other",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/gateway/token-budget-policy.yaml"},
		files:  []string{"envoy/gateway/token-budget-policy.yaml"},
		tests:  []string{"test.TestTokenBudgetGatewayPolicy", "test.TestTokenBudgetGatewayMonths", "test.TestTokenBudgetGatewayReplicas"},
		why:    "Kubernetes does not run in the tests: the policy is decoded against Envoy Gateway's fields, and what Envoy Gateway builds of it is served to the server over xDS",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/istio/ratewarden.yaml"},
		files:  []string{"envoy/istio/ratewarden.yaml"},
		tests:  []string{"test.TestIstioManifestsParse", "test.TestIstioRatewardenDeployment"},
		why:    "Kubernetes does not run in the tests: the manifests are checked against the server's variables and config/",
	},
	{
		prefix: []string{"kubectl", "-n", "default", "patch", "deployment", "ratelimit", "--patch-file", "envoy/istio/swap-patch.yaml"},
		files:  []string{"envoy/istio/swap-patch.yaml"},
		tests:  []string{"test.TestIstioSwapPatch"},
		why:    "Kubernetes does not run in the tests: the patch's variables are loaded beside the task's, and the server runs with them where the walkthrough reaches it (kubectl port-forward)",
	},
	{
		prefix: []string{"kubectl", "-n", "default", "rollout"},
		tests:  []string{"test.TestIstioSwapPatch"},
		why:    "Kubernetes does not run in the tests: it waits for, or reverts, the rollout of the patched Deployment",
	},
	{
		prefix: []string{"kubectl", "-n", "default", "logs", "deployment/ratelimit"},
		tests:  []string{"test.TestEnvoyproxyRatelimitEnvironment"},
		why:    "Kubernetes does not run in the tests: the lines the start log gives for the variables it read and ignored are checked where the server starts with envoyproxy/ratelimit's variables",
	},
	{
		prefix: []string{"helm", "install", "ratewarden", "deploy/helm/ratewarden"},
		files:  []string{"deploy/helm/ratewarden/Chart.yaml", "deploy/helm/ratewarden/values.yaml", "config/edge.yaml"},
		tests:  []string{"test.TestHelmChartLint", "test.TestHelmChartDefault", "test.TestHelmChartRedis", "test.TestHelmChartLimits"},
		why:    "Kubernetes does not run in the tests: the chart is rendered with helm, its objects are checked against the server's settings, and its limits are loaded by the server binary",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/istio/envoyfilter.yaml"},
		files:  []string{"envoy/istio/envoyfilter.yaml"},
		tests:  []string{"test.TestIstioManifestsParse", "test.TestIstioEnvoyFilters"},
		why:    "Kubernetes does not run in the tests: the EnvoyFilter patches are checked as Envoy config equal to envoy.yaml's",
	},
	{
		prefix: []string{"kubectl", "create", "configmap", "ratewarden-dashboards"},
		files:  []string{"deploy/monitoring/ratewarden-dashboard.json", "deploy/monitoring/ratewarden-ratelimit-names-dashboard.json"},
		tests:  []string{"test.TestDashboards", "test.TestMonitoringNamesServedMetrics"},
		why:    "Kubernetes and Grafana do not run in the tests: the dashboards' queries are parsed with Prometheus's parser and checked against the series real servers serve",
	},
	{
		prefix: []string{"kubectl", "label", "configmap", "ratewarden-dashboards"},
		tests:  []string{"test.TestDashboards"},
		why:    "Kubernetes does not run in the tests: it labels the ConfigMap of the dashboards for Grafana's sidecar",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "deploy/monitoring/ratewarden-prometheusrule.yaml"},
		files:  []string{"deploy/monitoring/ratewarden-prometheusrule.yaml", "deploy/monitoring/ratewarden.rules.yaml"},
		tests:  []string{"test.TestAlertRules", "test.TestMonitoringNamesServedMetrics"},
		why:    "Kubernetes and Prometheus do not run in the tests: the rules are parsed with Prometheus's parser, checked to equal the plain rules file, and checked against the series real servers serve",
	},
}

// coveredCommand returns the docsCovered entry the command args matches.
func coveredCommand(args []string) (int, coveredCommandSpec, bool) {
	for i, spec := range docsCovered {
		if len(args) >= len(spec.prefix) && slices.Equal(args[:len(spec.prefix)], spec.prefix) {
			return i, spec, true
		}
	}
	return 0, coveredCommandSpec{}, false
}

// check checks that the command's variables, env, are ones the spec
// allows, and that the spec's files and tests exist.
func (spec coveredCommandSpec) check(env map[string]string) error {
	for k := range env {
		if !slices.Contains(spec.env, k) {
			return fmt.Errorf("variable %s: the tests that cover this command do not set it", k)
		}
	}
	for _, f := range spec.files {
		if _, err := os.Stat(filepath.Join(repoRoot, f)); err != nil {
			return err
		}
	}
	for _, ref := range spec.tests {
		pkg, name, _ := strings.Cut(ref, ".")
		tests, err := testFuncs(filepath.Join(repoRoot, pkg), false)
		if err != nil {
			return err
		}
		if !slices.Contains(tests, name) {
			return fmt.Errorf("%s, which covers this command, does not exist", ref)
		}
	}
	return nil
}

// TestDocsGoTestNamesPackagesOfItsModule: a documented go test names
// packages of the module it runs in, the root's or, with go -C bench,
// the load generator's; ./... in the root leaves out the bench module, as
// the go command does.
func TestDocsGoTestNamesPackagesOfItsModule(t *testing.T) {
	require.NoError(t, checkGoTest(".", []string{"./internal/algorithms"}))
	require.NoError(t, checkGoTest("bench", []string{"-race", "./..."}))
	require.NoError(t, checkGoTest("bench", []string{"./cmd/loadgen", "-run", "BenchQuick"}))
	assert.ErrorContains(t, checkGoTest(".", []string{"./bench/cmd/loadgen"}), "go -C bench test runs it")
	assert.ErrorContains(t, checkGoTest("cmd", []string{"./server"}), "not a module of the repository")
	assert.ErrorContains(t, checkGoTest(".", []string{"./...", "-run", "BenchQuick"}), "selects no test")
}
