package settings

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/layers/admission"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/memory"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings/compat"
	"github.com/ratewarden/ratewarden/internal/xds"
)

// TestServiceOptions: every setting that the service takes reaches its
// options, and the options of the settings' defaults are valid for the
// service and the limits' loader.
func TestServiceOptions(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"RLS_BACKEND": "redis", "RLS_DEFAULT_ALGORITHM": "token_bucket", "RLS_FAILURE_MODE": "deny",
		"RLS_SHADOW_MODE": "true", "RLS_QUOTA_MODE": "true", "RLS_REFUND_ON_DENY": "false", "RLS_RETRY_AFTER": "false",
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

// TestLayerOptions: every setting that a layer takes reaches its options,
// and what follows from several settings too.
func TestLayerOptions(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(map[string]string{
		"RLS_BACKEND": "redis", "RLS_FAILURE_MODE": "allow",
		"RLS_BREAKER_FAILURES": "15", "RLS_BREAKER_PROBES": "16", "RLS_BREAKER_COOLDOWN": "17s",
		"RLS_GIVE_BACK_QUEUE": "19", "RLS_GIVE_BACK_TIMEOUT": "20s",
		"RLS_LEASE_TIME": "21ms", "RLS_LEASE_MIN_HITS": "22",
		"RLS_MAX_INFLIGHT": "23", "RLS_DENY_CACHE_SIZE": "24",
	}))
	require.NoError(t, err)
	assert.Equal(t, breaker.Options{Failures: 15, Probes: 16, Cooldown: 17 * time.Second}, s.BreakerOptions())
	assert.Equal(t, giveback.Options{Size: 19, Timeout: 20 * time.Second, KeepFailedTakes: true}, s.GiveBackOptions(),
		"with the failure mode allow, a failed call's takes stay")
	assert.Equal(t, lease.Options{Time: 21 * time.Millisecond, MinHits: 22, KeepFailedTakes: true}, s.LeaseOptions())
	assert.Equal(t, admission.Options{MaxInflight: 23}, s.AdmissionOptions())
	assert.Equal(t, denycache.Options{MaxEntries: 24}, s.DenyCacheOptions())
}

// TestDefaultsAreThePackages: with no variable set, every package gets its
// own DefaultOptions; the settings keep no default of their own for them.
func TestDefaultsAreThePackages(t *testing.T) {
	t.Parallel()
	s, err := Load(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, s, withoutCompat(Default()), "Load of nothing is Default")
	assert.Equal(t, config.DefaultOptions(), s.ConfigOptions())
	assert.Equal(t, config.DefaultWatchOptions(), s.WatchOptions())
	assert.Equal(t, xds.DefaultBackoff(), s.XDSBackoff())
	assert.Equal(t, rls.DefaultOptions(), s.ServiceOptions(nil))
	assert.Equal(t, lease.DefaultOptions(), s.LeaseOptions())
	assert.Equal(t, giveback.DefaultOptions(), s.GiveBackOptions())
	assert.Equal(t, breaker.DefaultOptions(), s.BreakerOptions())
	assert.Equal(t, admission.DefaultOptions(), s.AdmissionOptions())
	assert.Equal(t, denycache.DefaultOptions(), s.DenyCacheOptions())
	for _, v := range variables(Prefix, reflect.ValueOf(&s)) {
		if _, ok := v.tag.Lookup("default"); ok {
			for _, b := range s.bindings(new(options)) {
				assert.NotEqual(t, reflect.ValueOf(b.setting).Pointer(), v.field.Addr().Pointer(),
					"%s sets %s and has a default of its own", v.name, b.option)
			}
		}
	}
}

// withoutCompat returns s as Load returns it when no envoyproxy/ratelimit
// variable is set.
func withoutCompat(s Settings) Settings {
	s.compat = &compat.Report{}
	return s
}

// TestOptionErrorsNameTheVariable: an option a package refuses is reported
// with the variable that set it, in the package's words.
func TestOptionErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"RLS_LEASE_TIME=0s":                   "server: RLS_LEASE_TIME must be positive, not 0s",
		"RLS_LEASE_MIN_HITS=1":                "server: RLS_LEASE_MIN_HITS must be at least 2, not 1",
		"RLS_GIVE_BACK_QUEUE=0":               "server: RLS_GIVE_BACK_QUEUE must be at least 1, not 0",
		"RLS_GIVE_BACK_TIMEOUT=0s":            "server: RLS_GIVE_BACK_TIMEOUT must be positive, not 0s",
		"RLS_BREAKER_FAILURES=-1":             "server: RLS_BREAKER_FAILURES must not be negative, not -1",
		"RLS_BREAKER_PROBES=0":                "server: RLS_BREAKER_PROBES must be at least 1 for a breaker that opens after 20 failures",
		"RLS_MAX_INFLIGHT=-1":                 "server: RLS_MAX_INFLIGHT must not be negative, not -1",
		"RLS_DENY_CACHE_SIZE=0":               "server: RLS_DENY_CACHE_SIZE must be at least 1, not 0",
		"RLS_NEAR_LIMIT_RATIO=1.5":            "server: RLS_NEAR_LIMIT_RATIO must be in (0, 1], not 1.5",
		"RLS_DEADLINE_RESERVE=-1ms":           "server: RLS_DEADLINE_RESERVE must not be negative, not -1ms",
		"RLS_MAX_LOG_HITS=100001":             "server: RLS_MAX_LOG_HITS must be in [1, 100000], not 100001",
		"RLS_MAX_OVERRIDE_LIFETIME=1ms":       "server: RLS_MAX_OVERRIDE_LIFETIME must be at least 1s, not 1ms",
		"RLS_MAX_UNMATCHED_KEY_BYTES=0":       "server: RLS_MAX_UNMATCHED_KEY_BYTES must be at least 1, not 0",
		"RLS_XDS_BACKOFF_INITIAL_INTERVAL=0s": "server: RLS_XDS_BACKOFF_INITIAL_INTERVAL must be positive, not 0s",
		"RLS_XDS_BACKOFF_MAX_INTERVAL=10ms":   "server: RLS_XDS_BACKOFF_MAX_INTERVAL 10ms is below the initial interval 1s",
		"RLS_XDS_BACKOFF_RANDOM_FACTOR=2":     "server: RLS_XDS_BACKOFF_RANDOM_FACTOR must be in [0, 1], not 2",
	} {
		name, value, _ := strings.Cut(env, "=")
		_, err := Load(lookupIn(map[string]string{name: value}))
		assert.EqualError(t, err, want, env)
	}
}
