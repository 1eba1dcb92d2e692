package server

import "github.com/ratewarden/ratewarden/internal/metrics"

// Metrics returns the server's Prometheus metrics, which /metrics serves on
// RLS_HTTP_ADDR. Every ShouldRateLimit call, over gRPC or /json, is counted
// in them, and so is every reload of the limits.
func (srv *Server) Metrics() *metrics.Metrics { return srv.metrics }
