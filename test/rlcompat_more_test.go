package test

// The rest of envoyproxy/ratelimit's integration tests: reloads from files
// and from an xDS server, share_threshold, extra tags, and gRPC over TLS
// with certificates reloaded (see rlcompat_test.go).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
)

// rlConfigLoads returns ratelimit_service_config_load_success, their
// count of loads.
func (s rlServer) rlConfigLoads(t *testing.T) float64 {
	t.Helper()
	return s.rlMetrics(t)[metrics.RatelimitConfigLoadSuccess]
}

// waitForConfigReload is theirs: it waits for the count of loads to pass
// before, and returns it. They poll once a second for two minutes; this
// polls more often, for twenty seconds.
func (s rlServer) waitForConfigReload(t *testing.T, before float64) float64 {
	t.Helper()
	var after float64
	require.Eventually(t, func() bool {
		after = s.rlConfigLoads(t)
		return after > before
	}, 20*time.Second, 20*time.Millisecond, "the limits are loaded again")
	return after
}

// testRLConfigReload is their testConfigReload: a domain that the limits
// do not have yet, then reloadConf gives it to them and restoreConf takes
// it away again, each a load that their counter counts.
func testRLConfigReload(t *testing.T, s rlServer, reloadConf, restoreConf func()) {
	c := s.call(t, rlRequest("reload", [][][2]string{{{"block", "foo"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlOK}},
	}, c)

	before := s.rlConfigLoads(t)
	require.Positive(t, before, "the first load is counted")
	reloadConf()
	after := s.waitForConfigReload(t, before)

	c = s.call(t, rlRequest("reload", [][][2]string{{{"key1", "foo"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(rlOK, 50, rlSecond, 49)},
	}, c)

	restoreConf()
	s.waitForConfigReload(t, after)
}

// TestRLBasicReloadConfig is their TestBasicReloadConfig: with
// RUNTIME_WATCH_ROOT false, the basic expectations, and a file copied into
// the limits directory and removed again.
func TestRLBasicReloadConfig(t *testing.T) {
	t.Parallel()
	t.Run("BasicWithoutWatchRoot", func(t *testing.T) {
		t.Parallel()
		v := rlVariants()[0]
		env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""), "RUNTIME_WATCH_ROOT", "false")
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
	t.Run("ReloadWithoutWatchRoot", func(t *testing.T) {
		t.Parallel()
		root := rlRuntimeRoot(t, true)
		env := with(rlDefaultEnv(root, redistest.Standalone(t).Addr(), ""), "RUNTIME_WATCH_ROOT", "false")
		s := startRLServer(t, env)
		copied := filepath.Join(root, "ratelimit", "config", "reload.yaml")
		testRLConfigReload(t, s, func() {
			// Their reloadNewConfigFile: create, copy, close.
			in, err := os.Open(filepath.Join(root, "ratelimit", "reload.yaml"))
			require.NoError(t, err)
			defer in.Close()
			out, err := os.Create(copied)
			require.NoError(t, err)
			_, err = io.Copy(out, in)
			require.NoError(t, err)
			require.NoError(t, out.Close())
		}, func() {
			require.NoError(t, os.Remove(copied))
		})
	})
}

// rlXDSEnv is their configXdsProvider: limits from the xDS server at addr,
// as node init-test-node.
func rlXDSEnv(addr string) map[string]string {
	return map[string]string{
		"CONFIG_TYPE":                "GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_NODE_ID":    "init-test-node",
		"CONFIG_GRPC_XDS_SERVER_URL": addr,
	}
}

// rlXDSLimit is a RateLimitDescriptor of a key with a limit.
func rlXDSLimit(key string, unit rlsconfv3.RateLimitUnit, requestsPerUnit uint32) *rlsconfv3.RateLimitDescriptor {
	return &rlsconfv3.RateLimitDescriptor{Key: key, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: unit, RequestsPerUnit: requestsPerUnit}}
}

// initialXDSBasicConfig is their initialXdsBasicConfig: basic.yaml and
// another.yaml as RateLimitConfig resources.
func initialXDSBasicConfig() []*rlsconfv3.RateLimitConfig {
	return []*rlsconfv3.RateLimitConfig{
		{Name: "basic", Domain: "basic", Descriptors: []*rlsconfv3.RateLimitDescriptor{
			rlXDSLimit("key1", rlsconfv3.RateLimitUnit_SECOND, 50),
			rlXDSLimit("key1_local", rlsconfv3.RateLimitUnit_SECOND, 50),
			rlXDSLimit("one_per_minute", rlsconfv3.RateLimitUnit_MINUTE, 1),
		}},
		{Name: "another", Domain: "another", Descriptors: []*rlsconfv3.RateLimitDescriptor{
			rlXDSLimit("key2", rlsconfv3.RateLimitUnit_MINUTE, 20),
			rlXDSLimit("key3", rlsconfv3.RateLimitUnit_HOUR, 10),
			rlXDSLimit("key2_local", rlsconfv3.RateLimitUnit_MINUTE, 20),
			rlXDSLimit("key3_local", rlsconfv3.RateLimitUnit_HOUR, 10),
			rlXDSLimit("key4", rlsconfv3.RateLimitUnit_DAY, 20),
			rlXDSLimit("key4_local", rlsconfv3.RateLimitUnit_DAY, 20),
		}},
	}
}

// TestRLXdsProviderBasicConfig is their TestXdsProviderBasicConfig: the
// basic expectations with the limits from an xDS server. The four
// variants share the server; each has a Redis of its own.
func TestRLXdsProviderBasicConfig(t *testing.T) {
	t.Parallel()
	xs := xdstest.Start(t, nil)
	xs.Set("init-test-node", "1", initialXDSBasicConfig()...)
	root := rlRuntimeRoot(t, false)
	runVariants(t, rlAuthVariants(), func(t *testing.T, v rlVariant) {
		main := redistest.Standalone(t)
		env := with(rlDefaultEnv(root, main.Addr(), main.Addr()), flatten(v.env)...)
		env = with(env, flatten(rlXDSEnv(xs.Addr()))...)
		testRLBasicConfig(t, startRLServer(t, env), v)
	})
}

// TestRLXdsProviderBasicConfigReload is their
// TestXdsProviderBasicConfigReload: a snapshot with the domain reload, then
// the first snapshot again.
func TestRLXdsProviderBasicConfigReload(t *testing.T) {
	t.Parallel()
	xs := xdstest.Start(t, nil)
	xs.Set("init-test-node", "1", initialXDSBasicConfig()...)
	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""), flatten(rlXDSEnv(xs.Addr()))...)
	s := startRLServer(t, env)
	testRLConfigReload(t, s, func() {
		xs.Set("init-test-node", "2", append(initialXDSBasicConfig(), &rlsconfv3.RateLimitConfig{
			Name: "reload", Domain: "reload", Descriptors: []*rlsconfv3.RateLimitDescriptor{
				rlXDSLimit("key1", rlsconfv3.RateLimitUnit_SECOND, 50),
				rlXDSLimit("block", rlsconfv3.RateLimitUnit_SECOND, 0),
				rlXDSLimit("one_per_minute", rlsconfv3.RateLimitUnit_MINUTE, 1),
			},
		})...)
	}, func() {
		xs.Set("init-test-node", "3", initialXDSBasicConfig()...)
	})
}

