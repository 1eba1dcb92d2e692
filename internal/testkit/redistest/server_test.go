package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/testkit/proc"
)

func TestStandaloneConfiguration(t *testing.T) {
	s := Standalone(t)
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", s.Port()), s.Addr())
	ctx := context.Background()
	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	assert.Equal(t, "v", c.Get(ctx, "k").Val())

	want := map[string]string{
		"save":             "",
		"appendonly":       "no",
		"maxmemory-policy": "noeviction",
		"protected-mode":   "no",
		"bind":             "127.0.0.1",
		"dir":              s.Dir(),
	}
	for name, value := range want {
		got, err := c.ConfigGet(ctx, name).Result()
		require.NoError(t, err, name)
		assert.Equal(t, value, got[name], name)
	}
	version, _, _ := strings.Cut(infoField(t, s, "server", "redis_version"), ".")
	if major, err := strconv.Atoi(version); err == nil && major >= 7 {
		assert.NoError(t, c.Do(ctx, "DEBUG", "SLEEP", "0").Err(), "DEBUG is enabled")
	}
	assert.FileExists(t, s.Dir()+"/redis.log")
}

func TestServerStopStart(t *testing.T) {
	s := Standalone(t)
	ctx := context.Background()
	c := s.Client(t)
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	port := s.Port()

	s.Stop()
	assert.False(t, s.Running())
	assert.Error(t, pingAny(s.Addr()), "a stopped server does not answer")
	s.Stop() // stopping twice is harmless

	require.NoError(t, s.Start())
	assert.True(t, s.Running())
	assert.Equal(t, port, s.Port())
	assert.Error(t, s.Start(), "a running server cannot start again")
	require.NoError(t, c.Ping(ctx).Err(), "the client reconnects")
	assert.Equal(t, redis.Nil, c.Get(ctx, "k").Err(), "nothing is persisted")
}

func TestServerKill(t *testing.T) {
	s := Standalone(t)
	s.Kill()
	assert.False(t, s.Running())
	assert.Error(t, pingAny(s.Addr()))
	require.NoError(t, s.Start())
	assert.NoError(t, pingAny(s.Addr()))
}

func TestServerPauseResume(t *testing.T) {
	s := Standalone(t)
	c := s.Client(t)
	require.NoError(t, c.Ping(context.Background()).Err())

	s.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.Error(t, pingAny(s.Addr()), "a paused server does not answer")
	assert.Error(t, c.Ping(ctx).Err())

	s.Resume()
	require.NoError(t, c.Ping(context.Background()).Err())

	s.Pause()
	s.Stop() // a paused server still stops
	assert.False(t, s.Running())
}

func TestStartFailureShowsLog(t *testing.T) {
	_, err := proc.StartRedis(proc.RedisConfig{Directives: []string{"no-such-directive yes"}})
	if errors.Is(err, proc.ErrNotInstalled) {
		startFailed(t, os.LookupEnv, "standalone server", err)
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-directive", "the error quotes the server's complaint")
}

func TestStartOnTakenPort(t *testing.T) {
	// A port that another server holds makes the new one exit with "already
	// in use"; the other server's answers must not pass for the new one's.
	// A port given in the configuration stays taken, so every new try fails.
	blocker := Standalone(t)
	_, err := proc.StartRedis(proc.RedisConfig{Directives: []string{fmt.Sprintf("port %d", blocker.Port())}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "already in use")
	assert.NoError(t, pingAny(blocker.Addr()), "the other server still serves")
}

// pingAny checks that some server answers PING on addr.
func pingAny(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	return c.Ping(context.Background()).Err()
}

func TestSharedStandalone(t *testing.T) {
	a := SharedStandalone(t)
	b := SharedStandalone(t)
	assert.Same(t, a, b)
	assert.NoError(t, a.Client(t).Ping(context.Background()).Err())
}

func TestStandaloneTLS(t *testing.T) {
	certs := NewCerts(t)
	s := StandaloneTLS(t, certs.Server(true))
	require.NotEmpty(t, s.TLSAddr())

	pem, err := os.ReadFile(certs.CAFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pem))
	clientCert, err := tls.LoadX509KeyPair(certs.ClientCertFile, certs.ClientKeyFile)
	require.NoError(t, err)

	ctx := context.Background()
	c := redis.NewClient(&redis.Options{
		Addr:            s.TLSAddr(),
		DisableIdentity: true,
		MaxRetries:      -1,
		TLSConfig:       &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12},
	})
	defer c.Close()
	require.NoError(t, c.Ping(ctx).Err())

	noCert := redis.NewClient(&redis.Options{
		Addr:            s.TLSAddr(),
		DisableIdentity: true,
		MaxRetries:      -1,
		TLSConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	})
	defer noCert.Close()
	assert.Error(t, noCert.Ping(ctx).Err(), "the server demands a client certificate")
}

// recordingTB stands in for a test in startFailed: it records Skip and
// Fatal and ends the goroutine, as the real ones do.
type recordingTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingBinary(t *testing.T) {
	tests := []struct {
		ci          string
		wantSkipped bool
		wantFailed  bool
	}{
		{ci: "", wantSkipped: true},
		{ci: "false", wantSkipped: true},
		{ci: "true", wantFailed: true},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"CI": tt.ci}
			lookup := func(name string) (string, bool) {
				v, ok := env[name]
				return v, ok
			}
			empty := t.TempDir() // the PATH, where no program is
			for install, start := range map[string]func(testing.TB){
				"apt-get install redis-server": func(t testing.TB) { startRedis(t, lookup, proc.RedisConfig{Path: empty}) },
				"apt-get install curl":         func(t testing.TB) { needProgram(t, lookup, empty, "curl", "apt-get install curl") },
			} {
				r := &recordingTB{}
				done := make(chan struct{})
				go func() {
					defer close(done)
					start(r)
				}()
				<-done
				assert.Equal(t, tt.wantSkipped, r.skipped)
				assert.Equal(t, tt.wantFailed, r.failed)
				assert.True(t, strings.Contains(r.msg, install), r.msg)
			}
		})
	}
}
