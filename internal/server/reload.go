package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// loadConfig loads the limits at RLS_CONFIG_PATH, waiting for the files
// until ctx ends or for RLS_CONFIG_READ_TIMEOUT. With RLS_CONFIG_WATCH it
// also returns the Watcher that keeps them current, and a path with nothing
// to load yet is no error: the Config is then nil until the Watcher finds
// files. Without RLS_CONFIG_WATCH, the Watcher is nil and such a path is an
// error.
//
// With limits from an xDS server, it returns no Config: there is none until
// the first update.
func loadConfig(ctx context.Context, s settings.Settings, logger *slog.Logger) (*config.Watcher, *config.Config, error) {
	opts := configOptions(s)
	if s.ConfigSource == settings.ConfigFromXDS {
		return nil, nil, nil
	}
	if !s.ConfigWatch {
		ctx, cancel := context.WithTimeout(ctx, s.ConfigReadTimeout)
		defer cancel()
		cfg, err := config.LoadContext(ctx, s.ConfigPath, opts)
		if errors.Is(err, config.ErrNoConfig) {
			return nil, nil, fmt.Errorf("server: RLS_CONFIG_PATH: nothing to load, and without RLS_CONFIG_WATCH nothing would be: %w", err)
		}
		return nil, cfg, err
	}
	poll := s.ConfigPollInterval
	if poll == 0 {
		poll = -1 // the setting's 0 turns polling off; WatchOptions' means the default
	}
	return config.NewWatcher(ctx, s.ConfigPath, config.WatchOptions{
		Options:      opts,
		PollInterval: poll,
		ReadTimeout:  s.ConfigReadTimeout,
		Logger:       logger,
		WaitForFiles: true,
	})
}

// configState is the limits configuration in force: it hands every newly
// loaded one to the service, keeps the old one when a reload fails, and
// remembers when the one in force was loaded and why the last reload
// failed, for /rlconfig, the log and the reload hooks. It is safe for
// concurrent use.
type configState struct {
	service *rls.Service
	log     *slog.Logger

	mu     sync.Mutex
	status rls.ConfigStatus
	hooks  []func(error)
}

// newConfigState records cfg, loaded from source at now, as the
// configuration service has in force.
func newConfigState(service *rls.Service, source string, cfg *config.Config, now time.Time, logger *slog.Logger) *configState {
	return &configState{
		service: service,
		log:     logger,
		status:  rls.ConfigStatus{Config: cfg, Source: source, LoadedAt: now},
	}
}

// newXDSConfigState returns the state of limits that come from source, an
// xDS server: none yet, until the first update.
func newXDSConfigState(service *rls.Service, source string, logger *slog.Logger) *configState {
	return &configState{
		service: service,
		log:     logger,
		status:  rls.ConfigStatus{Source: source, Resources: true},
	}
}

// Status returns the configuration in force, when it was loaded and how the
// last reload went.
func (c *configState) Status() rls.ConfigStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// onReload registers f to be called after every reload attempt.
func (c *configState) onReload(f func(error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks = append(c.hooks, f)
}

// reloaded takes the outcome of a reload attempted at now: a new
// configuration replaces the one in force at once (requests already being
// answered keep the one they started with); an error keeps the one in force
// and is logged with its file, line and field. Then every hook learns the
// outcome.
func (c *configState) reloaded(cfg *config.Config, err error, now time.Time) {
	c.applied(cfg, "", err, now)
}

// applied is reloaded for an update of the given version from an xDS
// server ("" for files).
func (c *configState) applied(cfg *config.Config, version string, err error, now time.Time) {
	c.mu.Lock()
	if err == nil {
		c.service.SetConfig(cfg)
		c.status.Config, c.status.LoadedAt, c.status.Version = cfg, now, version
		c.status.LastError, c.status.LastErrorAt = nil, time.Time{}
	} else {
		c.status.LastError, c.status.LastErrorAt = err, now
	}
	hooks, source, inForce := slices.Clone(c.hooks), c.status.Source, c.status.Config
	c.mu.Unlock()

	attrs := []any{"path", source}
	if version != "" {
		attrs = append(attrs, "version", version)
	}
	switch {
	case err == nil:
		attrs = append(attrs, "domains", len(cfg.Domains()), "files", len(cfg.Files()))
		c.log.Info("reloaded rate limit configuration", attrs...)
	case inForce == nil && errors.Is(err, config.ErrNoConfig):
		c.log.Warn("no rate limit configuration yet: every request is answered with an error, so that Envoy's failure mode decides, and readiness waits for files", append(attrs, "err", err)...)
	default:
		var ce *config.Error
		if errors.As(err, &ce) {
			attrs = append(attrs, "file", ce.File, "line", ce.Line, "field", ce.Field)
		}
		attrs = append(attrs, "err", err)
		c.log.Error("rate limit configuration not reloaded; the previous one stays in force", attrs...)
	}
	for _, f := range hooks {
		f(err)
	}
}

// watchConfig reloads the limits whenever RLS_CONFIG_PATH changes, until
// ctx ends or the returned function is called; that function returns once
// no reload is under way any more.
func (srv *Server) watchConfig(ctx context.Context) (stop func()) {
	if srv.watcher == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.watcher.Run(ctx, func(cfg *config.Config, err error) { srv.config.reloaded(cfg, err, time.Now()) })
	}()
	return func() {
		cancel()
		<-done
	}
}

// OnConfigReload registers f to be called after every attempt to reload the
// limits from RLS_CONFIG_PATH, or to take an update from the xDS server:
// with nil when the new configuration is in force, or with the error that
// kept the previous one. An attempt is made only when the content of the
// files has changed, and only with RLS_CONFIG_WATCH; with RLS_CONFIG_SOURCE=xds,
// for every response of the server. f is called from one goroutine, one call at a time, and
// should return quickly. OnConfigReload is safe for concurrent use; call it
// before Serve to see every attempt.
func (srv *Server) OnConfigReload(f func(err error)) { srv.config.onReload(f) }