// TestRLShareThreshold is their TestShareThreshold: values that match
// files/* with share_threshold count in one limit; those of
// files_no_share/* each in their own.
func TestRLShareThreshold(t *testing.T) {
	t.Parallel()
	s := startRLServer(t, rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""))
	const domain = "share-threshold-test"

	awayFromBoundary(time.Hour, 3*time.Second)
	for i := range 10 {
		c := s.call(t, rlRequest(domain, [][][2]string{{{"files", "files/a.pdf"}}}, 1))
		assert.Contains(t, []rlsv3.RateLimitResponse_Code{rlOK, rlOver}, c.resp.GetOverallCode(), "request %d", i+1)
	}
	c := s.call(t, rlRequest(domain, [][][2]string{{{"files", "files/b.csv"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOver,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(rlOver, 10, rlHour, 0)},
	}, c, "files/b.csv shares the threshold of files/a.pdf")

	base := time.Now().UnixNano()
	for range 10 {
		value := fmt.Sprintf("files_no_share/%d-%d", base, rand.Int64())
		c := s.call(t, rlRequest(domain, [][][2]string{{{"files_no_share", value}}}, 1))
		assertRL(t, &rlsv3.RateLimitResponse{
			OverallCode: rlOK,
			Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(rlOK, 10, rlHour, 9)},
		}, c, "%s has a threshold of its own", value)
	}
}

// TestRLBasicConfigExtraTags is their TestBasicConfig_ExtraTags. Their
// counters carry EXTRA_TAGS as tags; ratewarden has no statsd, does not
// read EXTRA_TAGS (it says so at start), and counts the same in series
// without them.
func TestRLBasicConfigExtraTags(t *testing.T) {
	t.Parallel()
	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""),
		"EXTRA_TAGS", "foo:bar,a:b", "RLS_LOG_LEVEL", "info")
	s := startRLServer(t, env)
	s.call(t, rlRequest("basic", [][][2]string{{{"key1", "foo"}}}, 1))
	m := s.rlMetrics(t)
	assert.Equal(t, 1.0, m.of(metrics.RatelimitTotalHits, `domain="basic",key1="key1"`))
	assert.Equal(t, 1.0, m[metrics.RatelimitConfigLoadSuccess])
	assert.Contains(t, s.Output(), `msg="envoyproxy/ratelimit variable ignored" variables=EXTRA_TAGS`)
}

