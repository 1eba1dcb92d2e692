package redisx

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Mode says how ratewarden reaches Redis.
type Mode string

// The modes. The zero Mode means ModeStandalone.
const (
	// ModeStandalone talks to one Redis server.
	ModeStandalone Mode = "standalone"
	// ModeCluster talks to a Redis Cluster, seeded with any of its nodes.
	ModeCluster Mode = "cluster"
	// ModeSentinel asks Redis Sentinels for the current master and talks to it.
	ModeSentinel Mode = "sentinel"
)

// Defaults for the Options fields whose zero value means "the default".
//
// Each request carries its budget (its caller's deadline less a reserve,
// often Envoy's 20ms) as the context's deadline; the client always honours
// that deadline, for dialing, writing, reading and waiting between
// retries, so no setting here can stretch a request past it. Within a
// longer budget, the timeouts below still bound each step: one dial, one
// write, and one wait for a pipeline's replies, which every request in
// that pipeline shares. A Redis that has not answered a pipeline within
// DefaultReadTimeout is stalled, not busy (a script runs in microseconds),
// and the requests behind it wait on the same connection; so a budget of
// seconds fails after the read timeout when Redis stalls, and the read
// timeout is what to raise for budgets that must outlast such a stall. The
// same timeouts bound the commands that run without a deadline (health
// checks, background connections) and keep a stalled server from holding
// a connection for go-redis's default of five seconds. The pool's wait
// for a connection is bounded by the budget and by go-redis's PoolTimeout
// (the read timeout plus a second); the pipelines in flight are far fewer
// than the pool's connections, so requests do not wait for one.
const (
	// DefaultDialTimeout bounds establishing one connection.
	DefaultDialTimeout = time.Second
	// DefaultReadTimeout bounds waiting for one reply.
	DefaultReadTimeout = 500 * time.Millisecond
	// DefaultWriteTimeout bounds writing one command.
	DefaultWriteTimeout = 500 * time.Millisecond
	// DefaultMaxRetries is one retry, at once, without backoff, of a
	// command that certainly did not run: one whose connection could not be
	// had (a refused dial, an exhausted pool), or that the server refused
	// before running it (LOADING, READONLY, MASTERDOWN, TRYAGAIN,
	// CLUSTERDOWN), as in the middle of a failover. It rides that out within
	// the same request; more retries would only spend the budget on a server
	// that is failing. A script whose reply was lost after it was written
	// (a read timeout, a connection broken mid-reply) may have run, and is
	// never sent again, whatever this says: a rate limiter that re-sent it
	// would count its hits twice.
	DefaultMaxRetries = 1
)

// Options describes how to reach Redis. The zero value of every field but
// Addrs means its documented default; the zero Options is not valid
// because it has no address. DefaultOptions has one.
type Options struct {
	// Addrs lists host:port addresses: the server in standalone mode, any
	// nodes of the cluster in cluster mode (the others are discovered), or
	// the Sentinels in sentinel mode.
	Addrs []string
	// Mode is standalone (the default), cluster or sentinel.
	Mode Mode

	// SentinelMaster is the name under which the Sentinels monitor the
	// master. Sentinel mode needs it.
	SentinelMaster string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels,
	// when they require it.
	SentinelUsername string
	SentinelPassword string

	// Username and Password authenticate to Redis: an ACL user and its
	// password, or only a password for the default user (requirepass).
	Username string
	Password string
	// DB selects a database in standalone and sentinel mode. A Redis Cluster
	// has only database 0.
	DB int

	// TLS makes every connection, to Redis and to the Sentinels, use TLS 1.2
	// or newer.
	TLS bool
	// TLSCaFile is a PEM file of the CAs that server certificates must chain
	// to; empty means the system's roots.
	TLSCaFile string
	// TLSCertFile and TLSKeyFile hold a PEM client certificate and its key,
	// for servers that demand one (tls-auth-clients). Both or neither.
	TLSCertFile string
	TLSKeyFile  string
	// TLSServerName is the name that every server certificate must carry;
	// empty means the host of the address dialed, which suits clusters and
	// Sentinels whose nodes have certificates of their own.
	TLSServerName string
	// TLSInsecureSkipVerify accepts any server certificate. For tests only.
	TLSInsecureSkipVerify bool
	// TLSSkipHostnameVerify checks that server certificates chain to the
	// CAs but not the name they carry, for servers whose certificates name
	// no host they are reached by (Google Cloud Memorystore, for one).
	TLSSkipHostnameVerify bool

	// PoolSize is the number of connections kept per server; 0 means
	// go-redis's default (10 per CPU, 5 per CPU and node in cluster mode).
	PoolSize int
	// MinIdleConns is the number of idle connections kept open ahead of
	// need, so that a burst does not pay for dialing; 0 means none.
	MinIdleConns int

	// DialTimeout, ReadTimeout and WriteTimeout bound dialing, reading a
	// reply and writing a command when the caller's context has no earlier
	// deadline; 0 means DefaultDialTimeout, DefaultReadTimeout and
	// DefaultWriteTimeout.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration

	// MaxRetries is how often a command that certainly did not run is sent
	// again (see DefaultMaxRetries) in standalone and sentinel mode: 0 means
	// DefaultMaxRetries, a negative number means never. A rate limit script
	// that may have run is never sent again. In cluster mode the cluster
	// client instead follows up to three MOVED/ASK redirects and sends
	// again within those attempts.
	MaxRetries int
}

