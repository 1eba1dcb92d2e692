package test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ratewarden/ratewarden/internal/proc"
	"github.com/ratewarden/ratewarden/internal/redistest"
)

// run runs one documented command, or checks that it is covered, and
// returns what it printed. Each program is run as follows:
//
//   - go run ./cmd/server, with RLS_* variables: the server binary built by
//     TestMain (what go run builds), in the repository's root as a user runs
//     it, on ports the kernel picks; the documented ports (8081 and 8080, or
//     those the command sets) are mapped to them for the commands that
//     follow.
//     RLS_REDIS_ADDRS (and the Sentinel master's name) are replaced by a
//     real Redis of the mode the command asks for. The server must turn
//     SERVING and decide a request.
//   - go run ./cmd/server -h: the binary with -h.
//   - go test: the packages must exist and hold tests that -run selects
//     (read from their source, so the docs test neither compiles other
//     packages nor starts their Redis servers).
//   - grpcurl: the same call made with a Go client (so grpcurl need not be
//     installed), printed as grpcurl prints it; the service must be listed
//     by server reflection, which is how grpcurl finds it.
//   - curl: the same HTTP request made with a Go client, printed as curl
//     prints it.
//   - redis-server: started for real on a port of its own; every setting given
//     must read back from CONFIG GET.
//   - grep after a pipe: lines matching the pattern.
//   - anything in docsCovered: the files it uses must exist and the tests
//     that check them must exist.
//
// Anything else is an error.
func (s *docSession) run(cmd shellCommand) (string, error) {
	first := cmd.Stages[0]
	var out string
	var err error
	if i, c, ok := coveredCommand(first); ok {
		s.coveredUsed[i] = true
		err = c.check(first)
	} else {
		out, err = s.runProgram(first)
	}
	for _, stage := range cmd.Stages[1:] {
		if err != nil {
			break
		}
		out, err = pipeFilter(stage, out)
	}
	return out, err
}

func (s *docSession) runProgram(c simpleCommand) (string, error) {
	args := c.Args
	isServer := len(args) >= 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/server"
	if len(c.Env) > 0 && !(isServer && len(args) == 3) {
		return "", errors.New("only go run ./cmd/server may have variables before it")
	}
	switch {
	case isServer && len(args) == 3:
		return "", s.startServer(c.Env)
	case isServer && len(args) == 4 && args[3] == "-h":
		out, err := exec.Command(serverBinary, "-h").CombinedOutput()
		return string(out), err
	case len(args) >= 2 && args[0] == "go" && args[1] == "test":
		return "", checkGoTest(args[2:])
	case args[0] == "grpcurl":
		return s.grpcurl(args[1:])
	case args[0] == "curl":
		return s.curl(args[1:])
	case args[0] == "redis-server":
		return "", s.redisServer(args[1:])
	}
	return "", errors.New("the docs test neither runs this command nor knows a test that covers it: teach docs_commands_test.go to run it, or add it to docsCovered")
}