// rlGRPCClientTLS returns a TLS configuration that trusts caFile, with the
// client certificate of certFile and keyFile when they are given.
func rlGRPCClientTLS(t *testing.T, caFile, certFile, keyFile string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	c := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// TestRLMutualTLS is their Test_mTLS: gRPC over mutual TLS
// (GRPC_SERVER_USE_TLS, GRPC_CLIENT_TLS_CACERT) with GRPC_CLIENT_TLS_SAN
// localhost, against a Redis over TLS with a password. They only dial,
// with a client certificate for localhost; here that client is answered,
// and clients whose certificate is not for localhost, or who have none,
// are not.
func TestRLMutualTLS(t *testing.T) {
	t.Parallel()
	redisCerts, grpcCerts := redistest.NewCerts(t), redistest.NewCerts(t)
	rds := redistest.StandaloneTLS(t, redisCerts.Server(false))
	requirePassword(t, rds)
	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), rds.TLSAddr(), rds.TLSAddr()),
		"REDIS_AUTH", rlRedisPassword, "REDIS_TLS", "true", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false",
		"REDIS_PERSECOND_AUTH", rlRedisPassword, "REDIS_PERSECOND_TLS", "true", "REDIS_TLS_CACERT", redisCerts.CAFile,
		"GRPC_SERVER_USE_TLS", "true",
		"GRPC_SERVER_TLS_CERT", grpcCerts.ServerCertFile, "GRPC_SERVER_TLS_KEY", grpcCerts.ServerKeyFile,
		"GRPC_CLIENT_TLS_CACERT", grpcCerts.CAFile, "GRPC_CLIENT_TLS_SAN", "localhost",
		"PROMETHEUS_ADDR", "127.0.0.1:0")

	// The peer certificate is for localhost; the client one has no name.
	forLocalhost := rlGRPCClientTLS(t, grpcCerts.CAFile, grpcCerts.PeerCertFile, grpcCerts.PeerKeyFile)
	srv := startServerWith(t, "", env, credentials.NewTLS(forLocalhost))
	c := rlServer{serverProcess: srv}.call(t, rlRequest("basic", [][][2]string{{{"key1", "foo"}}}, 1))
	assertRL(t, &rlsv3.RateLimitResponse{
		OverallCode: rlOK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{rlStatus(rlOK, 50, rlSecond, 49)},
	}, c)

	for _, refused := range []struct {
		what string
		tls  *tls.Config
	}{
		{"a certificate of the CA without the name", rlGRPCClientTLS(t, grpcCerts.CAFile, grpcCerts.ClientCertFile, grpcCerts.ClientKeyFile)},
		{"no certificate", rlGRPCClientTLS(t, grpcCerts.CAFile, "", "")},
	} {
		conn, err := grpc.NewClient(srv.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(refused.tls)))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, rlRequest("basic", [][][2]string{{{"key1", "foo"}}}, 1))
		cancel()
		conn.Close()
		assert.Error(t, err, "a client with %s is refused", refused.what)
	}
}

// TestRLReloadGRPCServerCerts is their TestReloadGRPCServerCerts: the
// certificate and key files of GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY
// are replaced, and within ten seconds new connections get the new
// certificate.
func TestRLReloadGRPCServerCerts(t *testing.T) {
	t.Parallel()
	initial, next := redistest.NewCerts(t), redistest.NewCerts(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, data, 0o600))
	}
	copyFile(initial.ServerCertFile, certFile)
	copyFile(initial.ServerKeyFile, keyFile)
	newCertFile, newKeyFile := filepath.Join(dir, "new-cert.pem"), filepath.Join(dir, "new-key.pem")
	copyFile(next.ServerCertFile, newCertFile)
	copyFile(next.ServerKeyFile, newKeyFile)

	env := with(rlDefaultEnv(rlRuntimeRoot(t, false), redistest.Standalone(t).Addr(), ""),
		"GRPC_SERVER_USE_TLS", "true", "GRPC_SERVER_TLS_CERT", certFile, "GRPC_SERVER_TLS_KEY", keyFile,
		"PROMETHEUS_ADDR", "127.0.0.1:0")
	srv := startServerWith(t, "", env, credentials.NewTLS(rlGRPCClientTLS(t, initial.CAFile, "", "")))
	initialTLS := rlGRPCClientTLS(t, initial.CAFile, "", "")
	newTLS := rlGRPCClientTLS(t, next.CAFile, "", "")
	dial := func(c *tls.Config) error {
		conn, err := tls.Dial("tcp", srv.GRPCAddr, c)
		if err == nil {
			conn.Close()
		}
		return err
	}

	assert.NoError(t, dial(initialTLS), "WithInitialCert")
	assert.Error(t, dial(newTLS), "WithNewCertFail")

	require.NoError(t, os.Rename(newCertFile, certFile))
	require.NoError(t, os.Rename(newKeyFile, keyFile))

	assert.Eventually(t, func() bool { return dial(newTLS) == nil }, 10*time.Second, 100*time.Millisecond, "WithNewCertOK")
	assert.Error(t, dial(initialTLS), "WithInitialCertFail")
}
