package settings

import "github.com/ratewarden/ratewarden/internal/redisx"

// Default returns the Settings of an environment that sets no variable:
// the defaults of the tags, and the packages' DefaultOptions for the
// variables that set their options.
func Default() Settings {
	var s Settings
	if err := read(Prefix, &s, func(string) (string, bool) { return "", false }); err != nil {
		panic("settings: a default does not parse: " + err.Error())
	}
	o := defaultOptions()
	for _, b := range s.bindings(&o) {
		b.get()
	}
	s.Redis = Redis(redisx.DefaultOptions())
	return s
}

// Load reads the Settings through lookup, which returns the value of a
// variable and whether it is set (os.LookupEnv reads the process's
// environment; a test passes a map's), and validates them. Each variable is
// parsed once, by its field's type, and a variable that is not set keeps
// its default (Default). Its errors name the variable at fault.
//
// Where an RLS_ variable is not set, envoyproxy/ratelimit's variable for the
// same setting is read instead, unless RLS_COMPAT_ENV is false (compat.go);
// Compat then says what became of them.
func Load(lookup func(string) (string, bool)) (Settings, error) {
	s := Default()
	if err := read(Prefix, &s, lookup); err != nil {
		return s, err
	}
	if !s.CompatEnv {
		return s, s.Validate()
	}
	report, err := applyCompat(&s, lookup)
	if err != nil {
		return s, err
	}
	s.compat = report
	if err := s.Validate(); err != nil {
		return s, report.explain(err)
	}
	return s, nil
}

// Compat returns what became of the envoyproxy/ratelimit variables that
// were set, for the server to log once at start, or nil when Load did not
// read them (RLS_COMPAT_ENV=false, or Settings that Load did not return).
func (s Settings) Compat() *CompatReport { return s.compat }
