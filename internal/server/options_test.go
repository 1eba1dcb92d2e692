package server

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/giveback"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// defaultServiceOptions returns the rls.Options of a server that no
// variable configures.
func defaultServiceOptions(t *testing.T) rls.Options {
	t.Helper()
	s, err := loadSettings(nil)
	require.NoError(t, err)
	return serviceOptions(s, nil)
}

// defaultConfigOptions returns the config.Options of a server that no
// variable configures.
func defaultConfigOptions(t *testing.T) config.Options {
	t.Helper()
	s, err := loadSettings(nil)
	require.NoError(t, err)
	return ConfigOptions(s)
}

// TestServiceOptionsOfTheSettings: every setting that the service, the
// circuit breaker and the give-back queue take reaches their options, and
// the options of the settings' defaults are valid for each of them. The
// defaults live in the settings' tags alone: no package below fills in an
// option the server leaves unset.
func TestServiceOptionsOfTheSettings(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{
		"RLS_BACKEND": "redis", "RLS_DEFAULT_ALGORITHM": "token_bucket", "RLS_FAILURE_MODE": "deny",
		"RLS_SHADOW_MODE": "true", "RLS_QUOTA_MODE": "true", "RLS_REFUND_ON_DENY": "false",
		"RLS_RESPONSE_DYNAMIC_METADATA": "true", "RLS_ALLOW_NEGATIVE_HITS": "true",
		"RLS_BACKEND_TIMEOUT": "3s", "RLS_BACKEND_TIMEOUT_MAX": "4s", "RLS_DEADLINE_RESERVE": "5ms",
		"RLS_NEAR_LIMIT_RATIO": "0.5",
		"RLS_MAX_DESCRIPTORS":  "7", "RLS_MAX_ENTRIES": "8", "RLS_MAX_HITS": "9", "RLS_MAX_LOG_HITS": "10",
		"RLS_MAX_OVERRIDE_LOG_SIZE": "11", "RLS_MAX_OVERRIDE_LIFETIME": "12h",
		"RLS_MAX_UNMATCHED_ENTRIES": "13", "RLS_MAX_UNMATCHED_KEY_BYTES": "14",
		"RLS_LIMIT_HEADERS": "true", "RLS_LIMIT_HEADER_LIMIT": "X-Limit",
		"RLS_LIMIT_HEADER_REMAINING": "X-Remaining", "RLS_LIMIT_HEADER_RESET": "X-Reset",
		"RLS_BREAKER_FAILURES": "15", "RLS_BREAKER_PROBES": "16", "RLS_BREAKER_COOLDOWN": "17s",
		"RLS_REDIS_READ_TIMEOUT": "18ms",
		"RLS_GIVE_BACK_QUEUE":    "19", "RLS_GIVE_BACK_TIMEOUT": "20s",
	})
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	assert.Equal(t, rls.Options{
		DefaultAlgorithm:        algorithms.TokenBucket,
		ShadowMode:              true,
		QuotaMode:               true,
		ResponseDynamicMetadata: true,
		AllowNegativeHits:       true,
		Bounds: rls.Bounds{
			MaxDescriptors:       7,
			MaxEntries:           8,
			MaxHits:              9,
			MaxLogHits:           10,
			MaxOverrideLogSize:   11,
			MaxOverrideLifetime:  12 * time.Hour,
			MaxUnmatchedEntries:  13,
			MaxUnmatchedKeyBytes: 14,
		},
		FailureMode:       rls.FailDeny,
		BackendTimeout:    3 * time.Second,
		BackendTimeoutMax: 4 * time.Second,
		DeadlineReserve:   5 * time.Millisecond,
		NearLimitRatio:    0.5,
		LimitHeaders:      &rls.LimitHeaders{Limit: "X-Limit", Remaining: "X-Remaining", Reset: "X-Reset"},
		Logger:            logger,
	}, serviceOptions(s, logger))
	assert.Equal(t, breaker.Options{Failures: 15, Probes: 16, Cooldown: 17 * time.Second, Grace: 18 * time.Millisecond},
		breakerOptions(s), "the breaker judges timeouts once the Redis client stops reading")
	assert.Equal(t, giveback.Options{Size: 19, Timeout: 20 * time.Second}, giveBackOptions(s))

	// The defaults: options every package takes as they are.
	for _, backend := range []string{"memory", "redis"} {
		s, err := loadSettings(map[string]string{"RLS_BACKEND": backend})
		require.NoError(t, err)
		mem := memory.New()
		t.Cleanup(mem.Close)
		_, err = config.Parse(nil, ConfigOptions(s))
		assert.NoError(t, err, backend)
		_, err = rls.New(mem, nil, serviceOptions(s, nil))
		assert.NoError(t, err, backend)
		_, err = breaker.New(mem, breakerOptions(s))
		assert.NoError(t, err, backend)
		_, err = giveback.New(mem, giveBackOptions(s))
		assert.NoError(t, err, backend)
	}
}
