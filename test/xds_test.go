package test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// envoyGatewayEnv is what Envoy Gateway sets for envoyproxy/ratelimit to take
// its limits from Envoy Gateway's xDS server (its ratelimit resource.go), with
// the RLS_ variable that carries each for ratewarden. certs stands for the
// files Envoy Gateway mounts under /certs (tls.crt, tls.key, ca.crt).
func envoyGatewayEnv(xdsServer string, certs redistest.Certs) map[string]string {
	return map[string]string{
		"RLS_CONFIG_SOURCE":     "GRPC_XDS_SOTW",        // CONFIG_TYPE
		"RLS_XDS_SERVER_URL":    xdsServer,              // CONFIG_GRPC_XDS_SERVER_URL (envoy-gateway:18001)
		"RLS_XDS_NODE_ID":       "envoy-ratelimit",      // CONFIG_GRPC_XDS_NODE_ID
		"RLS_XDS_TLS":           "true",                 // CONFIG_GRPC_XDS_SERVER_USE_TLS
		"RLS_XDS_TLS_CERT_FILE": certs.ClientCertFile,   // CONFIG_GRPC_XDS_CLIENT_TLS_CERT (/certs/tls.crt)
		"RLS_XDS_TLS_KEY_FILE":  certs.ClientKeyFile,    // CONFIG_GRPC_XDS_CLIENT_TLS_KEY (/certs/tls.key)
		"RLS_XDS_TLS_CA_FILE":   certs.CAFile,           // CONFIG_GRPC_XDS_SERVER_TLS_CACERT (/certs/ca.crt)
		"RLS_CONFIG_PATH":       "/nonexistent/limits/", // RUNTIME_ROOT and friends: unused with xDS
		// Reconnect quickly in the test.
		"RLS_XDS_BACKOFF_INITIAL_INTERVAL": "50ms",
		"RLS_XDS_BACKOFF_MAX_INTERVAL":     "500ms",
	}
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// gatewayRoute asks a server, as Envoy asks it, about requests on one route
// of one of Envoy Gateway's listeners, whose descriptors Envoy builds from
// the rules of a BackendTrafficPolicy.
type gatewayRoute struct {
	client          rlsv3.RateLimitServiceClient
	listener, route string
}

// check returns the overall code of the answer to a request of user.
func (g gatewayRoute) check(t *testing.T, rules []xdstest.Rule, user string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	resp, err := g.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
		Domain:      g.listener,
		Descriptors: xdstest.Descriptors(t, g.route, rules, xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": user}}),
	})
	require.NoError(t, err)
	return resp.GetOverallCode()
}

// admitted sends n requests of user and returns how many were admitted
// before the first denial.
func (g gatewayRoute) admitted(t *testing.T, rules []xdstest.Rule, user string, n int) int {
	t.Helper()
	for i := range n {
		if g.check(t, rules, user) != rlsv3.RateLimitResponse_OK {
			return i
		}
	}
	return n
}

// TestXDSFromEnvoyGateway runs the server binary as Envoy Gateway runs
// envoyproxy/ratelimit: limits from an xDS server over mutual TLS, as node
// envoy-ratelimit. It starts before the xDS server has limits for it, not
// ready, answering every request with envoyproxy/ratelimit's error before
// its first configuration (gRPC Unknown), so that Envoy's failure mode
// decides; enforces the first snapshot, then an update; and survives the
// xDS server's restart, taking its new limits.
func TestXDSFromEnvoyGateway(t *testing.T) {
	certs := redistest.NewCerts(t)
	serverTLS, _ := xdstest.MutualTLS(t, certs)
	xs := xdstest.Start(t, serverTLS)
	addr := strings.Replace(xs.Addr(), "127.0.0.1", "localhost", 1) // the name the certificate carries
	srv := startServer(t, envoyGatewayEnv(addr, certs))
	ctx := context.Background()

	const listener, route = "default/eg/http", "httproute/default/backend/rule/0/match/0/*"
	rules := []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-user-id", Distinct: true}}, Requests: 3, Unit: rlsconfv3.RateLimitUnit_MINUTE},
	}
	g := gatewayRoute{client: srv.Client, listener: listener, route: route}
	admitted := func(rules []xdstest.Rule, user string, n int) int {
		t.Helper()
		return g.admitted(t, rules, user, n)
	}

	assert.False(t, srv.Serving(ctx), "not ready without limits")
	code, _ := httpGet(t, "http://"+srv.HTTPAddr+"/healthcheck")
	assert.Equal(t, http.StatusOK, code, "live while it waits for the xDS server")
	code, body := httpGet(t, "http://"+srv.HTTPAddr+"/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no rate limit configuration loaded")
	_, err := srv.Client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      listener,
		Descriptors: xdstest.Descriptors(t, route, rules, xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": "alice"}}),
	})
	assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "no rate limit configuration loaded")

	xs.Set("envoy-ratelimit", "1", xdstest.Config(listener, route, rules...))
	_, err = xs.WaitFor(20*time.Second, func(r xdstest.Request) bool { return r.ACK("1") })
	require.NoError(t, err, "the server accepts the snapshot over mutual TLS\n%s", srv.Output())
	require.Eventually(t, func() bool { return srv.Serving(ctx) }, 10*time.Second, 10*time.Millisecond)
	first := xs.Requests()[0]
	assert.Equal(t, "envoy-ratelimit", first.Node.GetId())
	assert.Equal(t, 3, admitted(rules, "bob", 10))
	assert.Equal(t, 3, admitted(rules, "carol", 10), "each user has a limit of their own")
	code, body = httpGet(t, "http://"+srv.HTTPAddr+"/rlconfig")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `from xDS server `+addr+` (node envoy-ratelimit), version "1" (1 resource)`)

	rules[0].Requests = 5
	xs.Set("envoy-ratelimit", "2", xdstest.Config(listener, route, rules...))
	_, err = xs.WaitFor(10*time.Second, func(r xdstest.Request) bool { return r.ACK("2") })
	require.NoError(t, err)
	assert.Equal(t, 1, admitted(rules, "bob", 10), "5 a minute now, 4 counted: the denied request too, as envoyproxy/ratelimit counts it")

	// Envoy Gateway restarts: its snapshot versions start over, with other
	// limits behind them.
	xs.Stop()
	assert.Equal(t, 0, admitted(rules, "bob", 1), "the limits stay while the xDS server is away")
	assert.True(t, srv.Serving(ctx))
	rules[0].Requests = 8
	xs.Set("envoy-ratelimit", "1", xdstest.Config(listener, route, rules...))
	before := len(xs.Requests())
	xs.Restart()
	_, err = xs.WaitFrom(before, 20*time.Second, func(r xdstest.Request) bool { return r.ACK("1") })
	require.NoError(t, err)
	assert.Equal(t, 2, xs.Streams())
	assert.Equal(t, 1, admitted(rules, "bob", 10), "8 a minute: 7 counted, the 3 denied requests too")

	srv.Stop()
	assert.Equal(t, 0, srv.ExitCode(), "SIGTERM stops the server cleanly while it is subscribed")
}
