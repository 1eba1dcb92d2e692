package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/metrics"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// newConfigSource returns the Source of limits the settings choose; it is
// the one place that chooses. With RLS_CONFIG_SOURCE=xds, an xDS server
// (RLS_XDS_*), whose metrics go to m. Otherwise the files at
// RLS_CONFIG_PATH: with RLS_CONFIG_WATCH a Watcher that reloads them when
// they change, and for which a path with nothing to load yet is no error;
// without it, the files read now, waiting for them until ctx ends or for
// RLS_CONFIG_READ_TIMEOUT, and a path with nothing to load is an error.
func newConfigSource(ctx context.Context, s settings.Settings, logger *slog.Logger, m *metrics.Metrics) (config.Source, error) {
	opts := s.ConfigOptions()
	switch {
	case s.ConfigSource == settings.ConfigFromXDS:
		c, err := newXDSClient(s, logger, time.Now())
		if err != nil {
			return nil, err
		}
		m.RegisterXDSConnected(c.Connected)
		return c, nil
	case s.ConfigWatch:
		w := s.WatchOptions()
		w.Logger, w.WaitForFiles = logger, true
		return config.NewWatcher(s.ConfigPath, w), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.ConfigReadTimeout)
	defer cancel()
	cfg, err := config.LoadContext(ctx, s.ConfigPath, opts)
	if errors.Is(err, config.ErrNoConfig) {
		return nil, fmt.Errorf("server: RLS_CONFIG_PATH: nothing to load, and without RLS_CONFIG_WATCH nothing would be: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return config.NewStatic(config.Origin{Name: s.ConfigPath}, cfg), nil
}
