package config

import "context"

// Source is where a server's limits come from: the files at a path
// (Watcher), an xDS management server (xds.Client), or a Config that never
// changes (Static). The server calls Load once, at the start, and then Run
// until it stops; it keeps the limits in force, hands each new Config to
// the service and remembers the last error, whatever the Source.
//
// Implementations must be safe for concurrent use.
type Source interface {
	// Origin says where the limits come from, as /rlconfig and the log name
	// it.
	Origin() Origin
	// Load returns the limits to start with, waiting for them no longer
	// than ctx allows. A nil Config with a nil error means there are none
	// yet: they come later through Run, and until then every request is
	// answered with an error. An error means the server must not start;
	// it is an *Error when the limits themselves are at fault.
	Load(ctx context.Context) (*Config, error)
	// Run delivers every change of the limits after Load until ctx ends,
	// calling apply with each, from Run's goroutine only and one call at a
	// time. An Update with an error leaves the limits in force as they
	// are. Run returns when ctx ends, or at once when the limits never
	// change.
	Run(ctx context.Context, apply func(Update))
}

// Origin is where a Source's limits come from.
type Origin struct {
	// Name is the path of the files, or the xDS server and node, as
	// /rlconfig and the log name it.
	Name string
	// Resources reports that the Config's files are resources of an xDS
	// server, not files on disk.
	Resources bool
}

// Update is a change a Source delivers: a new Config, or why the limits
// could not be read again.
type Update struct {
	// Config is the new configuration; nil when Err is set.
	Config *Config
	// Version is the version the source gives the Config (an xDS
	// response's version_info); empty for files.
	Version string
	// Err says why the limits were not read again; nil when Config is
	// the new configuration. It is an *Error when the limits themselves are
	// at fault.
	Err error
}

// Static is a Source whose limits never change: files read once, or a
// Config built by a test. Its Load returns the Config it was made with, and
// its Run returns at once. It is safe for concurrent use.
type Static struct {
	origin Origin
	cfg    *Config
}

// NewStatic returns the Source of cfg, which came from origin. A nil cfg
// is a source that never has limits.
func NewStatic(origin Origin, cfg *Config) *Static {
	return &Static{origin: origin, cfg: cfg}
}

// Origin returns where the Config came from.
func (s *Static) Origin() Origin { return s.origin }

// Load returns the Config.
func (s *Static) Load(context.Context) (*Config, error) { return s.cfg, nil }

// Run returns at once: the limits never change.
func (s *Static) Run(context.Context, func(Update)) {}

// The sources of this package.
var (
	_ Source = (*Watcher)(nil)
	_ Source = (*Static)(nil)
)
