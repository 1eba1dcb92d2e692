// Package redisx is ratewarden's Redis backend: it builds the client for a
// standalone server, a Redis Cluster or a Sentinel-managed master (with TLS
// and ACL authentication), and runs the rate limit algorithms as Lua scripts
// on it.
package redisx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// clientName is the name ratewarden's connections carry in CLIENT LIST.
const clientName = "ratewarden"

// clusterMaxRedirects is how many MOVED/ASK redirects, and retries of a
// failing node, the cluster client makes for one command.
const clusterMaxRedirects = 3

// clusterStateReloadInterval is how old the cluster client's slot map may
// grow before it is reloaded in the background, failures or not.
const clusterStateReloadInterval = 10 * time.Second

// NewClient validates o and returns a client for the Redis it describes: a
// *redis.Client in standalone mode, a *redis.ClusterClient in cluster mode,
// or a failover *redis.Client that asks the Sentinels for the master in
// sentinel mode. It reads the TLS files but does not connect: the first
// command does. The client is safe for concurrent use; Close it when done.
//
// Besides o, the client is set up for a caller with a tight deadline on
// every command:
//   - it honours the context's deadline on every socket operation and on
//     the TLS handshake (go-redis ignores it by default);
//   - it dials once per attempt and retries at once, rather than after
//     go-redis's backoffs of 100ms between dials and 8ms or more between
//     retries, which would spend a whole budget on a dead server;
//   - it spends no round trip on connection setup beyond HELLO: it sends no
//     CLIENT SETINFO (which Redis before 7.2 rejects) and no
//     CLIENT MAINT_NOTIFICATIONS (a Redis Enterprise feature);
//   - it speaks RESP2, which every Redis since 2.6 understands and which
//     spares each command the check for RESP3 push messages that ratewarden
//     never asks for;
//   - in cluster mode it reloads the slot map as soon as a node fails to
//     answer, not only on MOVED: after a master dies no MOVED ever comes,
//     and go-redis would keep sending that master's slots to it until its
//     periodic reload, a minute by default (here every ten seconds too).
func NewClient(o Options) (redis.UniversalClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	tlsConfig, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	u := o.universal(tlsConfig)
	switch o.mode() {
	case ModeCluster:
		co := u.Cluster()
		co.MaxRetries = -1 // the cluster client's own loop retries
		co.MaxRedirects = clusterMaxRedirects
		co.ClusterStateReloadInterval = clusterStateReloadInterval
		c := redis.NewClusterClient(co)
		c.AddHook(reloadOnFailure{c})
		return c, nil
	case ModeSentinel:
		return redis.NewFailoverClient(u.Failover()), nil
	default:
		return redis.NewClient(u.Simple()), nil
	}
}

// universal translates o, with defaults applied, into go-redis options.
func (o Options) universal(tlsConfig *tls.Config) *redis.UniversalOptions {
	u := &redis.UniversalOptions{
		Addrs:      o.Addrs,
		ClientName: clientName,
		DB:         o.DB,
		Protocol:   2,

		Username:         o.Username,
		Password:         o.Password,
		MasterName:       o.SentinelMaster,
		SentinelUsername: o.SentinelUsername,
		SentinelPassword: o.SentinelPassword,

		DialTimeout:           orDefault(o.DialTimeout, DefaultDialTimeout),
		DialerRetries:         1,
		ReadTimeout:           o.ReplyTimeout(),
		WriteTimeout:          orDefault(o.WriteTimeout, DefaultWriteTimeout),
		ContextTimeoutEnabled: true,

		MaxRetries:      o.maxRetries(),
		MinRetryBackoff: -1,
		MaxRetryBackoff: -1,

		PoolSize:     o.PoolSize,
		MinIdleConns: o.MinIdleConns,

		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if tlsConfig != nil {
		u.TLSConfig = tlsConfig
		// go-redis dials TLS with tls.DialWithDialer, which ignores the
		// context: a server that accepts TCP but never finishes the handshake
		// would hold a request for the whole DialTimeout.
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: u.DialTimeout}, Config: tlsConfig}
		u.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
	}
	return u
}

// maxRetries returns MaxRetries in go-redis's terms, where -1 means none.
func (o Options) maxRetries() int {
	switch {
	case o.MaxRetries < 0:
		return -1
	case o.MaxRetries == 0:
		return DefaultMaxRetries
	default:
		return o.MaxRetries
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// tlsConfig builds the TLS configuration o asks for, or nil without TLS.
func (o Options) tlsConfig() (*tls.Config, error) {
	if !o.TLS {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         o.TLSServerName,
		InsecureSkipVerify: o.TLSInsecureSkipVerify, //nolint:gosec // documented as for tests only
	}
	if o.TLSCaFile != "" {
		pem, err := os.ReadFile(o.TLSCaFile)
		if err != nil {
			return nil, fmt.Errorf("redisx: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisx: TLS CA file %s holds no PEM certificate", o.TLSCaFile)
		}
		c.RootCAs = pool
	}
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("redisx: TLS client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if o.TLSSkipHostnameVerify && !o.TLSInsecureSkipVerify {
		// crypto/tls checks the chain and the name together, or neither:
		// turn its check off and do the chain's here.
		c.InsecureSkipVerify = true //nolint:gosec // the chain is verified below
		c.VerifyConnection = verifyChainOnly(c.RootCAs)
	}
	return c, nil
}

// verifyChainOnly returns a check that the server's certificate chains to
// roots (the system's when nil) for server authentication, whatever name it
// carries.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("redisx: the server presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("redisx: server certificate: %w", err)
		}
		return nil
	}
}

// reloadOnFailure makes a cluster client reload its slot map in the
// background when a command fails for want of an answer (a refused or broken
// connection, a timeout) or because the cluster is down: both happen while
// a master is failed over, and neither brings the MOVED reply that would
// otherwise tell the client. Reloads are coalesced by go-redis, at most one
// every 200ms.
type reloadOnFailure struct {
	c *redis.ClusterClient
}

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if topologyMayHaveChanged(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		changed := topologyMayHaveChanged(err)
		for _, cmd := range cmds {
			changed = changed || topologyMayHaveChanged(cmd.Err())
		}
		if changed {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// topologyMayHaveChanged reports whether err suggests that the node asked
// no longer serves the slot: no reply at all, or CLUSTERDOWN.
func topologyMayHaveChanged(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return strings.HasPrefix(reply.Error(), "CLUSTERDOWN")
	}
	return true
}
