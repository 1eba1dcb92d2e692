package server

import (
	"fmt"
	"io"
	"time"

	"github.com/ratewarden/ratewarden/internal/config"
)

// ConfigStatus is the configuration in use, where and when it was loaded,
// and how the last attempt to reload it went.
type ConfigStatus struct {
	// Config is the configuration in use; nil when none is loaded.
	Config *config.Config
	// Source is where Config was loaded from: a file or a directory, or an
	// xDS server.
	Source string
	// Resources reports that Config's files are resources of an xDS
	// server.
	Resources bool
	// Version is the xDS server's version of Config; empty for files.
	Version string
	// LoadedAt is when Config was loaded.
	LoadedAt time.Time
	// LastError is why the last reload failed, leaving Config in use; nil
	// when the last reload, or the first load, succeeded.
	LastError error
	// LastErrorAt is when the last reload failed.
	LastErrorAt time.Time
}

// writeHeader writes the lines that open /rlconfig, and a blank line.
func (st ConfigStatus) writeHeader(w io.Writer) {
	n, files := len(st.Config.Files()), "file"
	if st.Resources {
		files = "resource"
	}
	if n != 1 {
		files += "s"
	}
	version := ""
	if st.Version != "" {
		version = fmt.Sprintf(", version %q", st.Version)
	}
	fmt.Fprintf(w, "loaded: %s from %s%s (%d %s)\n", st.LoadedAt.UTC().Format(time.RFC3339), st.Source, version, n, files)
	if st.LastError != nil {
		fmt.Fprintf(w, "last reload error: %s: %v\n", st.LastErrorAt.UTC().Format(time.RFC3339), st.LastError)
	}
	fmt.Fprintln(w)
}
