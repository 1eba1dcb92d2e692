package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// SentinelMasterName is the name under which the Sentinels of a
	// SentinelSetup monitor its master.
	SentinelMasterName = "ratewarden"

	sentinelCount  = 3
	sentinelQuorum = 2
	// sentinelDownAfter is how long a master must be silent before the
	// Sentinels fail it over: short, so failover tests are fast.
	sentinelDownAfter = 1000 * time.Millisecond
	// sentinelTimeout bounds the setup and every wait for a failover.
	sentinelTimeout = 60 * time.Second
)

// SentinelSetup is a master, one replica and three Sentinels (quorum two)
// that monitor the master as SentinelMasterName, all on 127.0.0.1. Its
// methods are safe for concurrent use.
type SentinelSetup struct {
	master, replica *Redis
	sentinels       []*Redis
	clients         []*redis.SentinelClient // one per Sentinel
}

// StartSentinel starts a master, its replica and three Sentinels. It
// returns once the replica is in sync and every Sentinel monitors the
// master and knows the replica, or fails when ctx ends first. Close stops
// them.
func StartSentinel(ctx context.Context) (*SentinelSetup, error) {
	ctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
	defer cancel()
	s := &SentinelSetup{}
	var err error
	if s.master, err = StartRedis(RedisConfig{}); err != nil {
		return nil, err
	}
	replicaOf := fmt.Sprintf("replicaof 127.0.0.1 %d", s.master.port)
	if s.replica, err = StartRedis(RedisConfig{Directives: []string{replicaOf}}); err != nil {
		s.Close()
		return nil, err
	}
	// Sentinels learn the replicas from the master's INFO, which they read as
	// soon as they connect: start them once the replica is attached.
	err = poll(ctx, func(ctx context.Context) error {
		if role, err := s.replica.role(ctx); err != nil || role != "slave" {
			return fmt.Errorf("proc: %s is not a replica yet (role %q, %v)", s.replica, role, err)
		}
		return s.replica.replicaInSync(ctx)
	})
	if err != nil {
		s.Close()
		return nil, err
	}

	monitor := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", SentinelMasterName, s.master.port, sentinelQuorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMasterName, sentinelDownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s 10000", SentinelMasterName),
		fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMasterName),
	}
	sentinels := make([]*Redis, sentinelCount)
	errs := make([]error, sentinelCount)
	var wg sync.WaitGroup
	for i := range sentinels {
		wg.Go(func() {
			sentinels[i], errs[i] = StartRedis(RedisConfig{Sentinel: true, Directives: monitor})
		})
	}
	wg.Wait()
	for _, sn := range sentinels {
		if sn != nil {
			s.sentinels = append(s.sentinels, sn)
			s.clients = append(s.clients, redis.NewSentinelClient(&redis.Options{
				Addr:                  sn.Addr(),
				DisableIdentity:       true,
				Protocol:              2,
				ContextTimeoutEnabled: true,
				MaxRetries:            -1,
			}))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.Close()
		return nil, err
	}
	err = poll(ctx, func(ctx context.Context) error {
		for i, c := range s.clients {
			addr, err := masterAddr(ctx, c)
			if err != nil {
				return err
			}
			if addr != s.master.Addr() {
				return fmt.Errorf("proc: %s sees master %s, want %s", s.sentinels[i], addr, s.master.Addr())
			}
			if err := knowsReplica(ctx, c, s.replica); err != nil {
				return fmt.Errorf("proc: %s: %w", s.sentinels[i], err)
			}
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops every process for good.
func (s *SentinelSetup) Close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
	var wg sync.WaitGroup
	for _, n := range append([]*Redis{s.master, s.replica}, s.sentinels...) {
		if n != nil {
			wg.Go(n.Close)
		}
	}
	wg.Wait()
}

// MasterName returns the name under which the Sentinels monitor the master:
// SentinelMasterName.
func (s *SentinelSetup) MasterName() string { return SentinelMasterName }

// SentinelAddrs returns the addresses of the three Sentinels.
func (s *SentinelSetup) SentinelAddrs() []string { return Addrs(s.sentinels) }

// Sentinels returns the three Sentinel processes.
func (s *SentinelSetup) Sentinels() []*Redis { return slices.Clone(s.sentinels) }

// Master returns the server that was master when the setup started.
// KillMaster returns the master that replaces it.
func (s *SentinelSetup) Master() *Redis { return s.master }

// Replica returns the server that was the replica when the setup started.
func (s *SentinelSetup) Replica() *Redis { return s.replica }

// NewClient returns a go-redis failover client that finds the master
// through the Sentinels; the caller closes it. Like Redis.NewClient it
// honours context deadlines and speaks RESP2.
func (s *SentinelSetup) NewClient() *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            SentinelMasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		Protocol:              2,
	})
}

