package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// xdsWait bounds every wait for the xDS client; generous, for a busy
// machine.
const xdsWait = 10 * time.Second

// The listener and route of the Envoy Gateway configuration the tests serve.
const (
	egListener = "default/eg/http"
	egRoute    = "httproute/default/backend/rule/0/match/0/www_example_com"
)

// egRules are BackendTrafficPolicy rules of the kinds Envoy Gateway users
// write: a header with one value, a header whose every value has its own
// limit, every source address of a CIDR with its own limit, and a limit on
// everything in shadow mode.
func egRules(aliceLimit, orgLimit uint32) []xdstest.Rule {
	return []xdstest.Rule{
		{Headers: []xdstest.HeaderMatch{{Name: "x-user-id", Value: "alice"}}, Requests: aliceLimit, Unit: rlsconfv3.RateLimitUnit_MINUTE},
		{Headers: []xdstest.HeaderMatch{{Name: "x-org", Distinct: true}}, Requests: orgLimit, Unit: rlsconfv3.RateLimitUnit_MINUTE},
		{CIDR: "192.0.2.0/24", CIDRDistinct: true, Requests: 1, Unit: rlsconfv3.RateLimitUnit_HOUR},
		{Requests: 1, Unit: rlsconfv3.RateLimitUnit_DAY, Shadow: true},
	}
}

// xdsEnv returns the settings of a server taking its limits from srv, as
// Envoy Gateway's node.
func xdsEnv(srv *xdstest.Server) map[string]string {
	return map[string]string{
		"RLS_CONFIG_SOURCE":                "GRPC_XDS_SOTW",
		"RLS_CONFIG_PATH":                  "/nonexistent",
		"RLS_XDS_SERVER_URL":               srv.Addr(),
		"RLS_XDS_NODE_ID":                  "envoy-ratelimit",
		"RLS_XDS_BACKOFF_INITIAL_INTERVAL": "20ms",
		"RLS_XDS_BACKOFF_MAX_INTERVAL":     "200ms",
	}
}

// egCheck asks about one request of the route, with the descriptors Envoy
// sends for it, and returns the overall code.
func egCheck(t *testing.T, s *started, rules []xdstest.Rule, req xdstest.HTTPRequest) rlsv3.RateLimitResponse_Code {
	t.Helper()
	resp, err := s.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
		Domain:      egListener,
		Descriptors: xdstest.Descriptors(t, egRoute, rules, req),
	})
	require.NoError(t, err)
	return resp.GetOverallCode()
}

// admits counts how many of n requests are admitted, stopping at the first
// denial.
func admits(t *testing.T, s *started, rules []xdstest.Rule, req xdstest.HTTPRequest, n int) int {
	t.Helper()
	for i := range n {
		if egCheck(t, s, rules, req) != rlsv3.RateLimitResponse_OK {
			return i
		}
	}
	return n
}

func ackOf(version string) func(xdstest.Request) bool {
	return func(r xdstest.Request) bool { return r.ACK(version) }
}

