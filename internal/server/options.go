package server

import (
	"log/slog"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
	"github.com/ratewarden/ratewarden/internal/tracing"
)

// serviceOptions returns the rls.Options the settings ask for.
func serviceOptions(s settings.Settings, logger *slog.Logger) rls.Options {
	return rls.Options{
		DefaultAlgorithm: s.DefaultAlgorithm,
		ShadowMode:       s.ShadowMode,
		QuotaMode:        s.QuotaMode,
		RefundOnDeny:     s.RefundOnDeny,

		ResponseDynamicMetadata: s.ResponseDynamicMetadata,
		FailureMode:             s.FailureMode,
		BackendTimeout:          s.BackendTimeout,
		BackendTimeoutMax:       s.BackendTimeoutMax,
		DeadlineReserve:         s.DeadlineReserve,
		NearLimitRatio:          s.NearLimitRatio,
		Logger:                  logger,

		AllowNegativeHits: s.AllowNegativeHits,
		Bounds: rls.Bounds{
			MaxDescriptors:       s.MaxDescriptors,
			MaxEntries:           s.MaxEntries,
			MaxHits:              s.MaxHits,
			MaxLogHits:           s.MaxLogHits,
			MaxOverrideLogSize:   s.MaxOverrideLogSize,
			MaxOverrideLifetime:  s.MaxOverrideLifetime,
			MaxUnmatchedEntries:  s.MaxUnmatchedEntries,
			MaxUnmatchedKeyBytes: s.MaxUnmatchedKeyBytes,
		},
		LimitHeaders: limitHeaders(s),
	}
}

// limitHeaders returns the limit headers the settings ask for, or nil.
func limitHeaders(s settings.Settings) *rls.LimitHeaders {
	if !s.LimitHeaders {
		return nil
	}
	return &rls.LimitHeaders{Limit: s.LimitHeaderLimit, Remaining: s.LimitHeaderRemaining, Reset: s.LimitHeaderReset}
}

// ConfigOptions returns the config.Options the settings ask for: how the
// server, and the check command, read the limits files.
func ConfigOptions(s settings.Settings) config.Options {
	return config.Options{
		DefaultAlgorithm:   s.DefaultAlgorithm,
		MergeDomains:       s.ConfigMergeDomains,
		WildcardPrecedence: s.WildcardPrecedence,
		DotFiles:           s.ConfigDotFiles,
		AllowNegativeHits:  s.AllowNegativeHits,
		MaxBytes:           s.ConfigMaxBytes,
	}
}

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
