package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The conversions of envoyproxy/ratelimit's xDS variables, CONFIG_GRPC_XDS_*
// and XDS_CLIENT_*, into the RLS_XDS_* settings (xds.go). Like
// envoyproxy/ratelimit, they are read only when the limits come from an xDS
// server, CONFIG_TYPE=GRPC_XDS_SOTW (or RLS_CONFIG_SOURCE=xds), and reported
// as ignored otherwise.

// fromXDS reports whether the limits come from an xDS server. When they do
// not, it reports the row's variables that are set as ignored.
func (c *compatContext) fromXDS() bool {
	if c.s.configFromXDS() {
		return true
	}
	c.ignore("the limits come from files: CONFIG_TYPE is not GRPC_XDS_SOTW")
	return false
}

func applyXDSServer(c *compatContext) error {
	if !c.fromXDS() {
		return nil
	}
	if err := applyString("CONFIG_GRPC_XDS_SERVER_URL", "RLS_XDS_SERVER_URL", func(s *Settings, v string) { s.XDSServerURL = v })(c); err != nil {
		return err
	}
	if err := applyString("CONFIG_GRPC_XDS_NODE_ID", "RLS_XDS_NODE_ID", func(s *Settings, v string) { s.XDSNodeID = v })(c); err != nil {
		return err
	}
	if v, ok := c.get("CONFIG_GRPC_XDS_NODE_METADATA"); ok {
		kept, dropped := theirNodeMetadata(v)
		if len(kept) > 0 {
			metadata := strings.Join(kept, ",")
			c.setFrom([]string{"CONFIG_GRPC_XDS_NODE_METADATA"}, "RLS_XDS_NODE_METADATA", metadata, func() { c.s.XDSNodeMetadata = metadata })
		}
		if len(dropped) > 0 {
			c.ignore(fmt.Sprintf("entries that are not key=value are dropped, as envoyproxy/ratelimit drops them: %q", dropped), "CONFIG_GRPC_XDS_NODE_METADATA")
		}
	}
	if v, ok := c.get("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"); ok {
		headers, shown, err := theirHeaders(v)
		if err != nil {
			return err
		}
		if len(headers) > 0 {
			c.setFrom([]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}, "RLS_XDS_HEADERS", shown, func() { c.s.XDSHeaders = headers })
		}
	}
	return nil
}

// theirNodeMetadata splits CONFIG_GRPC_XDS_NODE_METADATA as
// envoyproxy/ratelimit does: entries separated by commas, each key=value,
// the value running to the next comma. It returns the entries that are
// key=value, which RLS_XDS_NODE_METADATA takes as they are, and those that
// are not, which envoyproxy/ratelimit drops without a word. Empty entries
// are neither.
func theirNodeMetadata(v string) (kept, dropped []string) {
	for _, entry := range strings.Split(v, ",") {
		if entry == "" {
			continue
		}
		if k, _, ok := strings.Cut(entry, "="); !ok || strings.TrimSpace(k) == "" {
			dropped = append(dropped, entry)
			continue
		}
		kept = append(kept, entry)
	}
	return kept, dropped
}

// theirHeaders reads CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS as
// envoyproxy/ratelimit's envconfig reads a map: key:value pairs separated by
// commas, where neither may hold a ':'. It also returns the headers as the
// log may show them, without their values, which may be credentials.
func theirHeaders(v string) (map[string]string, string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, "", nil
	}
	headers := make(map[string]string)
	var shown []string
	for i, pair := range strings.Split(v, ",") {
		kv := strings.Split(pair, ":")
		if len(kv) != 2 {
			// The pair may hold a credential: name it by its place.
			return nil, "", fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: entry %d is not key:value", i+1)
		}
		headers[kv[0]] = kv[1]
		shown = append(shown, kv[0]+":[redacted]")
	}
	return headers, strings.Join(shown, ","), nil
}

func applyXDSTLS(c *compatContext) error {
	if !c.fromXDS() {
		return nil
	}
	on, err := c.theirBool("CONFIG_GRPC_XDS_SERVER_USE_TLS")
	if err != nil {
		return err
	}
	if !on {
		c.ignore("CONFIG_GRPC_XDS_SERVER_USE_TLS is not true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN")
		return nil
	}
	c.setFrom([]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS"}, "RLS_XDS_TLS", "true", func() { c.s.XDSTls = true })
	for _, f := range []struct {
		theirs, ours string
		field        *string
	}{
		{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "RLS_XDS_TLS_CERT_FILE", &c.s.XDSTlsCertFile},
		{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "RLS_XDS_TLS_KEY_FILE", &c.s.XDSTlsKeyFile},
		{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "RLS_XDS_TLS_CA_FILE", &c.s.XDSTlsCaFile},
		{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "RLS_XDS_TLS_SERVER_NAME", &c.s.XDSTlsServerName},
	} {
		if v, _ := c.get(f.theirs); v != "" {
			c.setFrom([]string{f.theirs}, f.ours, v, func() { *f.field = v })
		}
	}
	return nil
}

func applyXDSBackoff(c *compatContext) error {
	if !c.fromXDS() {
		return nil
	}
	for _, d := range []struct {
		theirs, ours string
		field        *time.Duration
	}{
		{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "RLS_XDS_BACKOFF_INITIAL_INTERVAL", &c.s.XDSBackoffInitialInterval},
		{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "RLS_XDS_BACKOFF_MAX_INTERVAL", &c.s.XDSBackoffMaxInterval},
	} {
		v, ok := c.get(d.theirs)
		if !ok {
			continue
		}
		interval, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s %q is not a duration such as 10s", d.theirs, v)
		}
		c.setFrom([]string{d.theirs}, d.ours, v, func() { *d.field = interval })
	}
	if v, ok := c.get("XDS_CLIENT_BACKOFF_RANDOM_FACTOR"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("XDS_CLIENT_BACKOFF_RANDOM_FACTOR %q is not a number", v)
		}
		if f >= 0 && f <= 1 {
			c.setFrom([]string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR"}, "RLS_XDS_BACKOFF_RANDOM_FACTOR", v, func() { c.s.XDSBackoffRandomFactor = f })
		} else {
			c.ignore("the waits double after each failure; the random factor, their spread, is in [0, 1]", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR")
		}
	}
	return applyBool("XDS_CLIENT_BACKOFF_JITTER", "RLS_XDS_BACKOFF_JITTER", func(s *Settings, b bool) { s.XDSBackoffJitter = b })(c)
}

func applyXDSMaxMessage(c *compatContext) error {
	if !c.fromXDS() {
		return nil
	}
	const name = "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"
	v, ok := c.get(name)
	if !ok {
		return nil
	}
	n := 0
	if strings.TrimSpace(v) != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			return fmt.Errorf("%s %q is not a size in bytes", name, v)
		}
	}
	if n == 0 {
		c.builtIn("gRPC's default of 4 MiB is RLS_XDS_MAX_MESSAGE_BYTES's", name)
		return nil
	}
	c.setFrom([]string{name}, "RLS_XDS_MAX_MESSAGE_BYTES", v, func() { c.s.XDSMaxMessageBytes = n })
	return nil
}
