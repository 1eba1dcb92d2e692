package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/layers/admission"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
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

// TestLayersTakeTheSettings: the layers take the options the settings
// compose (settings.TestLayerOptions holds each variable to its option),
// with the backend's grace: the breaker judges a timeout once the Redis
// client stops reading its reply.
func TestLayersTakeTheSettings(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(map[string]string{"RLS_BACKEND": "redis", "RLS_REDIS_READ_TIMEOUT": "18ms"})
	require.NoError(t, err)
	assert.Equal(t, 18*time.Millisecond, breakerGrace(s))
	for _, backend := range []string{"memory", "redis"} {
		s, err := loadSettings(map[string]string{"RLS_BACKEND": backend})
		require.NoError(t, err)
		mem := memory.New()
		t.Cleanup(mem.Close)
		b := s.BreakerOptions()
		b.Grace = breakerGrace(s)
		_, err = breaker.New(mem, b)
		assert.NoError(t, err, backend)
		_, err = giveback.New(mem, s.GiveBackOptions())
		assert.NoError(t, err, backend)
		_, err = admission.New(mem, s.AdmissionOptions())
		assert.NoError(t, err, backend)
		_, err = denycache.New(mem, s.DenyCacheOptions())
		assert.NoError(t, err, backend)
		l, err := lease.New(mem, s.LeaseOptions())
		require.NoError(t, err, backend)
		l.Close()
	}
}
