package server

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/ratewarden/ratewarden/internal/config"
)

// probePaths are the HTTP paths that never need a client certificate:
// kubelet's probes cannot present one.
var probePaths = [...]string{"/healthcheck", "/ready"}

// requireClientCert serves next to requests over TLS with a verified client
// certificate, and the probe paths to anyone; others get 403 Forbidden. The
// TLS handshake verifies a certificate when one is presented; this is where
// its absence is refused.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(probePaths[:], r.URL.Path) || (r.TLS != nil && len(r.TLS.VerifiedChains) > 0) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("rls: a client certificate is required (RLS_HTTP_TLS_CLIENT_CA_FILE)\n"))
	})
}

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
