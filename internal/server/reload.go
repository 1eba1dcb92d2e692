package server

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// configState is the limits configuration in force, whatever its Source:
// it hands every new one the source delivers to the service, keeps the old
// one when an update fails, and remembers where and when the one in force
// was loaded and why the last update failed, for /rlconfig, readiness, the
// log and the reload hooks. It is safe for concurrent use.
type configState struct {
	source  config.Source
	service *rls.Service
	log     *slog.Logger

	mu     sync.Mutex
	status ConfigStatus
	hooks  []func(error)
}

// newConfigState records cfg, which source's Load returned at now, as the
// configuration service has in force; nil when there is none yet.
func newConfigState(service *rls.Service, source config.Source, cfg *config.Config, now time.Time, logger *slog.Logger) *configState {
	origin := source.Origin()
	c := &configState{
		source:  source,
		service: service,
		log:     logger,
		status:  ConfigStatus{Config: cfg, Source: origin.Name, Resources: origin.Resources},
	}
	if cfg != nil {
		c.status.LoadedAt = now
	}
	return c
}

// Status returns the configuration in force, when it was loaded and how the
// last reload went.
func (c *configState) Status() ConfigStatus {
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

// apply takes an update of the source, made at now: a new configuration
// replaces the one in force at once (requests already being answered keep
// the one they started with); an error keeps the one in force and is logged
// with its file, line, column and field. Then every hook learns the outcome.
func (c *configState) apply(u config.Update, now time.Time) {
	c.mu.Lock()
	if u.Err == nil {
		c.service.SetConfig(u.Config)
		c.status.Config, c.status.LoadedAt, c.status.Version = u.Config, now, u.Version
		c.status.LastError, c.status.LastErrorAt = nil, time.Time{}
	} else {
		c.status.LastError, c.status.LastErrorAt = u.Err, now
	}
	hooks, source, inForce := slices.Clone(c.hooks), c.status.Source, c.status.Config
	c.mu.Unlock()

	attrs := []any{"path", source}
	if u.Version != "" {
		attrs = append(attrs, "version", u.Version)
	}
	switch {
	case u.Err == nil:
		attrs = append(attrs, "domains", len(u.Config.Domains()), "files", len(u.Config.Files()))
		c.log.Info("reloaded rate limit configuration", attrs...)
		logWarnings(c.log, u.Config)
	case inForce == nil && errors.Is(u.Err, config.ErrNoConfig):
		c.log.Warn("no rate limit configuration yet: every request is answered with an error, so that Envoy's failure mode decides, and readiness waits for files", append(attrs, "err", u.Err)...)
	default:
		var ce *config.Error
		if errors.As(u.Err, &ce) {
			attrs = append(attrs, "file", ce.File, "line", ce.Line, "column", ce.Column, "field", ce.Field)
		}
		attrs = append(attrs, "err", u.Err)
		c.log.Error("rate limit configuration not reloaded; the previous one stays in force", attrs...)
	}
	for _, f := range hooks {
		f(u.Err)
	}
}

// follow applies every update of the source of limits until ctx ends or
// the returned function is called; that function returns once no update is
// being applied any more.
func (c *configState) follow(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.source.Run(ctx, func(u config.Update) { c.apply(u, time.Now()) })
	}()
	return func() {
		cancel()
		<-done
	}
}

// OnConfigReload registers f to be called after every update of the
// limits from their source: with nil when the new configuration is in
// force, or with the error that kept the previous one. The files at
// RLS_CONFIG_PATH give an update only with RLS_CONFIG_WATCH, and only when
// their content has changed; an xDS server (RLS_CONFIG_SOURCE=xds), one for
// every response. f is called from one goroutine, one call at a time, and
// should return quickly. OnConfigReload is safe for concurrent use; call it
// before Serve to see every update.
func (srv *Server) OnConfigReload(f func(err error)) { srv.config.onReload(f) }

// maxWarningsLogged bounds the warnings of one configuration that are
// logged; `server check` lists them all.
const maxWarningsLogged = 20

// logWarnings logs what cfg loaded that is likely a mistake (the warnings
// of `server check`), one line each, with its place.
func logWarnings(logger *slog.Logger, cfg *config.Config) {
	ws := cfg.Warnings()
	for i, w := range ws {
		if i == maxWarningsLogged {
			logger.Warn("more rate limit configuration warnings not logged; run `server check` on the files to see them all", "not_logged", len(ws)-i)
			return
		}
		logger.Warn("rate limit configuration loaded with a likely mistake", "warning", string(w.Kind),
			"file", w.File, "line", w.Line, "column", w.Column, "field", w.Field, "msg", w.Msg)
	}
}
