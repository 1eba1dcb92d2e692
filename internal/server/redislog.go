package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLogger writes go-redis's log lines to slog at debug level. go-redis
// logs on its own, to stderr, every failed dial and connection-pool event;
// while Redis is down that is a flood, and the operator learns the same once
// from the backend watch and the circuit breaker.
type redisLogger struct{ log *slog.Logger }

// Printf logs one go-redis line at debug level.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// routeRedisLogs sends go-redis's logs to logger at debug level. go-redis
// has one logger per process; the latest call wins.
func routeRedisLogs(logger *slog.Logger) { redis.SetLogger(redisLogger{logger}) }
