package redisx_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/redisx"
)

func TestOptionsValidate(t *testing.T) {
	one := []string{"127.0.0.1:6379"}
	three := []string{"10.0.0.1:6379", "10.0.0.2:6379", "redis-3.example:6379"}
	tests := []struct {
		name    string
		opts    redisx.Options
		wantErr []string // substrings of the error; none means valid
	}{
		{name: "standalone by default", opts: redisx.Options{Addrs: one}},
		{name: "standalone", opts: redisx.Options{Addrs: []string{"localhost:6379"}, Mode: redisx.ModeStandalone, DB: 3, Username: "u", Password: "p"}},
		{name: "cluster", opts: redisx.Options{Addrs: three, Mode: redisx.ModeCluster}},
		{name: "sentinel", opts: redisx.Options{Addrs: three, Mode: redisx.ModeSentinel, SentinelMaster: "mymaster", SentinelPassword: "s"}},
		{name: "ipv6", opts: redisx.Options{Addrs: []string{"[::1]:6379"}}},
		{name: "tls", opts: redisx.Options{Addrs: one, TLS: true, TLSCaFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem", TLSServerName: "redis"}},
		{name: "timeouts", opts: redisx.Options{Addrs: one, DialTimeout: time.Second, ReadTimeout: time.Millisecond, MaxRetries: -1}},

		{name: "no address", opts: redisx.Options{}, wantErr: []string{"redisx: no Redis address"}},
		{name: "unknown mode", opts: redisx.Options{Addrs: one, Mode: "ring"}, wantErr: []string{`redisx: unknown mode "ring" (want standalone, cluster or sentinel)`}},
		{name: "mode is case sensitive", opts: redisx.Options{Addrs: one, Mode: "Cluster"}, wantErr: []string{`unknown mode "Cluster"`}},
		{name: "address without port", opts: redisx.Options{Addrs: []string{"localhost"}}, wantErr: []string{`redisx: address "localhost": want host:port`}},
		{name: "address with bad port", opts: redisx.Options{Addrs: []string{"localhost:70000"}}, wantErr: []string{`port "70000" is not in 1..65535`}},
		{name: "address without host", opts: redisx.Options{Addrs: []string{":6379"}}, wantErr: []string{`address ":6379": no host`}},
		{name: "address with spaces", opts: redisx.Options{Addrs: []string{"a:1", " b:2"}, Mode: redisx.ModeCluster}, wantErr: []string{`address " b:2": surrounding spaces`}},
		{name: "standalone with two addresses", opts: redisx.Options{Addrs: three[:2]}, wantErr: []string{"redisx: mode standalone takes one address, got 2"}},
		{name: "sentinel without master", opts: redisx.Options{Addrs: three, Mode: redisx.ModeSentinel}, wantErr: []string{"redisx: mode sentinel needs a sentinel master name"}},
		{name: "sentinel master without sentinel mode", opts: redisx.Options{Addrs: three, Mode: redisx.ModeCluster, SentinelMaster: "m"}, wantErr: []string{"redisx: sentinel settings need mode sentinel, not cluster"}},
		{name: "negative db", opts: redisx.Options{Addrs: one, DB: -1}, wantErr: []string{"redisx: DB -1 is negative"}},
		{name: "cluster with db", opts: redisx.Options{Addrs: three, Mode: redisx.ModeCluster, DB: 1}, wantErr: []string{"redisx: mode cluster has only DB 0, got DB 1"}},
		{name: "tls files without tls", opts: redisx.Options{Addrs: one, TLSCaFile: "ca.pem"}, wantErr: []string{"redisx: TLS settings need TLS on"}},
		{name: "hostname check without tls", opts: redisx.Options{Addrs: one, TLSSkipHostnameVerify: true}, wantErr: []string{"redisx: TLS settings need TLS on"}},
		{name: "insecure without tls", opts: redisx.Options{Addrs: one, TLSInsecureSkipVerify: true}, wantErr: []string{"redisx: TLS settings need TLS on"}},
		{name: "cert without key", opts: redisx.Options{Addrs: one, TLS: true, TLSCertFile: "c.pem"}, wantErr: []string{"redisx: a TLS client certificate needs both a cert file and a key file"}},
		{name: "negative pool", opts: redisx.Options{Addrs: one, PoolSize: -1}, wantErr: []string{"redisx: PoolSize is negative"}},
		{name: "negative timeout", opts: redisx.Options{Addrs: one, ReadTimeout: -time.Second}, wantErr: []string{"redisx: ReadTimeout is negative"}},
		{
			name:    "every problem at once",
			opts:    redisx.Options{Mode: redisx.ModeSentinel, DB: -2, MinIdleConns: -1},
			wantErr: []string{"no Redis address", "needs a sentinel master name", "DB -2 is negative", "MinIdleConns is negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.wantErr) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestOptionsNeverPrintPasswords(t *testing.T) {
	o := redisx.Options{
		Addrs:            []string{"10.0.0.1:26379"},
		Mode:             redisx.ModeSentinel,
		SentinelMaster:   "mymaster",
		SentinelUsername: "watcher",
		SentinelPassword: "sentinel-secret",
		Username:         "ratewarden",
		Password:         "redis-secret",
		TLS:              true,
		ReadTimeout:      20 * time.Millisecond,
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("redis", "options", o)
	var text bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("redis", "options", o)

	outputs := map[string]string{
		"String": o.String(),
		"%v":     fmt.Sprintf("%v", o),
		"%+v":    fmt.Sprintf("%+v", o),
		"%#v":    fmt.Sprintf("%#v", o),
		//lint:ignore S1025 the %s verb itself is under test.
		"%s":   fmt.Sprintf("%s", o),
		"&%v":  fmt.Sprintf("%v", &o),
		"json": logged.String(),
		"text": text.String(),
	}
	for name, out := range outputs {
		assert.NotContains(t, out, "redis-secret", name)
		assert.NotContains(t, out, "sentinel-secret", name)
		assert.Contains(t, out, "[redacted]", name)
		assert.Contains(t, out, "ratewarden", name, "the username is no secret")
		assert.Contains(t, out, "mymaster", name)
	}
	assert.Equal(t,
		"mode=sentinel addrs=[10.0.0.1:26379] sentinel_master=mymaster sentinel_username=watcher sentinel_password=[redacted] username=ratewarden password=[redacted] tls=true read_timeout=20ms",
		o.String())
	assert.Equal(t, "mode=standalone addrs=[127.0.0.1:6379]", redisx.Options{Addrs: []string{"127.0.0.1:6379"}}.String(),
		"no password, nothing redacted")
}
