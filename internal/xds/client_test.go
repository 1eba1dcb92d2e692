package xds_test

import (
	"context"
	"crypto/tls"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
	"github.com/ratewarden/ratewarden/internal/testkit/xdstest"
	"github.com/ratewarden/ratewarden/internal/xds"
)

// wait bounds every wait for the client; generous, since the machine may be
// busy.
const wait = 10 * time.Second

// testBackoff retries quickly.
var testBackoff = xds.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, RandomFactor: 0.5, Jitter: true}

// limitsOf returns a resource for domain with one descriptor key whose
// limit is n a minute.
func limitsOf(domain, key string, n uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: domain, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: key, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: n}},
	}}
}

// running is a Client running against a test server.
type running struct {
	client  *xds.Client
	updates chan config.Update
}

// run starts a client with opts (ServerURL, NodeID and Backoff filled in
// when empty) until the test ends.
func run(t *testing.T, srv *xdstest.Server, opts xds.Options) *running {
	t.Helper()
	if opts.ServerURL == "" {
		opts.ServerURL = srv.Addr()
	}
	if opts.NodeID == "" {
		opts.NodeID = "envoy-ratelimit"
	}
	if opts.Backoff == (xds.Backoff{}) {
		opts.Backoff = testBackoff
	}
	if opts.MaxMessageBytes == 0 {
		opts.MaxMessageBytes = 4 << 20
	}
	if opts.Config.DefaultAlgorithm == 0 {
		opts.Config.DefaultAlgorithm = algorithms.SlidingWindowCounter
	}
	c, err := xds.New(opts)
	require.NoError(t, err)
	r := &running{client: c, updates: make(chan config.Update, 1000)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, func(u config.Update) { r.updates <- u })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return r
}

// next returns the next update.
func (r *running) next(t *testing.T) config.Update {
	t.Helper()
	select {
	case u := <-r.updates:
		return u
	case <-time.After(wait):
		t.Fatal("no update from the client")
		return config.Update{}
	}
}

// limitOf returns the limit of the rule that matches key=v in domain.
func limitOf(t *testing.T, u config.Update, domain, key string) uint64 {
	t.Helper()
	require.NoError(t, u.Err)
	m, ok := u.Config.Match(domain, []rate.Entry{{Key: key, Value: "v"}})
	require.True(t, ok, "%s %s=v matches", domain, key)
	return m.Rule.Limits[0].Limit.Requests
}

// subscribed starts a server with version "1" of domain "a" (k: 10 a
// minute) and a client that has taken and acknowledged it.
func subscribed(t *testing.T) (*xdstest.Server, *running) {
	t.Helper()
	srv := xdstest.Start(t, nil)
	srv.Set("envoy-ratelimit", "1", limitsOf("a", "k", 10))
	r := run(t, srv, xds.Options{})
	require.NoError(t, r.next(t).Err)
	_, err := srv.WaitFor(wait, ack("1"))
	require.NoError(t, err)
	return srv, r
}

func ack(version string) func(xdstest.Request) bool {
	return func(r xdstest.Request) bool { return r.ACK(version) }
}

func TestBackoffDelay(t *testing.T) {
	b := xds.Backoff{Initial: time.Second, Max: 10 * time.Second}
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		assert.Equal(t, want, b.Delay(n, nil), "attempt %d", n)
	}
	assert.Equal(t, 10*time.Second, b.Delay(1000, nil), "no overflow")
	b.Jitter, b.RandomFactor = true, 0.5
	assert.Equal(t, time.Second, b.Delay(1, func() float64 { return 0 }), "2s, less half")
	assert.Equal(t, 2*time.Second, b.Delay(1, func() float64 { return 0.5 }))
	assert.Equal(t, 3*time.Second, b.Delay(1, func() float64 { return 0.999999999 }).Round(time.Millisecond), "2s, and half more")
	assert.Equal(t, 15*time.Second, b.Delay(9, func() float64 { return 0.999999999 }).Round(time.Millisecond), "the spread goes past Max")
	b.Jitter = false
	assert.Equal(t, 4*time.Second, b.Delay(2, func() float64 { panic("no jitter, no random number") }))

	for _, bad := range []xds.Backoff{{}, {Initial: time.Second}, {Initial: time.Second, Max: time.Second, RandomFactor: 1.5}} {
		assert.Error(t, bad.Validate(), "%+v", bad)
	}
}

