package settings

import (
	"fmt"
	"log/slog"
	"reflect"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/giveback"
	"github.com/ratewarden/ratewarden/internal/layers/admission"
	"github.com/ratewarden/ratewarden/internal/layers/breaker"
	"github.com/ratewarden/ratewarden/internal/layers/denycache"
	"github.com/ratewarden/ratewarden/internal/layers/lease"
	"github.com/ratewarden/ratewarden/internal/option"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/tlsx"
	"github.com/ratewarden/ratewarden/internal/xds"
)

// options are the Options of the packages that the settings compose: each
// package owns its defaults (DefaultOptions) and its rules (Validate), and a
// variable only says which option it sets (Settings.bindings, beside the
// variables in settings.go).
type options struct {
	config    config.WatchOptions
	backoff   xds.Backoff
	service   rls.Options
	lease     lease.Options
	giveBack  giveback.Options
	breaker   breaker.Options
	admission admission.Options
	denyCache denycache.Options
}

// defaultOptions returns every package's DefaultOptions.
func defaultOptions() options {
	return options{
		config:    config.DefaultWatchOptions(),
		backoff:   xds.DefaultBackoff(),
		service:   rls.DefaultOptions(),
		lease:     lease.DefaultOptions(),
		giveBack:  giveback.DefaultOptions(),
		breaker:   breaker.DefaultOptions(),
		admission: admission.DefaultOptions(),
		denyCache: denycache.DefaultOptions(),
	}
}

// binding is a variable that sets an option: the Settings field, the
// option's field (named as its package's errors name it, option.Error),
// and the Options it belongs to.
type binding struct {
	setting any // a pointer to a field of Settings
	options any // a pointer to the Options that hold the option
	option  string
	// get sets the setting to the option, set the option to the setting.
	get, set func()
}

// bind returns the binding of the setting to the option named name, a field
// of the Options that owner points to.
func bind[T any](owner any, name string, setting, value *T) binding {
	return binding{setting: setting, options: owner, option: name,
		get: func() { *setting = *value },
		set: func() { *value = *setting }}
}

// options returns the packages' Options the settings ask for: their
// defaults, with every bound variable's value, and what follows from
// several settings.
func (s *Settings) options() options {
	o := defaultOptions()
	for _, b := range s.bindings(&o) {
		b.set()
	}
	o.service.LimitHeaders = s.limitHeaders()
	// With the failure mode allow, a request whose call failed was
	// admitted: what the backend took for it stays.
	o.giveBack.KeepFailedTakes = s.FailureMode == rls.FailAllow
	o.lease.KeepFailedTakes = o.giveBack.KeepFailedTakes
	return o
}

