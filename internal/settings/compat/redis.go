package compat

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/redisx"
)

// The conversions of envoyproxy/ratelimit's variables of its backends,
// BACKEND_TYPE, REDIS_* and MEMCACHE_*, and of its local cache, into the
// RLS_BACKEND, RLS_REDIS_* and RLS_DENY_CACHE* settings.

func applyBackendType(c *conversion) error {
	v, ok := c.get("BACKEND_TYPE")
	if !ok {
		return nil
	}
	switch v {
	case "redis", "":
		c.set("RLS_BACKEND", "redis")
		return nil
	case "memcache":
		return errors.New("BACKEND_TYPE is memcache, and ratewarden has no memcached backend; use redis")
	}
	return fmt.Errorf("BACKEND_TYPE %q is not redis or memcache", v)
}

func applySocketType(c *conversion) error {
	v, ok := c.get("REDIS_SOCKET_TYPE")
	if !ok {
		return nil
	}
	switch v {
	case "tcp":
		c.builtIn("Redis is reached over TCP", "REDIS_SOCKET_TYPE")
		return nil
	case "unix":
		if _, urlSet := c.get("REDIS_URL"); !urlSet {
			// Their default, with their default unix socket URL, which
			// nothing here uses.
			c.ignore("REDIS_URL is not set", "REDIS_SOCKET_TYPE")
			return nil
		}
		return errors.New("REDIS_SOCKET_TYPE is unix, and ratewarden reaches Redis over TCP only; use tcp and a host:port REDIS_URL")
	}
	return fmt.Errorf("REDIS_SOCKET_TYPE %q is not tcp or unix", v)
}

// redisTarget is what REDIS_TYPE and REDIS_URL say of where Redis is.
type redisTarget struct {
	mode       redisx.Mode
	addrs      []string
	master     string
	user, pass string
	auth       bool // user and pass came with a URL
	db         int
	dbSet      bool
	tls        bool
}