// TestClientSubscribes: the client sends its node, metadata and headers,
// takes every new snapshot, and acknowledges each after handing it over.
func TestClientSubscribes(t *testing.T) {
	srv := xdstest.Start(t, nil)
	srv.Set("envoy-ratelimit", "1", limitsOf("a", "k", 10))
	r := run(t, srv, xds.Options{
		NodeMetadata: map[string]string{"cluster": "edge", "zone": "z1"},
		Headers:      map[string]string{"authorization": "Bearer t0ken", "x-tenant": "t1"},
	})

	u := r.next(t)
	assert.Equal(t, "1", u.Version)
	assert.EqualValues(t, 10, limitOf(t, u, "a", "k"))
	_, err := srv.WaitFor(wait, ack("1"))
	require.NoError(t, err)
	assert.True(t, r.client.Connected())

	first := srv.Requests()[0]
	assert.Equal(t, xds.TypeURL, first.TypeUrl)
	assert.Empty(t, first.VersionInfo, "nothing accepted yet")
	assert.Empty(t, first.ResourceNames, "every resource")
	assert.Equal(t, "envoy-ratelimit", first.Node.GetId())
	assert.Equal(t, "ratewarden", first.Node.GetUserAgentName())
	assert.Equal(t, map[string]any{"cluster": "edge", "zone": "z1"}, first.Node.GetMetadata().AsMap())
	assert.Equal(t, []string{"Bearer t0ken"}, first.Metadata.Get("authorization"))
	assert.Equal(t, []string{"t1"}, first.Metadata.Get("x-tenant"))

	srv.Set("envoy-ratelimit", "2", limitsOf("a", "k", 20), limitsOf("b", "k", 5))
	u = r.next(t)
	assert.Equal(t, "2", u.Version)
	assert.EqualValues(t, 20, limitOf(t, u, "a", "k"))
	assert.EqualValues(t, 5, limitOf(t, u, "b", "k"))
	_, err = srv.WaitFor(wait, ack("2"))
	require.NoError(t, err)

	srv.Set("envoy-ratelimit", "3")
	u = r.next(t)
	require.NoError(t, u.Err)
	assert.Empty(t, u.Config.Domains(), "a snapshot without resources is a configuration without limits")
	_, err = srv.WaitFor(wait, ack("3"))
	require.NoError(t, err)

	// Other nodes' snapshots are not this client's.
	srv.Set("someone-else", "9", limitsOf("c", "k", 1))
	srv.Set("envoy-ratelimit", "4", limitsOf("d", "k", 4))
	u = r.next(t)
	assert.Equal(t, "4", u.Version)
	assert.Equal(t, []string{"d"}, u.Config.Domains())
}

// TestClientIsASource: as a config.Source, a Client names the server and
// the node, and has no limits before the server's first response.
func TestClientIsASource(t *testing.T) {
	c, err := xds.New(xds.Options{ServerURL: "envoy-gateway:18001", NodeID: "envoy-ratelimit", Backoff: testBackoff, MaxMessageBytes: 1 << 20,
		Config: config.Options{DefaultAlgorithm: algorithms.FixedWindow}})
	require.NoError(t, err)
	assert.Equal(t, config.Origin{Name: "xDS server envoy-gateway:18001 (node envoy-ratelimit)", Resources: true}, c.Origin())
	cfg, err := c.Load(context.Background())
	assert.NoError(t, err)
	assert.Nil(t, cfg)
}

