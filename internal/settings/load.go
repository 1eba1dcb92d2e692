package settings

import (
	"fmt"
	"reflect"

	"github.com/ratewarden/ratewarden/internal/redisx"
	"github.com/ratewarden/ratewarden/internal/settings/compat"
)

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
// same setting is read instead, unless RLS_COMPAT_ENV is false (package
// compat); Compat then says what became of them.
func Load(lookup func(string) (string, bool)) (Settings, error) {
	s := Default()
	if err := read(Prefix, &s, lookup); err != nil {
		return s, err
	}
	if !s.CompatEnv {
		return s, s.Validate()
	}
	report, err := compat.Apply(lookup, varsOf(&s))
	if err != nil {
		return s, err
	}
	s.compat = report
	if err := s.Validate(); err != nil {
		return s, report.Explain(err)
	}
	return s, nil
}

// Compat returns what became of the envoyproxy/ratelimit variables that
// were set, for the server to log once at start, or nil when Load did not
// read them (RLS_COMPAT_ENV=false, or Settings that Load did not return).
func (s Settings) Compat() *compat.Report { return s.compat }

// settingVars are the RLS_ variables of one Settings, by name: the
// compat.Target through which envoyproxy/ratelimit's variables give them
// values.
type settingVars map[string]variable

// varsOf returns the variables of s by name.
func varsOf(s *Settings) settingVars {
	vars := settingVars{}
	for _, v := range variables(Prefix, reflect.ValueOf(s)) {
		vars[v.name] = v
	}
	return vars
}

// Set parses text into the variable name with its field's own type, as
// Load parses the variable's value; its errors name the variable.
func (vars settingVars) Set(name, text string) error {
	v, ok := vars[name]
	if !ok {
		return fmt.Errorf("server: %s is no setting", name)
	}
	return v.set(text)
}

// Get returns the value of the variable name as text, as PrintUsage writes
// a default ("xds", "true"), or "" when name is no variable.
func (vars settingVars) Get(name string) string {
	v, ok := vars[name]
	if !ok {
		return ""
	}
	return format(v.field)
}
