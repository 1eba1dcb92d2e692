package server

import (
	"os"
	"path/filepath"

	"github.com/ratewarden/ratewarden/internal/config"
)

// probePaths are the HTTP paths of the probes, which kubelet sends: they
// never need a client certificate (kubelet cannot present one), and they
// are served on the connections reserved for them.
var probePaths = [...]string{"/healthcheck", "/ready"}

// httpOptions returns what the settings ask of the HTTP endpoints: /json
// off (see jsonOff), and /rlconfig without absolute paths unless
// RLS_RLCONFIG_SHOW_PATHS.
func (srv *Server) httpOptions(cfg *config.Config) httpOptions {
	s := srv.settings
	o := httpOptions{jsonOff: jsonOff(s), configStatus: srv.config.Status, explain: srv.explain}
	if root := configRoot(s.ConfigPath, cfg); root != "" && !s.RlconfigShowPaths {
		o.configRoot = root
		o.configStatus = func() ConfigStatus {
			st := srv.config.Status()
			st.Source = filepath.Base(st.Source)
			return st
		}
	}
	return o
}

// configRoot returns the absolute directory, with a trailing separator,
// that the files of the configuration at path are named under, or "" when
// path is relative: /rlconfig leaves it out of file names. cfg is the
// configuration loaded at the start, nil when none was.
func configRoot(path string, cfg *config.Config) string {
	if !filepath.IsAbs(path) {
		return ""
	}
	dir := filepath.Clean(path)
	if cfg != nil {
		if files := cfg.Files(); len(files) == 1 && files[0] == path {
			dir = filepath.Dir(dir) // path is the file itself
		}
	} else if info, err := os.Stat(path); err == nil && !info.IsDir() {
		dir = filepath.Dir(dir) // no limits loaded yet, from a file
	}
	if dir == string(filepath.Separator) {
		return ""
	}
	return dir + string(filepath.Separator)
}