// docServer is the server a document's last server command started, and the
// ports the document uses for it.
type docServer struct {
	*serverProcess
	grpcPort, httpPort string
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
	p := startServerAt(s.t, repoRoot, env)
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

// docAddr maps an address of the docs (localhost:8081) to the real address
// of the document's server.
func (s *docSession) docAddr(addr string) (string, error) {
	if s.srv == nil {
		return "", errors.New("no server runs: the document starts none (go run ./cmd/server) before this command")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host != "localhost" && host != "127.0.0.1" {
		return "", fmt.Errorf("%s is not on localhost, where the document's server runs", addr)
	}
	switch port {
	case s.srv.grpcPort:
		return s.srv.GRPCAddr, nil
	case s.srv.httpPort:
		return s.srv.HTTPAddr, nil
	}
	return "", fmt.Errorf("no server of the document listens on %s", addr)
}

// grpcJSON prints messages as grpcurl does.
var grpcJSON = protojson.MarshalOptions{Multiline: true, Indent: "  "}

// grpcurl makes the call `grpcurl -plaintext [-d JSON] ADDR METHOD` would.
func (s *docSession) grpcurl(args []string) (string, error) {
	plaintext, body := false, ""
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-plaintext":
			plaintext = true
		case a == "-d" && i+1 < len(args):
			i++
			body = args[i]
		case strings.HasPrefix(a, "-"):
			return "", fmt.Errorf("grpcurl flag %s is not one the docs test knows", a)
		default:
			rest = append(rest, a)
		}
	}
	if !plaintext {
		return "", errors.New("grpcurl needs -plaintext: the server serves gRPC without TLS unless RLS_GRPC_TLS_* say otherwise")
	}
	if len(rest) != 2 {
		return "", errors.New("want grpcurl -plaintext [-d JSON] ADDR SERVICE/METHOD")
	}
	addr, err := s.docAddr(rest[0])
	if err != nil {
		return "", err
	}
	if addr != s.srv.GRPCAddr {
		return "", fmt.Errorf("%s is the HTTP port", rest[0])
	}
	service, method, ok := strings.Cut(rest[1], "/")
	if !ok {
		return "", fmt.Errorf("%s: want SERVICE/METHOD", rest[1])
	}
	if err := s.reflectionLists(service); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var req, resp proto.Message
	var call func() error
	switch rest[1] {
	case "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit":
		r := &rlsv3.RateLimitRequest{}
		req = r
		call = func() (err error) { resp, err = s.srv.Client.ShouldRateLimit(ctx, r); return err }
	case "grpc.health.v1.Health/Check":
		r := &healthpb.HealthCheckRequest{}
		req = r
		call = func() (err error) { resp, err = s.srv.Health.Check(ctx, r); return err }
	default:
		return "", fmt.Errorf("method %s/%s is not one the docs test calls", service, method)
	}
	if body != "" {
		if err := protojson.Unmarshal([]byte(body), req); err != nil {
			return "", fmt.Errorf("-d is not a %s in JSON: %w", req.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	if err := call(); err != nil {
		st := status.Convert(err)
		return fmt.Sprintf("ERROR:\n  Code: %s\n  Message: %s\n", st.Code(), st.Message()), err
	}
	out, err := grpcJSON.Marshal(resp)
	return string(out) + "\n", err
}

// reflectionLists checks that server reflection lists service.
func (s *docSession) reflectionLists(service string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(s.srv.conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		return err
	}
	resp, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("server reflection: %w", err)
	}
	for _, svc := range resp.GetListServicesResponse().GetService() {
		if svc.GetName() == service {
			return nil
		}
	}
	return fmt.Errorf("server reflection does not list %s, so grpcurl could not call it", service)
}

// curl makes the request curl would with the flags -s, -S, -i, -f, -d,
// -X and -H, and prints the answer as curl does.
func (s *docSession) curl(args []string) (string, error) {
	method, body, include, fail := "", "", false, false
	hasBody := false
	header := http.Header{}
	var url string
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() (string, error) {
			if i+1 == len(args) {
				return "", fmt.Errorf("curl %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case a == "-d" || a == "--data":
			body, err = value()
			hasBody = true
		case a == "-X" || a == "--request":
			method, err = value()
		case a == "-H" || a == "--header":
			var h string
			if h, err = value(); err == nil {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return "", fmt.Errorf("curl -H %q: want Name: value", h)
				}
				header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		case a == "--silent" || a == "--show-error":
		case a == "--include":
			include = true
		case a == "--fail":
			fail = true
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 1:
			for _, f := range a[1:] {
				switch f {
				case 's', 'S':
				case 'i':
					include = true
				case 'f':
					fail = true
				default:
					return "", fmt.Errorf("curl flag -%c is not one the docs test knows", f)
				}
			}
		case strings.HasPrefix(a, "-"):
			return "", fmt.Errorf("curl flag %s is not one the docs test knows", a)
		case url != "":
			return "", errors.New("curl: one URL only")
		default:
			url = a
		}
		if err != nil {
			return "", err
		}
	}
	rest, ok := strings.CutPrefix(url, "http://")
	if !ok && strings.Contains(url, "://") {
		return "", fmt.Errorf("curl %s: the server speaks plain HTTP", url)
	}
	hostPort, path, _ := strings.Cut(rest, "/")
	addr, err := s.docAddr(hostPort)
	if err != nil {
		return "", err
	}
	if addr != s.srv.HTTPAddr {
		return "", fmt.Errorf("%s is the gRPC port", hostPort)
	}
	if method == "" {
		method = http.MethodGet
		if hasBody {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequest(method, "http://"+addr+"/"+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header = header
	if hasBody && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if fail && resp.StatusCode >= 400 {
		return "", fmt.Errorf("curl -f: HTTP %s", resp.Status)
	}
	var out strings.Builder
	if include {
		fmt.Fprintf(&out, "%s %s\n", resp.Proto, resp.Status)
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, v := range resp.Header[k] {
				fmt.Fprintf(&out, "%s: %s\n", k, v)
			}
		}
		out.WriteString("\n")
	}
	out.Write(data)
	return out.String(), nil
}

// pipeFilter runs a command after a pipe: grep PATTERN, with the pattern read
// as a Go regular expression whose +, ?, |, (, ), { and } are literal, as in
// grep's basic syntax.
func pipeFilter(c simpleCommand, in string) (string, error) {
	if len(c.Env) > 0 || len(c.Args) != 2 || c.Args[0] != "grep" || strings.HasPrefix(c.Args[1], "-") {
		return "", errors.New("after a pipe, only grep PATTERN is supported")
	}
	var pat strings.Builder
	for _, r := range c.Args[1] {
		if strings.ContainsRune("+?|(){}", r) {
			pat.WriteByte('\\')
		}
		pat.WriteRune(r)
	}
	re, err := regexp.Compile(pat.String())
	if err != nil {
		return "", fmt.Errorf("grep: %w", err)
	}
	var out []string
	for line := range strings.SplitSeq(strings.TrimSuffix(in, "\n"), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "", fmt.Errorf("grep %s matched no line of:\n%s", c.Args[1], in)
	}
	return strings.Join(out, "\n") + "\n", nil
}

// checkGoTest checks `go test [flags] PACKAGES`: every package exists and
// holds tests, and -run selects at least one of them.
func checkGoTest(args []string) error {
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
		tests, err := testFuncs(filepath.Join(repoRoot, strings.TrimSuffix(pkg, "/...")), strings.HasSuffix(pkg, "/..."))
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
// packages under it when recursive.
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
		if d.IsDir() && path != dir && (!recursive || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
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
		tests:  []string{"test.TestTopologyDemoScript", "internal/envoymodel.TestDemoScriptSyntax"},
		why:    "it needs the demo's Envoy: TestTopologyDemoScript runs it against a stand-in for Envoy built from envoy/envoy.yaml",
	},
	{
		prefix: []string{"docker", "compose", "up"},
		files:  []string{"docker-compose.yaml", "Dockerfile", "envoy/envoy.yaml"},
		tests:  []string{"internal/envoymodel.TestComposeServices", "internal/envoymodel.TestComposeMatchesEnvoyYAML", "internal/envoymodel.TestComposeRatewardenOnRedisCluster", "internal/envoymodel.TestDockerfile", "test.TestTopology"},
		why:    "Docker does not run in the tests: the compose file is checked against envoy.yaml and the server, and its topology runs as processes",
	},
	{
		prefix: []string{"docker", "build"},
		files:  []string{"Dockerfile"},
		tests:  []string{"internal/envoymodel.TestDockerfile"},
		why:    "Docker does not run in the tests: the Dockerfile is checked to build a static binary that runs as non-root",
	},
	{
		prefix: []string{"helm", "upgrade", "--install", "eg", "oci://docker.io/envoyproxy/gateway-helm"},
		files:  []string{"envoy/gateway/values.yaml", "envoy/gateway/envoy-gateway.yaml", "Dockerfile"},
		tests:  []string{"internal/envoymodel.TestEnvoyGatewayHelmValues", "internal/envoymodel.TestEnvoyGatewayConfig", "internal/envoymodel.TestImageRunsAsEnvoyGatewayStartsIt", "test.TestXDSFromEnvoyGateway", "test.TestEnvoyGatewayDeployment"},
		why:    "Kubernetes does not run in the tests: the values are checked against Envoy Gateway's API and Deployment, and the server binary runs as Envoy Gateway's Deployment runs it, limits from its xDS server, its probes as generated and as patched",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/istio/ratewarden.yaml"},
		files:  []string{"envoy/istio/ratewarden.yaml"},
		tests:  []string{"internal/envoymodel.TestIstioManifestsParse", "internal/envoymodel.TestIstioRatewardenDeployment"},
		why:    "Kubernetes does not run in the tests: the manifests are checked against the server's variables and config/",
	},
	{
		prefix: []string{"kubectl", "apply", "-f", "envoy/istio/envoyfilter.yaml"},
		files:  []string{"envoy/istio/envoyfilter.yaml"},
		tests:  []string{"internal/envoymodel.TestIstioManifestsParse", "internal/envoymodel.TestIstioEnvoyFilters"},
		why:    "Kubernetes does not run in the tests: the EnvoyFilter patches are checked as Envoy config equal to envoy.yaml's",
	},
}

// coveredCommand returns the docsCovered entry c matches.
func coveredCommand(c simpleCommand) (int, coveredCommandSpec, bool) {
	for i, spec := range docsCovered {
		if len(c.Args) >= len(spec.prefix) && slices.Equal(c.Args[:len(spec.prefix)], spec.prefix) {
			return i, spec, true
		}
	}
	return 0, coveredCommandSpec{}, false
}

// check checks that c uses only the variables the spec allows, and that the
// spec's files and tests exist.
func (spec coveredCommandSpec) check(c simpleCommand) error {
	for k := range c.Env {
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
