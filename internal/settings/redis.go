package settings

import (
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/redisx"
)

// Redis is how to reach Redis, read from RLS_REDIS_*: RLS_REDIS_ADDRS (a
// comma list), RLS_REDIS_SENTINEL_MASTER, RLS_REDIS_TLS_CA_FILE, and so on.
// Its fields are redisx.Options', which say what each means and own the
// defaults (redisx.DefaultOptions) and the rules (Options.Validate); a
// field added there is added here, or RedisOptions does not compile.
type Redis struct {
	Addrs                 []string      `split_words:"true" desc:"comma list of host:port: the server, any cluster nodes, or the Sentinels"`
	Mode                  redisx.Mode   `split_words:"true" desc:"standalone, cluster or sentinel"`
	SentinelMaster        string        `split_words:"true" desc:"name the Sentinels monitor the master under (sentinel mode)"`
	SentinelUsername      string        `split_words:"true" desc:"ACL user for the Sentinels, when they require one"`
	SentinelPassword      string        `split_words:"true" desc:"password for the Sentinels, when they require one"`
	Username              string        `split_words:"true" desc:"Redis ACL user"`
	Password              string        `split_words:"true" desc:"Redis password (of the ACL user, or requirepass)"`
	DB                    int           `split_words:"true" desc:"database number (standalone and sentinel mode)"`
	TLS                   bool          `split_words:"true" desc:"connect to Redis and the Sentinels over TLS 1.2+"`
	TLSCaFile             string        `split_words:"true" desc:"PEM CAs for server certificates; empty means the system roots"`
	TLSCertFile           string        `split_words:"true" desc:"PEM client certificate, for servers that demand one"`
	TLSKeyFile            string        `split_words:"true" desc:"PEM key of the client certificate"`
	TLSServerName         string        `split_words:"true" desc:"name every server certificate must carry; empty means the dialed host"`
	TLSInsecureSkipVerify bool          `split_words:"true" desc:"accept any server certificate (tests only)"`
	TLSSkipHostnameVerify bool          `split_words:"true" desc:"check that server certificates chain to the CAs, but not their name (servers whose certificates name no host they are reached by)"`
	PoolSize              int           `split_words:"true" desc:"connections per Redis server; 0 means go-redis default (10 per CPU; in cluster mode 5 per CPU per node)"`
	MinIdleConns          int           `split_words:"true" desc:"idle connections kept open ahead of need"`
	DialTimeout           time.Duration `split_words:"true" desc:"bound on dialing one connection when the request has no earlier deadline (0: 1s)"`
	ReadTimeout           time.Duration `split_words:"true" desc:"bound on reading one reply when the request has no earlier deadline (0: 500ms)"`
	WriteTimeout          time.Duration `split_words:"true" desc:"bound on writing one command when the request has no earlier deadline (0: 500ms)"`
	MaxRetries            int           `split_words:"true" desc:"retries of a command that certainly did not run: no connection, or refused by a server that is loading or failing over (0: 1, negative: none); a script that may have run is never sent again"`
}

// RedisOptions returns the redisx.Options the settings ask for.
func (s Settings) RedisOptions() redisx.Options { return redisx.Options(s.Redis) }

// LogValue presents r as redisx.Options do, with its passwords redacted.
func (r Redis) LogValue() slog.Value { return redisx.Options(r).LogValue() }

// String formats r as redisx.Options do, with its passwords redacted.
func (r Redis) String() string { return redisx.Options(r).String() }

// GoString formats r for %#v like String, so that no verb prints a
// password.
func (r Redis) GoString() string { return redisx.Options(r).GoString() }
