package server

import (
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// tracingOptions returns the tracing options the settings ask for.
func tracingOptions(s settings.Settings) tracing.Options {
	opts := tracing.Options{
		Protocol:          string(s.TracingProtocol),
		ServiceName:       s.TracingServiceName,
		ServiceNamespace:  s.TracingServiceNamespace,
		ServiceInstanceID: s.TracingServiceInstanceID,
	}
	if share, ok := s.TracingSamplingRate.Share(); ok {
		opts.SamplingRate = &share
	}
	return opts
}

// jsonOff returns why /json (and /explain) is not served, or "" when it is.
func jsonOff(s settings.Settings) string {
	switch {
	case s.HTTPJson == settings.JSONOff:
		return "rls: /json is off (RLS_HTTP_JSON=off)"
	case s.HTTPJson == settings.JSONAuto && s.GRPCTlsClientCaFile != "" && s.HTTPTlsClientCaFile == "":
		return "rls: /json is off: gRPC requires client certificates and HTTP does not; " +
			"set RLS_HTTP_TLS_CLIENT_CA_FILE to require them on HTTP too, or RLS_HTTP_JSON=on to serve /json without them"
	}
	return ""
}
