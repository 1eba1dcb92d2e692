package rls

import (
	"context"
	"time"
)

// arrivalKey keys a request's arrival time in its context.
type arrivalKey struct{}

// WithArrival returns ctx marked with the time its request reached the
// server: when the transport read its headers, before the request waited
// for a goroutine and for the CPU to run its handler. The service counts
// RLS_BACKEND_TIMEOUT from then, and keeps at least that wait of the
// caller's deadline for the answer's way back (see Service.withDeadline).
// A context without it arrived when ShouldRateLimit was called.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// Arrival returns the time WithArrival marked ctx with, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(arrivalKey{}).(time.Time)
	return t, ok
}

// arrival returns when the request of ctx arrived (see WithArrival), or
// handled when its context does not say or says a later time.
func arrival(ctx context.Context, handled time.Time) time.Time {
	if t, ok := Arrival(ctx); ok && t.Before(handled) {
		return t
	}
	return handled
}
