package compat

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The conversions of envoyproxy/ratelimit's xDS variables, CONFIG_GRPC_XDS_*
// and XDS_CLIENT_*, into the RLS_XDS_* settings. Like
// envoyproxy/ratelimit, they are read only when the limits come from an xDS
// server, CONFIG_TYPE=GRPC_XDS_SOTW (or RLS_CONFIG_SOURCE=xds), and reported
// as ignored otherwise.

// limitsFromXDS reports whether the limits come from an xDS server, as
// RLS_CONFIG_SOURCE says so far: CONFIG_TYPE's row, before the xDS rows,
// gives it its value.
func (c *conversion) limitsFromXDS() bool { return c.target.Get("RLS_CONFIG_SOURCE") == "xds" }

// fromXDS reports whether the limits come from an xDS server. When they do
// not, it reports the row's variables that are set as ignored.
func (c *conversion) fromXDS() bool {
	if c.limitsFromXDS() {
		return true
	}
	c.ignore("the limits come from files: CONFIG_TYPE is not GRPC_XDS_SOTW")
	return false
}

func applyXDSServer(c *conversion) error {
	if !c.fromXDS() {
		return nil
	}
	c.copyString("CONFIG_GRPC_XDS_SERVER_URL", "RLS_XDS_SERVER_URL")
	c.copyString("CONFIG_GRPC_XDS_NODE_ID", "RLS_XDS_NODE_ID")
	if v, ok := c.get("CONFIG_GRPC_XDS_NODE_METADATA"); ok {
		kept, dropped := theirNodeMetadata(v)
		if len(kept) > 0 {
			metadata := strings.Join(kept, ",")
			c.setFrom([]string{"CONFIG_GRPC_XDS_NODE_METADATA"}, "RLS_XDS_NODE_METADATA", metadata)
		}
		if len(dropped) > 0 {
			c.ignore(fmt.Sprintf("entries that are not key=value are dropped, as envoyproxy/ratelimit drops them: %q", dropped), "CONFIG_GRPC_XDS_NODE_METADATA")
		}
	}
	if v, ok := c.get("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"); ok {
		shown, err := theirHeaders(v)
		if err != nil {
			return err
		}
		if shown != "" {
			c.assign([]string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}, "RLS_XDS_HEADERS", v, shown)
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

// theirHeaders checks CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS as
// envoyproxy/ratelimit's envconfig reads a map, which is also how
// RLS_XDS_HEADERS reads it: key:value pairs separated by commas, where
// neither may hold a ':'. It returns the headers as the log may show them,
// without their values, which may be credentials; blank is none.
func theirHeaders(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", nil
	}
	var shown []string
	for i, pair := range strings.Split(v, ",") {
		kv := strings.Split(pair, ":")
		if len(kv) != 2 {
			// The pair may hold a credential: name it by its place.
			return "", fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: entry %d is not key:value", i+1)
		}
		shown = append(shown, kv[0]+":[redacted]")
	}
	return strings.Join(shown, ","), nil
}

func applyXDSTLS(c *conversion) error {
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
	c.setFrom([]string{"CONFIG_GRPC_XDS_SERVER_USE_TLS"}, "RLS_XDS_TLS", "true")
	for _, f := range []struct{ theirs, ours string }{
		{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "RLS_XDS_TLS_CERT_FILE"},
		{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "RLS_XDS_TLS_KEY_FILE"},
		{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "RLS_XDS_TLS_CA_FILE"},
		{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "RLS_XDS_TLS_SERVER_NAME"},
	} {
		if v, _ := c.get(f.theirs); v != "" {
			c.setFrom([]string{f.theirs}, f.ours, v)
		}
	}
	return nil
}

func applyXDSBackoff(c *conversion) error {
	if !c.fromXDS() {
		return nil
	}
	for _, d := range []struct{ theirs, ours string }{
		{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "RLS_XDS_BACKOFF_INITIAL_INTERVAL"},
		{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "RLS_XDS_BACKOFF_MAX_INTERVAL"},
	} {
		v, ok := c.get(d.theirs)
		if !ok {
			continue
		}
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("%s %q is not a duration such as 10s", d.theirs, v)
		}
		c.setFrom([]string{d.theirs}, d.ours, v)
	}
	if v, ok := c.get("XDS_CLIENT_BACKOFF_RANDOM_FACTOR"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("XDS_CLIENT_BACKOFF_RANDOM_FACTOR %q is not a number", v)
		}
		if f >= 0 && f <= 1 {
			c.setFrom([]string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR"}, "RLS_XDS_BACKOFF_RANDOM_FACTOR", v)
		} else {
			c.ignore("the waits double after each failure; the random factor, their spread, is in [0, 1]", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR")
		}
	}
	return c.copyBool("XDS_CLIENT_BACKOFF_JITTER", "RLS_XDS_BACKOFF_JITTER")
}

func applyXDSMaxMessage(c *conversion) error {
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
	c.assign([]string{name}, "RLS_XDS_MAX_MESSAGE_BYTES", strconv.Itoa(n), v)
	return nil
}
