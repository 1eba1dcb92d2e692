package redisx_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

// newClient builds a client from o and closes it when the test ends.
func newClient(t *testing.T, o redisx.Options) redis.UniversalClient {
	t.Helper()
	c, err := redisx.NewClient(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually calls fn until it succeeds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, fn func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewClientStandalone(t *testing.T) {
	s := redistest.Standalone(t)
	c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}})
	require.IsType(t, &redis.Client{}, c)
	ctx := context.Background()

	require.NoError(t, c.Set(ctx, "k", "v", time.Minute).Err())
	v, err := s.Client(t).Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
	name, err := c.Do(ctx, "CLIENT", "GETNAME").Text()
	require.NoError(t, err)
	assert.Equal(t, "ratewarden", name)

	// Connection setup sends nothing the server rejects (CLIENT SETINFO is
	// unknown before Redis 7.2) and nothing beyond HELLO.
	admin := s.Client(t)
	errorstats, err := admin.Info(ctx, "errorstats").Result()
	require.NoError(t, err)
	assert.NotContains(t, errorstats, "errorstat_", "no command failed")
	commandstats, err := admin.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Contains(t, commandstats, "cmdstat_hello:")
	assert.NotContains(t, commandstats, "cmdstat_client|setinfo")
	assert.NotContains(t, commandstats, "maint_notifications")
}

func TestNewClientSelectsDB(t *testing.T) {
	s := redistest.Standalone(t)
	c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, DB: 5})
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "k", "in db 5", time.Minute).Err())
	keys, err := s.Client(t).Info(ctx, "keyspace").Result()
	require.NoError(t, err)
	assert.Contains(t, keys, "db5:keys=1")
	assert.NotContains(t, keys, "db0:")
}

func TestNewClientACL(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	admin := s.Client(t)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "limiter", "on", ">s3cret", "~ratewarden:*", "+@all").Err())

	tests := []struct {
		name     string
		username string
		password string
		wantUser string // ACL WHOAMI; empty when authentication must fail
		wantErr  string
	}{
		{name: "acl user", username: "limiter", password: "s3cret", wantUser: "limiter"},
		{name: "wrong password", username: "limiter", password: "guess", wantErr: "WRONGPASS"},
		{name: "unknown user", username: "nobody", password: "s3cret", wantErr: "WRONGPASS"},
		{name: "no credentials", wantUser: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, Username: tt.username, Password: tt.password})
			user, err := c.Do(ctx, "ACL", "WHOAMI").Text()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantUser, user)
		})
	}

	t.Run("acl user keeps to its keys", func(t *testing.T) {
		c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, Username: "limiter", Password: "s3cret"})
		assert.NoError(t, c.Set(ctx, "ratewarden:k", "v", time.Minute).Err())
		err := c.Set(ctx, "other:k", "v", time.Minute).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOPERM")
	})
}

func TestNewClientPasswordOnly(t *testing.T) {
	s := redistest.Standalone(t)
	ctx := context.Background()
	require.NoError(t, s.Client(t).ConfigSet(ctx, "requirepass", "pw").Err())

	c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, Password: "pw"})
	user, err := c.Do(ctx, "ACL", "WHOAMI").Text()
	require.NoError(t, err)
	assert.Equal(t, "default", user)

	anon := newClient(t, redisx.Options{Addrs: []string{s.Addr()}})
	err = anon.Ping(ctx).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOAUTH")
}

func TestNewClientHonoursDeadline(t *testing.T) {
	s := redistest.Standalone(t)
	// Long socket timeouts: only the context's deadline can end the wait.
	c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, DialTimeout: 10 * time.Second})
	require.NoError(t, c.Ping(context.Background()).Err(), "a pooled connection exists")

	s.Pause()
	defer s.Resume()
	for _, budget := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		begin := time.Now()
		err := c.Incr(ctx, "k").Err()
		elapsed := time.Since(begin)
		cancel()
		require.Error(t, err)
		assert.Less(t, elapsed, budget+500*time.Millisecond, "a stalled server costs the budget, not the socket timeout")
		t.Logf("budget %v: answered after %v: %v", budget, elapsed.Round(time.Millisecond), err)
	}

	// Without a deadline, ReadTimeout ends the wait, retries included.
	short := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, ReadTimeout: 100 * time.Millisecond})
	begin := time.Now()
	err := short.Ping(context.Background()).Err()
	elapsed := time.Since(begin)
	require.Error(t, err)
	assert.Less(t, elapsed, 3*time.Second)
	t.Logf("no deadline, ReadTimeout 100ms: answered after %v: %v", elapsed.Round(time.Millisecond), err)

	// Within a longer deadline too: ReadTimeout bounds each wait for a
	// reply (see DefaultReadTimeout).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	begin = time.Now()
	err = short.Ping(ctx).Err()
	elapsed = time.Since(begin)
	cancel()
	require.Error(t, err)
	assert.Less(t, elapsed, 3*time.Second)
	t.Logf("10s deadline, ReadTimeout 100ms: answered after %v: %v", elapsed.Round(time.Millisecond), err)

	s.Resume()
	assert.NoError(t, c.Ping(context.Background()).Err(), "the client recovers")
}