// KillMaster kills the current master with SIGKILL and waits until every
// Sentinel names the other server as master and that server says it is one;
// it returns the new master. First it waits until the Sentinels know each
// other (they announce themselves every two seconds), since a failover needs
// a majority of them. It fails if the failover does not complete before ctx
// ends.
func (s *SentinelSetup) KillMaster(ctx context.Context) (*Redis, error) {
	var old, next *Redis
	err := poll(ctx, func(ctx context.Context) error {
		for i, c := range s.clients {
			m, err := c.Master(ctx, SentinelMasterName).Result()
			if err != nil {
				return fmt.Errorf("proc: %s: SENTINEL MASTER: %w", s.sentinels[i], err)
			}
			if m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				return fmt.Errorf("proc: %s knows %s other sentinels, want %d", s.sentinels[i], m["num-other-sentinels"], sentinelCount-1)
			}
			if m["flags"] != "master" {
				return fmt.Errorf("proc: %s flags the master %q", s.sentinels[i], m["flags"])
			}
		}
		addr, err := masterAddr(ctx, s.clients[0])
		if err != nil {
			return err
		}
		old, next = s.master, s.replica
		if addr == s.replica.Addr() {
			old, next = s.replica, s.master
		}
		for i, c := range s.clients {
			if err := knowsReplica(ctx, c, next); err != nil {
				return fmt.Errorf("proc: %s: %w", s.sentinels[i], err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("proc: sentinels not ready for a failover: %w", err)
	}
	old.Kill()
	err = poll(ctx, func(ctx context.Context) error {
		for i, c := range s.clients {
			addr, err := masterAddr(ctx, c)
			if err != nil {
				return err
			}
			if addr != next.Addr() {
				return fmt.Errorf("proc: %s still names %s as master", s.sentinels[i], addr)
			}
		}
		if role, err := next.role(ctx); err != nil || role != "master" {
			return fmt.Errorf("proc: %s has not become master (role %q, %v)", next, role, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("proc: failover after killing %s: %w", old, err)
	}
	return next, nil
}

// masterAddr asks a Sentinel for the master's address.
func masterAddr(ctx context.Context, c *redis.SentinelClient) (string, error) {
	hp, err := c.GetMasterAddrByName(ctx, SentinelMasterName).Result()
	if err != nil {
		return "", fmt.Errorf("proc: SENTINEL GET-MASTER-ADDR-BY-NAME: %w", err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("proc: SENTINEL GET-MASTER-ADDR-BY-NAME answered %q", hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// knowsReplica checks that a Sentinel lists r as a healthy replica.
func knowsReplica(ctx context.Context, c *redis.SentinelClient, r *Redis) error {
	replicas, err := c.Replicas(ctx, SentinelMasterName).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	for _, rep := range replicas {
		if rep["port"] != strconv.Itoa(r.port) {
			continue
		}
		if flags := rep["flags"]; flags != "slave" {
			return fmt.Errorf("replica %s is flagged %q", r.Addr(), flags)
		}
		if link := rep["master-link-status"]; link != "ok" {
			return fmt.Errorf("replica %s has master link %q", r.Addr(), link)
		}
		return nil
	}
	var known []string
	for _, rep := range replicas {
		known = append(known, rep["name"])
	}
	return fmt.Errorf("replica %s unknown (knows %s)", r.Addr(), strings.Join(known, ", "))
}