// TestXDSServesEnvoyGatewayLimits: with limits from an xDS server, the server
// serves at once, answering every request with envoyproxy/ratelimit's error
// before its first configuration and reporting not ready; takes the RateLimitConfig Envoy Gateway builds and enforces it;
// takes an update; NACKs an invalid one and keeps the limits in force; and
// takes the limits of a restarted server.
func TestXDSServesEnvoyGatewayLimits(t *testing.T) {
	xs := xdstest.Start(t, nil)
	s := start(t, xdsEnv(xs))
	alice := xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": "alice"}, ClientIP: "203.0.113.1"}

	// Before the first update.
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, healthOf(t, s))
	code, _ := getBody(t, s.http+"/healthcheck")
	assert.Equal(t, http.StatusOK, code, "live while it waits for the xDS server")
	code, body := getBody(t, s.http+"/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no rate limit configuration loaded")
	code, body = getBody(t, s.http+"/rlconfig")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "waiting for xDS server "+xs.Addr()+" (node envoy-ratelimit)")
	_, err := s.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
		Domain: egListener, Descriptors: xdstest.Descriptors(t, egRoute, egRules(3, 2), alice),
	})
	assert.Equal(t, codes.Unknown, status.Code(err), "no limits yet: Envoy's failure mode decides: %v", err)

	// Envoy Gateway's first snapshot.
	rules := egRules(3, 2)
	xs.Set("envoy-ratelimit", "1", xdstest.Config(egListener, egRoute, rules...))
	_, err = xs.WaitFor(xdsWait, ackOf("1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return healthOf(t, s) == healthpb.HealthCheckResponse_SERVING }, xdsWait, tick)
	code, body = getBody(t, s.http+"/rlconfig")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `from xDS server `+xs.Addr()+` (node envoy-ratelimit), version "1" (1 resource)`)
	assert.Contains(t, body, `domain "default/eg/http" (RateLimitConfig "default/eg/http")`)

	assert.Equal(t, 3, admits(t, s, rules, alice, 10), "x-user-id: alice, 3 a minute")
	bob := xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": "bob"}, ClientIP: "203.0.113.1"}
	assert.Equal(t, 10, admits(t, s, rules, bob, 10), "other users are not selected")
	acme := xdstest.HTTPRequest{Headers: map[string]string{"x-org": "acme"}, ClientIP: "203.0.113.1"}
	globex := xdstest.HTTPRequest{Headers: map[string]string{"x-org": "globex"}, ClientIP: "203.0.113.1"}
	assert.Equal(t, 2, admits(t, s, rules, acme, 10), "x-org: 2 a minute for each value")
	assert.Equal(t, 2, admits(t, s, rules, globex, 10))
	inside := xdstest.HTTPRequest{ClientIP: "192.0.2.7"}
	assert.Equal(t, 1, admits(t, s, rules, inside, 10), "192.0.2.0/24: one an hour per address")
	assert.Equal(t, 1, admits(t, s, rules, xdstest.HTTPRequest{ClientIP: "192.0.2.8"}, 10))
	assert.Equal(t, 10, admits(t, s, rules, xdstest.HTTPRequest{ClientIP: "198.51.100.1"}, 10),
		"outside the CIDR; the rule on everything is in shadow mode")

	// An update raises alice's limit; what she used still counts, and so
	// does her denied request, as envoyproxy/ratelimit counts every hit.
	rules = egRules(5, 2)
	xs.Set("envoy-ratelimit", "2", xdstest.Config(egListener, egRoute, rules...))
	_, err = xs.WaitFor(xdsWait, ackOf("2"))
	require.NoError(t, err)
	assert.Equal(t, 1, admits(t, s, rules, alice, 10), "5 a minute now, 4 counted")

	// An invalid update is rejected with the resource and field at fault,
	// and the limits stay.
	bad := xdstest.Config(egListener, egRoute, egRules(100, 100)...)
	bad.Descriptors[0].Descriptors[1].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	xs.Set("envoy-ratelimit", "3", bad)
	nack, err := xs.WaitFor(xdsWait, xdstest.Request.NACK)
	require.NoError(t, err)
	assert.Equal(t, "2", nack.VersionInfo)
	assert.Contains(t, nack.ErrorDetail.GetMessage(),
		`RateLimitConfig "default/eg/http": descriptors[0].descriptors[1].rate_limit.unit: invalid rate limit unit "UNKNOWN"`)
	assert.Equal(t, 0, admits(t, s, rules, alice, 1), "alice's 5 are used")
	assert.Equal(t, 2, admits(t, s, rules, xdstest.HTTPRequest{Headers: map[string]string{"x-org": "initech"}}, 10),
		"the org limit is still 2, not the rejected 100")
	code, body = getBody(t, s.http+"/rlconfig")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `version "2"`)
	assert.Contains(t, body, "last reload error: ")
	assert.Contains(t, body, "descriptors[0].descriptors[1].rate_limit.unit")
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, healthOf(t, s), "the limits in force stay loaded")
	m := scrapeMetrics(t, s.http)
	assert.Equal(t, 2.0, m[metrics.ConfigReloads+`{result="success"}`])
	assert.GreaterOrEqual(t, m[metrics.ConfigReloads+`{result="failure"}`], 1.0)
	assert.Equal(t, 0.0, m[metrics.ConfigLastReloadSuccessful])
	assert.Equal(t, 1.0, m[metrics.XDSConnected])

	// The management server dies: the limits in force stay, and health
	// with them. It comes back with other limits, which are taken.
	xs.Stop()
	require.Eventually(t, func() bool { return scrapeMetrics(t, s.http)[metrics.XDSConnected] == 0 }, xdsWait, tick)
	assert.Equal(t, 0, admits(t, s, rules, alice, 1))
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, healthOf(t, s))
	rules = egRules(5, 10)
	xs.Set("envoy-ratelimit", "1", xdstest.Config(egListener, egRoute, rules...))
	before := len(xs.Requests())
	xs.Restart()
	_, err = xs.WaitFrom(before, xdsWait, ackOf("1"))
	require.NoError(t, err)
	assert.Equal(t, 2, xs.Streams())
	assert.Equal(t, 10, admits(t, s, rules, xdstest.HTTPRequest{Headers: map[string]string{"x-org": "umbrella"}}, 20))
	assert.Equal(t, 1.0, scrapeMetrics(t, s.http)[metrics.XDSConnected])
}

// TestXDSMutualTLS: the server takes its limits from an xDS server that
// demands a client certificate, with the files the settings name.
func TestXDSMutualTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	serverTLS, _ := xdstest.MutualTLS(t, certs)
	xs := xdstest.Start(t, serverTLS)
	xs.Set("envoy-ratelimit", "7", xdstest.Config(egListener, egRoute, egRules(1, 1)...))
	env := xdsEnv(xs)
	env["RLS_XDS_SERVER_URL"] = strings.Replace(xs.Addr(), "127.0.0.1", "localhost", 1)
	env["RLS_XDS_TLS"] = "true"
	env["RLS_XDS_TLS_CERT_FILE"] = certs.ClientCertFile
	env["RLS_XDS_TLS_KEY_FILE"] = certs.ClientKeyFile
	env["RLS_XDS_TLS_CA_FILE"] = certs.CAFile
	s := start(t, env)
	_, err := xs.WaitFor(xdsWait, ackOf("7"))
	require.NoError(t, err)
	alice := xdstest.HTTPRequest{Headers: map[string]string{"x-user-id": "alice"}}
	assert.Equal(t, 1, admits(t, s, egRules(1, 1), alice, 5))
}

// TestXDSClientCertificateIsReadAtStart: a client certificate for the xDS
// server that cannot be read stops the server with its variable's name.
func TestXDSClientCertificateIsReadAtStart(t *testing.T) {
	t.Parallel()
	set, err := loadSettings(map[string]string{
		"RLS_CONFIG_SOURCE": "xds", "RLS_XDS_TLS": "true", "RLS_GRPC_ADDR": "127.0.0.1:0", "RLS_HTTP_ADDR": "",
		"RLS_XDS_TLS_CERT_FILE": "/nonexistent/tls.crt", "RLS_XDS_TLS_KEY_FILE": "/nonexistent/tls.key",
	})
	require.NoError(t, err)
	_, err = New(context.Background(), set, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RLS_XDS_TLS_CERT_FILE")
}