// parseRedisURL reads REDIS_URL as envoyproxy/ratelimit's REDIS_TYPE reads
// it: one address, a comma list for a cluster, or for Sentinel the master's
// name followed by the Sentinels. Each address is host:port or a
// redis:// (rediss:// for TLS) URL that may carry a user, a password and a
// database.
func parseRedisURL(typ, raw string) (redisTarget, error) {
	var t redisTarget
	switch strings.ToLower(typ) {
	case "", "single":
		t.mode = redisx.ModeStandalone
	case "cluster":
		t.mode = redisx.ModeCluster
	case "sentinel":
		t.mode = redisx.ModeSentinel
	default:
		return t, fmt.Errorf("REDIS_TYPE %q is not SINGLE, SENTINEL or CLUSTER", typ)
	}
	parts := strings.Split(raw, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	if t.mode == redisx.ModeSentinel {
		if len(parts) < 2 || parts[0] == "" {
			return t, errors.New("REDIS_URL: with REDIS_TYPE sentinel, want the master's name and the Sentinels: mymaster,host1:26379,host2:26379")
		}
		t.master, parts = parts[0], parts[1:]
	}
	for _, p := range parts {
		addr, err := t.address(p)
		if err != nil {
			return t, err
		}
		t.addrs = append(t.addrs, addr)
	}
	return t, nil
}

// address returns the host:port of one element of REDIS_URL, keeping what
// a URL says of the user, password, database and TLS.
func (t *redisTarget) address(p string) (string, error) {
	if !strings.HasPrefix(p, "redis://") && !strings.HasPrefix(p, "rediss://") {
		return p, nil
	}
	u, err := url.Parse(p)
	if err != nil {
		// The URL may hold a password: name the element by its place.
		return "", errors.New("REDIS_URL holds an element that is not a valid redis:// URL")
	}
	if u.Scheme == "rediss" {
		t.tls = true
	}
	if u.User != nil {
		t.auth = true
		t.user = u.User.Username()
		t.pass, _ = u.User.Password()
		if _, hasPass := u.User.Password(); !hasPass && t.user != "" {
			// redis://password@host: a password alone.
			t.user, t.pass = "", t.user
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil {
			return "", fmt.Errorf("REDIS_URL: database %q is not a number", db)
		}
		t.db, t.dbSet = n, true
	}
	return u.Host, nil
}

func applyRedisURL(c *conversion) error {
	typ, typeSet := c.get("REDIS_TYPE")
	raw, urlSet := c.get("REDIS_URL")
	if !typeSet && !urlSet {
		return nil
	}
	t, err := parseRedisURL(typ, raw)
	if err != nil {
		return err
	}
	mode := string(t.mode)
	c.set("RLS_REDIS_MODE", mode)
	if !urlSet {
		return nil
	}
	if _, backendSet := c.get("BACKEND_TYPE"); !backendSet {
		c.set("RLS_BACKEND", "redis")
	}
	c.set("RLS_REDIS_ADDRS", strings.Join(t.addrs, ","))
	if t.master != "" {
		c.set("RLS_REDIS_SENTINEL_MASTER", t.master)
	}
	if t.auth && !c.isSet("REDIS_AUTH") {
		if t.user != "" {
			c.set("RLS_REDIS_USERNAME", t.user)
		}
		c.set("RLS_REDIS_PASSWORD", t.pass)
	}
	if t.dbSet {
		c.set("RLS_REDIS_DB", strconv.Itoa(t.db))
	}
	if t.tls {
		c.set("RLS_REDIS_TLS", "true")
	}
	return nil
}

func applyRedisAuth(c *conversion) error {
	if v, ok := c.get("REDIS_AUTH"); ok && v != "" {
		user, pass, found := strings.Cut(v, ":")
		if !found {
			user, pass = "", v
		}
		if user != "" {
			c.set("RLS_REDIS_USERNAME", user)
		}
		c.set("RLS_REDIS_PASSWORD", pass)
	}
	if v, ok := c.get("REDIS_SENTINEL_AUTH"); ok && v != "" {
		user, pass, found := strings.Cut(v, ":")
		if !found {
			user, pass = "", v
		}
		if user != "" {
			c.set("RLS_REDIS_SENTINEL_USERNAME", user)
		}
		c.set("RLS_REDIS_SENTINEL_PASSWORD", pass)
	}
	return nil
}

func applyRedisTLS(c *conversion) error {
	on, err := c.theirBool("REDIS_TLS")
	if err != nil {
		return err
	}
	if !on {
		c.ignore("REDIS_TLS is not true", "REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
		return nil
	}
	c.set("RLS_REDIS_TLS", "true")
	skip, err := c.theirBool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")
	if err != nil {
		return err
	}
	if skip {
		c.set("RLS_REDIS_TLS_SKIP_HOSTNAME_VERIFY", "true")
	}
	for _, f := range []struct{ theirs, ours string }{
		{"REDIS_TLS_CACERT", "RLS_REDIS_TLS_CA_FILE"},
		{"REDIS_TLS_CLIENT_CERT", "RLS_REDIS_TLS_CERT_FILE"},
		{"REDIS_TLS_CLIENT_KEY", "RLS_REDIS_TLS_KEY_FILE"},
	} {
		if v, _ := c.get(f.theirs); v != "" {
			c.set(f.ours, v)
		}
	}
	return nil
}

func applyPerSecond(c *conversion) error {
	on, err := c.theirBool("REDIS_PERSECOND")
	if err != nil {
		return err
	}
	if on {
		c.ignore("one Redis, REDIS_URL's, holds every limit, per-second ones too", "REDIS_PERSECOND")
	} else {
		c.builtIn("one Redis holds every limit", "REDIS_PERSECOND")
	}
	c.ignore("one Redis holds every limit", prefixed["REDIS_PERSECOND_"]...)
	return nil
}

func applyMemcache(c *conversion) error {
	c.ignore("no memcached backend", prefixed["MEMCACHE_"]...)
	return nil
}

// prefixed lists, by prefix, the variables of envoyproxy/ratelimit
// that a row names as PREFIX*.
var prefixed = map[string][]string{
	"REDIS_PERSECOND_": {
		"REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE",
		"REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_SENTINEL_AUTH", "REDIS_PERSECOND_PIPELINE_WINDOW",
		"REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "REDIS_PERSECOND_TIMEOUT",
		"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "REDIS_PERSECOND_POOL_ON_EMPTY_WAIT_DURATION",
	},
	"MEMCACHE_": {
		"MEMCACHE_HOST_PORT", "MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS",
		"MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
	},
}

// denyCacheEntryBytes is what one remembered denial is taken to cost, to
// turn LOCAL_CACHE_SIZE_IN_BYTES into a number of entries.
const denyCacheEntryBytes = 256

func applyLocalCache(c *conversion) error {
	v, ok := c.get("LOCAL_CACHE_SIZE_IN_BYTES")
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("LOCAL_CACHE_SIZE_IN_BYTES %q is not a size in bytes", v)
	}
	if n == 0 {
		c.set("RLS_DENY_CACHE", "false")
		return nil
	}
	entries := max(1, n/denyCacheEntryBytes)
	c.set("RLS_DENY_CACHE", "true")
	c.set("RLS_DENY_CACHE_SIZE", strconv.Itoa(entries))
	return nil
}
