package settings

import (
	"log/slog"

	"github.com/ratewarden/ratewarden/internal/config"
	"github.com/ratewarden/ratewarden/internal/rls"
)

// ConfigOptions returns the config.Options the settings ask for: how the
// server, and the check command, read the limits files.
func (s Settings) ConfigOptions() config.Options {
	return config.Options{
		DefaultAlgorithm:   s.DefaultAlgorithm,
		MergeDomains:       s.ConfigMergeDomains,
		WildcardPrecedence: s.WildcardPrecedence,
		DotFiles:           s.ConfigDotFiles,
		AllowNegativeHits:  s.AllowNegativeHits,
		MaxBytes:           s.ConfigMaxBytes,
	}
}

// ServiceOptions returns the rls.Options the settings ask for, logging to
// logger: how the server's service, and the explain of the check command,
// plan a request.
func (s Settings) ServiceOptions(logger *slog.Logger) rls.Options {
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
		LimitHeaders: s.limitHeaders(),
	}
}

// limitHeaders returns the limit headers the settings ask for, or nil.
func (s Settings) limitHeaders() *rls.LimitHeaders {
	if !s.LimitHeaders {
		return nil
	}
	return &rls.LimitHeaders{Limit: s.LimitHeaderLimit, Remaining: s.LimitHeaderRemaining, Reset: s.LimitHeaderReset}
}
