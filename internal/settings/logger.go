package settings

import (
	"io"
	"log/slog"
)

// NewLogger returns the logger that RLS_LOG_LEVEL and RLS_LOG_FORMAT ask
// for, writing to w.
func (s Settings) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.Level(s.LogLevel)}
	if s.LogFormat == LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