// TestClientRejectsInvalidResources: an invalid snapshot is NACKed with the
// error, naming the resource and field, while the version last accepted
// stays the one the client reports; a server that resends it at once is
// answered at the backoff's pace; a valid snapshot after it is taken.
func TestClientRejectsInvalidResources(t *testing.T) {
	srv := xdstest.Start(t, nil)
	srv.Set("envoy-ratelimit", "1", limitsOf("a", "k", 10))
	r := run(t, srv, xds.Options{Backoff: xds.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}})
	require.NoError(t, r.next(t).Err)
	_, err := srv.WaitFor(wait, ack("1"))
	require.NoError(t, err)

	bad := limitsOf("a", "k", 10)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	srv.Set("envoy-ratelimit", "2", limitsOf("b", "k", 1), bad)
	u := r.next(t)
	assert.Equal(t, "2", u.Version)
	assert.Nil(t, u.Config)
	const want = `xds: RateLimitConfig "a": descriptors[0].rate_limit.unit: invalid rate limit unit "UNKNOWN"`
	require.Error(t, u.Err)
	assert.True(t, strings.HasPrefix(u.Err.Error(), want), u.Err.Error())

	nack, err := srv.WaitFor(wait, xdstest.Request.NACK)
	require.NoError(t, err)
	assert.Equal(t, "1", nack.VersionInfo, "a NACK names the version still in force")
	assert.NotEmpty(t, nack.ResponseNonce)
	assert.EqualValues(t, 3, nack.ErrorDetail.GetCode(), "INVALID_ARGUMENT")
	assert.Equal(t, u.Err.Error(), nack.ErrorDetail.GetMessage())

	// go-control-plane's cache answers a NACK with the same snapshot at
	// once; without pacing, the two would exchange thousands of messages a
	// second. Over 1.5s the backoff (0.1s, 0.2s, 0.4s, 0.8s, …) allows few.
	time.Sleep(1500 * time.Millisecond)
	nacks := 0
	for _, req := range srv.Requests() {
		if req.NACK() {
			nacks++
		}
	}
	assert.GreaterOrEqual(t, nacks, 2, "the resent snapshot is rejected again")
	assert.LessOrEqual(t, nacks, 8, "rejections are paced")

	srv.Set("envoy-ratelimit", "3", limitsOf("a", "k", 30))
	for {
		u = r.next(t)
		if u.Version == "3" {
			break
		}
		require.Error(t, u.Err, "only version 2 is rejected")
	}
	assert.EqualValues(t, 30, limitOf(t, u, "a", "k"))
	_, err = srv.WaitFor(wait, ack("3"))
	require.NoError(t, err)
}

