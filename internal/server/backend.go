package server

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rate"
	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// backend is a Limiter with the means to check and release it.
type backend interface {
	rate.Limiter
	// CheckWrites reports whether the backend would take the writes of
	// decisions: nil when it would, else why not.
	CheckWrites(ctx context.Context) error
	// Prepare readies a reachable backend for fast first decisions.
	Prepare(ctx context.Context) error
	Close() error
}

// newBackend builds the Limiter the settings name. It does not wait for
// Redis: a server started while Redis is down serves (answering per the
// failure mode) and connects when Redis appears.
func newBackend(s settings.Settings, outcomes *rate.Outcomes, logger *slog.Logger) (backend, error) {
	switch s.Backend {
	case settings.BackendMemory:
		return memoryBackend{memory.New()}, nil
	case settings.BackendRedis:
		client, err := redisx.NewClient(s.RedisOptions())
		if err != nil {
			return nil, fmt.Errorf("server: RLS_REDIS_*: %w", err)
		}
		lim, err := redisx.NewLimiter(client, max(2, s.RedisPipelinesPerCPU*runtime.GOMAXPROCS(0)),
			redisx.WithKeyPrefix(s.KeyPrefix), redisx.WithGrace(redisGrace(s)), redisx.WithOutcomes(outcomes))
		if err != nil {
			client.Close()
			return nil, fmt.Errorf("server: %w", err)
		}
		logger.Info("redis backend", "redis", s.Redis, "key_prefix", s.KeyPrefix)
		return redisBackend{Limiter: lim, client: client}, nil
	}
	return nil, fmt.Errorf("server: RLS_BACKEND %q is not %s or %s", s.Backend, settings.BackendMemory, settings.BackendRedis)
}

// redisGrace is how long a pipeline whose callers gave up is still read: as
// long as one reply may take, so that what it did is known and reported
// (rate.Outcomes).
func redisGrace(s settings.Settings) time.Duration { return s.RedisOptions().ReplyTimeout() }

// memoryBackend is the in-process backend: always reachable.
type memoryBackend struct{ *memory.Limiter }

func (memoryBackend) CheckWrites(context.Context) error { return nil }

func (memoryBackend) Prepare(context.Context) error { return nil }

func (m memoryBackend) Close() error {
	m.Limiter.Close()
	return nil
}

// redisBackend counts in Redis.
type redisBackend struct {
	*redisx.Limiter
	client redis.UniversalClient
}

func (r redisBackend) CheckWrites(ctx context.Context) error {
	return redisx.CheckWrites(ctx, r.client)
}

func (r redisBackend) Close() error {
	r.Limiter.Close()
	return r.client.Close()
}
