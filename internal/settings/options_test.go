package settings

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// TestServiceOptions: every setting that the service takes reaches its
// options, and the options of the settings' defaults are valid for the
// service and the limits' loader. The defaults live in the settings' tags
// alone: no package below fills in an option the settings leave unset.
func TestServiceOptions(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
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
	}))
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
	}, s.ServiceOptions(logger))

	// The defaults: options the loader and the service take as they are.
	for _, backend := range []string{"memory", "redis"} {
		s, err := Load(lookupIn(map[string]string{"RLS_BACKEND": backend}))
		require.NoError(t, err)
		mem := memory.New()
		t.Cleanup(mem.Close)
		_, err = config.Parse(nil, s.ConfigOptions())
		assert.NoError(t, err, backend)
		_, err = rls.New(mem, nil, s.ServiceOptions(nil))
		assert.NoError(t, err, backend)
	}
}

// TestConfigOptions: every setting of how the limits files are read
// reaches the loader's options.
func TestConfigOptions(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"RLS_DEFAULT_ALGORITHM": "token_bucket", "RLS_CONFIG_MERGE_DOMAINS": "true",
		"RLS_WILDCARD_PRECEDENCE": "most_specific", "RLS_CONFIG_DOT_FILES": "true",
		"RLS_ALLOW_NEGATIVE_HITS": "true", "RLS_CONFIG_MAX_BYTES": "1000",
	}))
	require.NoError(t, err)
	assert.Equal(t, config.Options{
		DefaultAlgorithm:   algorithms.TokenBucket,
		MergeDomains:       true,
		WildcardPrecedence: config.MostSpecificWildcard,
		DotFiles:           true,
		AllowNegativeHits:  true,
		MaxBytes:           1000,
	}, s.ConfigOptions())
}
