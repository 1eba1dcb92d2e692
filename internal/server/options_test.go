package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	return s.ServiceOptions(nil)
}

// defaultConfigOptions returns the config.Options of a server that no
// variable configures.
func defaultConfigOptions(t *testing.T) config.Options {
	t.Helper()
	s, err := loadSettings(nil)
	require.NoError(t, err)
	return s.ConfigOptions()
}

// TestLayerOptionsOfTheSettings: every setting that the circuit breaker
// and the give-back queue take reaches their options, and the options of
// the settings' defaults are valid for each of them. The defaults live in
// the settings' tags alone: no package below fills in an option the server
// leaves unset. (The service's and the loader's options are the settings'
// own: settings.TestServiceOptions.)
func TestLayerOptionsOfTheSettings(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{
		"RLS_BACKEND":          "redis",
		"RLS_BREAKER_FAILURES": "15", "RLS_BREAKER_PROBES": "16", "RLS_BREAKER_COOLDOWN": "17s",
		"RLS_REDIS_READ_TIMEOUT": "18ms",
		"RLS_GIVE_BACK_QUEUE":    "19", "RLS_GIVE_BACK_TIMEOUT": "20s",
	})
	require.NoError(t, err)
	assert.Equal(t, breaker.Options{Failures: 15, Probes: 16, Cooldown: 17 * time.Second, Grace: 18 * time.Millisecond},
		breakerOptions(s), "the breaker judges timeouts once the Redis client stops reading")
	assert.Equal(t, giveback.Options{Size: 19, Timeout: 20 * time.Second}, giveBackOptions(s))

	// The defaults: options every package takes as they are.
	for _, backend := range []string{"memory", "redis"} {
		s, err := loadSettings(map[string]string{"RLS_BACKEND": backend})
		require.NoError(t, err)
		mem := memory.New()
		t.Cleanup(mem.Close)
		_, err = breaker.New(mem, breakerOptions(s))
		assert.NoError(t, err, backend)
		_, err = giveback.New(mem, giveBackOptions(s))
		assert.NoError(t, err, backend)
	}
}