// TestClientReconnects: when the server dies, the client retries with
// backoff; when it is back, a new stream opens with the node and the version
// last accepted, and the server's new snapshot is taken.
func TestClientReconnects(t *testing.T) {
	srv, r := subscribed(t)

	srv.Stop()
	require.Eventually(t, func() bool { return !r.client.Connected() }, wait, 5*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // a few failed attempts
	before := len(srv.Requests())
	srv.Restart()
	srv.Set("envoy-ratelimit", "2", limitsOf("a", "k", 20))

	u := r.next(t)
	assert.Equal(t, "2", u.Version)
	assert.EqualValues(t, 20, limitOf(t, u, "a", "k"))
	_, err := srv.WaitFor(wait, ack("2"))
	require.NoError(t, err)
	assert.True(t, r.client.Connected())
	assert.Equal(t, 2, srv.Streams())

	reopened := srv.Requests()[before]
	assert.Equal(t, "1", reopened.VersionInfo, "the new stream starts from the version in force")
	assert.Equal(t, "envoy-ratelimit", reopened.Node.GetId())
	assert.Empty(t, reopened.ResponseNonce, "nonces belong to the old stream")
}

// TestClientReconnectsToRestartedServer: a management server that restarts
// numbers its snapshots from the start again (Envoy Gateway's counts from 1),
// so the version the client holds may name other limits there. The client
// reopens its stream with the version it holds, and takes what the server
// then sends, whatever its version.
func TestClientReconnectsToRestartedServer(t *testing.T) {
	srv, r := subscribed(t)

	srv.Stop()
	before := len(srv.Requests())
	srv.Set("envoy-ratelimit", "1", limitsOf("a", "k", 20))
	srv.Restart()
	u := r.next(t)
	assert.Equal(t, "1", u.Version)
	assert.EqualValues(t, 20, limitOf(t, u, "a", "k"))
	reqs := srv.Requests()
	require.Greater(t, len(reqs), before)
	assert.Equal(t, "1", reqs[before].VersionInfo)
	assert.Equal(t, 2, srv.Streams())
}

// TestClientMutualTLS: over mutual TLS, the client verifies the server's
// certificate and name and presents its own; without a client certificate,
// or with a server name the certificate does not carry, nothing is taken.
func TestClientMutualTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	serverTLS, cas := xdstest.MutualTLS(t, certs)
	srv := xdstest.Start(t, serverTLS)
	srv.Set("envoy-ratelimit", "1", limitsOf("a", "k", 10))
	clientCert, err := tls.LoadX509KeyPair(certs.ClientCertFile, certs.ClientKeyFile)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		tls    *tls.Config
		serves bool
	}{
		{"no client certificate", &tls.Config{RootCAs: cas}, false},
		{"wrong server name", &tls.Config{RootCAs: cas, Certificates: []tls.Certificate{clientCert}, ServerName: "ratelimit.example"}, false},
		{"unknown server CA", &tls.Config{Certificates: []tls.Certificate{clientCert}}, false},
		{"mutual TLS", &tls.Config{RootCAs: cas, Certificates: []tls.Certificate{clientCert}, ServerName: "localhost"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			r := run(t, srv, xds.Options{NodeID: "envoy-ratelimit", TLS: func() (*tls.Config, error) {
				calls.Add(1)
				return tc.tls.Clone(), nil
			}})
			if tc.serves {
				u := r.next(t)
				assert.EqualValues(t, 10, limitOf(t, u, "a", "k"))
				return
			}
			// Every attempt fails, and builds its TLS configuration anew.
			require.Eventually(t, func() bool { return calls.Load() >= 3 }, wait, 5*time.Millisecond)
			select {
			case u := <-r.updates:
				t.Fatalf("an update over a connection that should fail: %+v", u)
			default:
			}
			assert.False(t, r.client.Connected())
		})
	}
}

// TestNewRefusesBadOptions: New says which option is wrong.
func TestNewRefusesBadOptions(t *testing.T) {
	good := xds.Options{ServerURL: "localhost:18000", NodeID: "n", Backoff: testBackoff, MaxMessageBytes: 1,
		Config: config.Options{DefaultAlgorithm: algorithms.FixedWindow}}
	_, err := xds.New(good)
	require.NoError(t, err)
	for _, tc := range []struct {
		change func(*xds.Options)
		want   string
	}{
		{func(o *xds.Options) { o.ServerURL = "" }, "xds: the server URL must not be empty"},
		{func(o *xds.Options) { o.NodeID = "" }, "xds: the node id must not be empty"},
		{func(o *xds.Options) { o.Backoff.Initial = 0 }, "xds: backoff Initial must be positive, not 0s"},
		{func(o *xds.Options) { o.MaxMessageBytes = 0 }, "xds: the largest message must be positive, not 0"},
		{func(o *xds.Options) { o.Config.DefaultAlgorithm = 0 }, "xds: the limits need a default algorithm (Config.DefaultAlgorithm)"},
	} {
		o := good
		tc.change(&o)
		_, err := xds.New(o)
		assert.EqualError(t, err, tc.want)
	}
}
