package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ignoredCommands are left out of the commands per decision: the INFO calls
// that take the measurement, and the acknowledgements replicas send their
// master every second.
var ignoredCommands = map[string]bool{"info": true, "replconf": true}

// commandStats is the number of calls of each command, summed over the
// masters of a Redis, as INFO commandstats counts them: a script's EVALSHA
// and every command it runs inside count one each.
type commandStats map[string]uint64

// statsReader reads INFO commandstats from a fixed set of Redis servers.
// It is safe for concurrent use; Close it when done.
type statsReader struct {
	clients []*redis.Client
}

// newStatsReader returns a reader of the servers at addrs (host:port each).
// It does not connect until the first read.
func newStatsReader(addrs []string) *statsReader {
	r := &statsReader{}
	for _, a := range addrs {
		r.clients = append(r.clients, redis.NewClient(&redis.Options{
			Addr:                     a,
			DisableIdentity:          true,
			Protocol:                 2,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              2 * time.Second,
			ReadTimeout:              5 * time.Second,
			PoolSize:                 1,
		}))
	}
	return r
}

// Close closes the reader's connections.
func (r *statsReader) Close() error {
	for _, c := range r.clients {
		_ = c.Close()
	}
	return nil
}

// read returns the command calls summed over the servers that are masters
// now; replicas are skipped, since what they replay was counted on their
// master already.
func (r *statsReader) read(ctx context.Context) (commandStats, error) {
	total := commandStats{}
	for _, c := range r.clients {
		repl, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return nil, fmt.Errorf("loadgen: INFO replication on %s: %w", c.Options().Addr, err)
		}
		if infoField(repl, "role") != "master" {
			continue
		}
		text, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("loadgen: INFO commandstats on %s: %w", c.Options().Addr, err)
		}
		stats, err := parseCommandStats(text)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %s: %w", c.Options().Addr, err)
		}
		for cmd, n := range stats {
			total[cmd] += n
		}
	}
	return total, nil
}

// infoField returns the value of the "name:value" line called name in an
// INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// parseCommandStats parses an INFO commandstats reply, whose lines read
// "cmdstat_<command>:calls=<n>,usec=…", into calls per command.
func parseCommandStats(info string) (commandStats, error) {
	stats := commandStats{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		found := false
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats line %q: %w", line, err)
				}
				stats[cmd] += n
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("commandstats line %q has no calls=", strings.TrimSpace(line))
		}
	}
	return stats, nil
}

// since returns the calls made between before and s, leaving out
// ignoredCommands and commands that were not called.
func (s commandStats) since(before commandStats) commandStats {
	d := commandStats{}
	for cmd, n := range s {
		if ignoredCommands[cmd] || n <= before[cmd] {
			continue
		}
		d[cmd] = n - before[cmd]
	}
	return d
}

// total returns the sum of the calls of every command.
func (s commandStats) total() uint64 {
	var t uint64
	for _, n := range s {
		t += n
	}
	return t
}