// DefaultOptions returns the Options of a server that no setting changes:
// one Redis at localhost:6379.
func DefaultOptions() Options {
	return Options{Addrs: []string{"localhost:6379"}, Mode: ModeStandalone}
}

// ReplyTimeout returns how long the client waits for one reply when the
// caller's context has no earlier deadline: ReadTimeout, or
// DefaultReadTimeout when that is 0.
func (o Options) ReplyTimeout() time.Duration { return orDefault(o.ReadTimeout, DefaultReadTimeout) }

// mode returns o.Mode, with the zero Mode read as standalone.
func (o Options) mode() Mode {
	if o.Mode == "" {
		return ModeStandalone
	}
	return o.Mode
}

// Validate reports every problem with o, in plain words, or nil.
func (o Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("redisx: "+format, args...))
	}
	mode := o.mode()
	switch mode {
	case ModeStandalone, ModeCluster, ModeSentinel:
	default:
		add("unknown mode %q (want standalone, cluster or sentinel)", string(o.Mode))
	}

	if len(o.Addrs) == 0 {
		add("no Redis address")
	}
	for _, a := range o.Addrs {
		if err := checkAddr(a); err != nil {
			add("address %q: %v", a, err)
		}
	}
	if mode == ModeStandalone && len(o.Addrs) > 1 {
		add("mode standalone takes one address, got %d", len(o.Addrs))
	}

	if mode == ModeSentinel && o.SentinelMaster == "" {
		add("mode sentinel needs a sentinel master name")
	}
	if mode != ModeSentinel && (o.SentinelMaster != "" || o.SentinelUsername != "" || o.SentinelPassword != "") {
		add("sentinel settings need mode sentinel, not %s", mode)
	}

	if o.DB < 0 {
		add("DB %d is negative", o.DB)
	}
	if mode == ModeCluster && o.DB != 0 {
		add("mode cluster has only DB 0, got DB %d", o.DB)
	}

	if !o.TLS && (o.TLSCaFile != "" || o.TLSCertFile != "" || o.TLSKeyFile != "" || o.TLSServerName != "" || o.TLSInsecureSkipVerify || o.TLSSkipHostnameVerify) {
		add("TLS settings need TLS on")
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		add("a TLS client certificate needs both a cert file and a key file")
	}

	for _, f := range []struct {
		name  string
		value int64
	}{
		{"PoolSize", int64(o.PoolSize)},
		{"MinIdleConns", int64(o.MinIdleConns)},
		{"DialTimeout", int64(o.DialTimeout)},
		{"ReadTimeout", int64(o.ReadTimeout)},
		{"WriteTimeout", int64(o.WriteTimeout)},
	} {
		if f.value < 0 {
			add("%s is negative", f.name)
		}
	}
	return errors.Join(errs...)
}

// checkAddr checks that a is host:port with a port in 1..65535.
func checkAddr(a string) error {
	if strings.TrimSpace(a) != a {
		return errors.New("surrounding spaces")
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("no host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not in 1..65535", port)
	}
	return nil
}

// redacted stands in for a secret in String and LogValue.
const redacted = "[redacted]"

// LogValue presents o to log/slog with its passwords redacted.
func (o Options) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("mode", string(o.mode())),
		slog.Any("addrs", o.Addrs),
	}
	str := func(key, value string) {
		if value != "" {
			attrs = append(attrs, slog.String(key, value))
		}
	}
	secret := func(key, value string) {
		if value != "" {
			attrs = append(attrs, slog.String(key, redacted))
		}
	}
	str("sentinel_master", o.SentinelMaster)
	str("sentinel_username", o.SentinelUsername)
	secret("sentinel_password", o.SentinelPassword)
	str("username", o.Username)
	secret("password", o.Password)
	if o.DB != 0 {
		attrs = append(attrs, slog.Int("db", o.DB))
	}
	if o.TLS {
		attrs = append(attrs, slog.Bool("tls", true))
		str("tls_ca_file", o.TLSCaFile)
		str("tls_cert_file", o.TLSCertFile)
		str("tls_key_file", o.TLSKeyFile)
		str("tls_server_name", o.TLSServerName)
		if o.TLSInsecureSkipVerify {
			attrs = append(attrs, slog.Bool("tls_insecure_skip_verify", true))
		}
		if o.TLSSkipHostnameVerify {
			attrs = append(attrs, slog.Bool("tls_skip_hostname_verify", true))
		}
	}
	for _, n := range []struct {
		key   string
		value int
	}{{"pool_size", o.PoolSize}, {"min_idle_conns", o.MinIdleConns}, {"max_retries", o.MaxRetries}} {
		if n.value != 0 {
			attrs = append(attrs, slog.Int(n.key, n.value))
		}
	}
	for _, d := range []struct {
		key   string
		value time.Duration
	}{{"dial_timeout", o.DialTimeout}, {"read_timeout", o.ReadTimeout}, {"write_timeout", o.WriteTimeout}} {
		if d.value != 0 {
			attrs = append(attrs, slog.Duration(d.key, d.value))
		}
	}
	return slog.GroupValue(attrs...)
}

// String formats o as space-separated key=value pairs, with its passwords
// redacted; fields left at their zero value are omitted.
func (o Options) String() string {
	var b strings.Builder
	for i, a := range o.LogValue().Group() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value)
	}
	return b.String()
}

// GoString formats o for %#v like String, so that no verb prints a password.
func (o Options) GoString() string { return "redisx.Options{" + o.String() + "}" }