// validateOptions checks the options the settings compose by their
// packages' own rules, and names the variable of an option at fault.
func (s *Settings) validateOptions() error {
	o := s.options()
	for _, c := range []struct {
		owner    any
		validate func() error
	}{
		{&o.config.Options, o.config.Options.Validate},
		{&o.backoff, o.backoff.Validate},
		{&o.service, o.service.Validate},
		{&o.lease, o.lease.Validate},
		{&o.giveBack, o.giveBack.Validate},
		{&o.breaker, o.breaker.Validate},
		{&o.admission, o.admission.Validate},
		{&o.denyCache, o.denyCache.Validate},
	} {
		err := c.validate()
		if err == nil {
			continue
		}
		if bad := option.Of(err); bad != nil {
			for _, b := range s.bindings(&o) {
				if b.options == c.owner && b.option == bad.Field {
					return fmt.Errorf("server: %s %s", s.variableOf(b.setting), bad.Problem)
				}
			}
		}
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// variableOf returns the name of the variable of the field of s that
// setting points to.
func (s *Settings) variableOf(setting any) string {
	p := reflect.ValueOf(setting).Pointer()
	for _, v := range variables(Prefix, reflect.ValueOf(s)) {
		if v.field.Addr().Pointer() == p {
			return v.name
		}
	}
	panic(fmt.Sprintf("settings: no variable sets %T at %#x", setting, p))
}

// ConfigOptions returns the config.Options the settings ask for: how the
// server, and the check command, read the limits files.
func (s Settings) ConfigOptions() config.Options { return s.options().config.Options }

// XDSConfigOptions returns the config.Options of the limits that come over
// xDS: ConfigOptions, with RLS_XDS_DEFAULT_ALGORITHM and RLS_XDS_CALENDAR.
func (s Settings) XDSConfigOptions() config.Options {
	o := s.ConfigOptions()
	o.DefaultAlgorithm = s.XDSDefaultAlgorithm
	o.XDSCalendar = s.XDSCalendar
	return o
}

// WatchOptions returns the config.WatchOptions the settings ask for,
// without a logger: how the server watches the limits files.
func (s Settings) WatchOptions() config.WatchOptions { return s.options().config }

// XDSBackoff returns the waits before reconnecting to the xDS server that
// the RLS_XDS_BACKOFF_* settings ask for.
func (s Settings) XDSBackoff() xds.Backoff { return s.options().backoff }

// ServiceOptions returns the rls.Options the settings ask for, logging to
// logger: how the server's service, and the explain of the check command,
// plan a request.
func (s Settings) ServiceOptions(logger *slog.Logger) rls.Options {
	o := s.options().service
	o.Logger = logger
	return o
}

// LeaseOptions returns the lease.Options the settings ask for, without an
// observer or a give-back queue.
func (s Settings) LeaseOptions() lease.Options { return s.options().lease }

// GiveBackOptions returns the giveback.Options the settings ask for,
// without an observer or a logger.
func (s Settings) GiveBackOptions() giveback.Options { return s.options().giveBack }

// BreakerOptions returns the breaker.Options the settings ask for, without
// an observer, a logger or the backend's grace.
func (s Settings) BreakerOptions() breaker.Options { return s.options().breaker }

// AdmissionOptions returns the admission.Options the settings ask for,
// without an observer.
func (s Settings) AdmissionOptions() admission.Options { return s.options().admission }

// DenyCacheOptions returns the denycache.Options the settings ask for.
func (s Settings) DenyCacheOptions() denycache.Options { return s.options().denyCache }

// GRPCTLS returns the files of the gRPC server's TLS the settings name.
func (s Settings) GRPCTLS() tlsx.ServerFiles {
	return tlsx.ServerFiles{Cert: s.file(&s.GRPCTlsCertFile), Key: s.file(&s.GRPCTlsKeyFile),
		ClientCA: s.file(&s.GRPCTlsClientCaFile)}
}

// HTTPTLS returns the files of the HTTP server's TLS the settings name.
func (s Settings) HTTPTLS() tlsx.ServerFiles {
	return tlsx.ServerFiles{Cert: s.file(&s.HTTPTlsCertFile), Key: s.file(&s.HTTPTlsKeyFile),
		ClientCA: s.file(&s.HTTPTlsClientCaFile)}
}

// XDSTLS returns the files of the xDS client's TLS the settings name, or
// nil without RLS_XDS_TLS.
func (s Settings) XDSTLS() *tlsx.ClientFiles {
	if !s.XDSTls {
		return nil
	}
	return &tlsx.ClientFiles{Cert: s.file(&s.XDSTlsCertFile), Key: s.file(&s.XDSTlsKeyFile),
		CA: s.file(&s.XDSTlsCaFile), ServerName: s.XDSTlsServerName}
}

// file returns the file that the field of s path points to names, with
// its variable.
func (s *Settings) file(path *string) tlsx.File {
	return tlsx.File{Var: s.variableOf(path), Path: *path}
}

// limitHeaders returns the limit headers the settings ask for, or nil.
func (s Settings) limitHeaders() *rls.LimitHeaders {
	if !s.LimitHeaders {
		return nil
	}
	return &rls.LimitHeaders{Limit: s.LimitHeaderLimit, Remaining: s.LimitHeaderRemaining, Reset: s.LimitHeaderReset}
}