func TestNewClientSurvivesRestart(t *testing.T) {
	s := redistest.Standalone(t)
	c := newClient(t, redisx.Options{Addrs: []string{s.Addr()}, PoolSize: 1})
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err())

	s.Stop()
	ctx10, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := c.Ping(ctx10).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")
	assert.Less(t, time.Since(begin), 10*time.Millisecond, "a refused dial fails at once, without dial retries")

	// Once as many dials as PoolSize have failed, go-redis stops dialing on
	// the caller's time and probes the server once a second in the
	// background: the client comes back within about a second.
	require.NoError(t, s.Start())
	begin = time.Now()
	eventually(t, 5*time.Second, func(ctx context.Context) error { return c.Ping(ctx).Err() })
	t.Logf("client back %v after the server", time.Since(begin).Round(time.Millisecond))
}

func TestNewClientCluster(t *testing.T) {
	cl := redistest.NewCluster(t)
	c := newClient(t, redisx.Options{Addrs: cl.Addrs()[:1], Mode: redisx.ModeCluster})
	require.IsType(t, &redis.ClusterClient{}, c)
	ctx := context.Background()

	masters := make(map[*redistest.Server]bool)
	for i := range 30 {
		key := fmt.Sprintf("ratewarden:{limit%d}", i)
		require.NoError(t, c.Set(ctx, key, i, time.Minute).Err())
		m := cl.MasterForKey(t, key)
		masters[m] = true
		v, err := m.Client(t).Get(ctx, key).Int()
		require.NoError(t, err, "the key lives on the master of its slot")
		assert.Equal(t, i, v)
	}
	assert.Len(t, masters, 3, "keys spread over all masters")

	if testing.Short() {
		return
	}
	key := "ratewarden:{failover}"
	require.NoError(t, c.Set(ctx, key, "before", time.Minute).Err())
	old := cl.MasterForKey(t, key)
	require.NoError(t, old.Client(t).Do(ctx, "WAIT", 1, 5000).Err())
	promoted := cl.KillMaster(t, old)
	begin := time.Now()
	eventually(t, 30*time.Second, func(ctx context.Context) error {
		return c.Set(ctx, key, "after", time.Minute).Err()
	})
	recovered := time.Since(begin)
	t.Logf("client wrote to the promoted master %v after the failover completed", recovered.Round(time.Millisecond))
	assert.Less(t, recovered, 5*time.Second, "the client reloads the slot map when a node fails, not only every 10s")
	v, err := promoted.Client(t).Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "after", v)
}

func TestNewClientSentinel(t *testing.T) {
	st := redistest.Sentinel(t)
	c := newClient(t, redisx.Options{Addrs: st.SentinelAddrs(), Mode: redisx.ModeSentinel, SentinelMaster: st.MasterName()})
	require.IsType(t, &redis.Client{}, c)
	ctx := context.Background()

	require.NoError(t, c.Set(ctx, "k", "v", time.Minute).Err())
	v, err := st.Master().Client(t).Get(ctx, "k").Result()
	require.NoError(t, err, "the failover client writes to the master")
	assert.Equal(t, "v", v)

	if testing.Short() {
		return
	}
	next := st.KillMaster(t)
	begin := time.Now()
	eventually(t, 30*time.Second, func(ctx context.Context) error {
		return c.Set(ctx, "k", "after", time.Minute).Err()
	})
	t.Logf("client wrote to the new master %v after the failover completed", time.Since(begin).Round(time.Millisecond))
	v, err = next.Client(t).Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "after", v)
}

func TestNewClientTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	s := redistest.StandaloneTLS(t, certs.Server(true))
	ctx := context.Background()
	base := redisx.Options{
		Addrs:       []string{s.TLSAddr()},
		TLS:         true,
		TLSCaFile:   certs.CAFile,
		TLSCertFile: certs.ClientCertFile,
		TLSKeyFile:  certs.ClientKeyFile,
	}
	tests := []struct {
		name    string
		change  func(o *redisx.Options)
		wantErr []string // any of these; none means success
	}{
		{name: "verified, with client certificate"},
		{name: "server name from the certificate", change: func(o *redisx.Options) { o.TLSServerName = "localhost" }},
		{name: "unknown CA", change: func(o *redisx.Options) { o.TLSCaFile = "" }, wantErr: []string{"certificate signed by unknown authority"}},
		{name: "wrong server name", change: func(o *redisx.Options) { o.TLSServerName = "redis.example" }, wantErr: []string{"certificate is valid for localhost, not redis.example"}},
		{name: "insecure skips verification", change: func(o *redisx.Options) { o.TLSCaFile, o.TLSInsecureSkipVerify = "", true }},
		{name: "hostname skipped, chain verified", change: func(o *redisx.Options) { o.TLSServerName, o.TLSSkipHostnameVerify = "redis.example", true }},
		{name: "hostname skipped, unknown CA", change: func(o *redisx.Options) { o.TLSCaFile, o.TLSSkipHostnameVerify = "", true }, wantErr: []string{"certificate signed by unknown authority"}},
		// With TLS 1.3 the server rejects a missing client certificate after
		// the client's side of the handshake is done: the client learns it
		// from an alert or a reset on its first write or read.
		{name: "no client certificate", change: func(o *redisx.Options) { o.TLSCertFile, o.TLSKeyFile = "", "" }, wantErr: []string{"certificate required", "connection reset by peer", "EOF"}},
		{name: "plain TCP to the TLS port", change: func(o *redisx.Options) { o.TLS, o.TLSCaFile, o.TLSCertFile, o.TLSKeyFile = false, "", "", "" }, wantErr: []string{"connection reset by peer", "EOF"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			if tt.change != nil {
				tt.change(&o)
			}
			o.MaxRetries = -1
			c := newClient(t, o)
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			err := c.Set(ctx, "k", "v", time.Minute).Err()
			if len(tt.wantErr) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, slices.ContainsFunc(tt.wantErr, func(want string) bool { return strings.Contains(err.Error(), want) }),
				"error %q contains none of %q", err, tt.wantErr)
		})
	}
}

func TestNewClientTLSHandshakeHonoursDeadline(t *testing.T) {
	// A server that accepts TCP and never answers the TLS handshake.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	c := newClient(t, redisx.Options{Addrs: []string{l.Addr().String()}, TLS: true, TLSInsecureSkipVerify: true, DialTimeout: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err = c.Ping(ctx).Err()
	elapsed := time.Since(begin)
	require.Error(t, err)
	assert.Less(t, elapsed, time.Second, "the handshake ends with the context, not the dial timeout")
}

func TestNewClientErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	tests := []struct {
		name    string
		opts    redisx.Options
		wantErr string
	}{
		{name: "invalid options", opts: redisx.Options{Mode: redisx.ModeSentinel, Addrs: []string{"a:1"}}, wantErr: "redisx: mode sentinel needs a sentinel master name"},
		{name: "missing CA file", opts: redisx.Options{Addrs: []string{"a:1"}, TLS: true, TLSCaFile: filepath.Join(dir, "nope.pem")}, wantErr: "redisx: TLS CA file: open"},
		{name: "CA file without PEM", opts: redisx.Options{Addrs: []string{"a:1"}, TLS: true, TLSCaFile: notPEM}, wantErr: "holds no PEM certificate"},
		{name: "missing client certificate", opts: redisx.Options{Addrs: []string{"a:1"}, TLS: true, TLSCertFile: filepath.Join(dir, "c.pem"), TLSKeyFile: filepath.Join(dir, "k.pem")}, wantErr: "redisx: TLS client certificate:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := redisx.NewClient(tt.opts)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.False(t, strings.HasPrefix(err.Error(), "redisx: redisx:"))
			var pathErr *os.PathError
			if strings.Contains(tt.name, "missing") {
				assert.True(t, errors.As(err, &pathErr), "the cause is wrapped")
			}
		})
	}
}
