package settings

// Load reads the Settings through lookup, which returns the value of a
// variable and whether it is set (os.LookupEnv reads the process's
// environment; a test passes a map's), and validates them. Each variable is
// parsed once, by its field's type, and a variable that is not set takes
// the default of its tag. Its errors name the variable at fault.
//
// Where an RLS_ variable is not set, envoyproxy/ratelimit's variable for the
// same setting is read instead, unless RLS_COMPAT_ENV is false (compat.go);
// Compat then says what became of them.
func Load(lookup func(string) (string, bool)) (Settings, error) {
	var s Settings
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
