package rls

import "context"

// ClassifyBackendError returns the kind of err, an error that a Limiter
// called with ctx returned, as the service classifies it for its metrics
// and its circuit breaker: BackendOK for nil, BackendCanceled when ctx's
// caller went away, and so on. Wrappers of a Limiter (tracing) use it to
// report a failure the same way.
func ClassifyBackendError(ctx context.Context, err error) BackendError {
	return classifyBackendError(ctx, err)
}
