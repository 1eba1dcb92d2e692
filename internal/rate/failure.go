package rate

import (
	"github.com/ratewarden/ratewarden/internal/algorithms"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Failure says why a call to a Limiter failed, for the layers of the request
// path that judge the backend by its calls (the circuit breaker, the
// admission gate, tracing) and for metrics.
type Failure uint8

// The failures. FailureNone is a call that succeeded.
const (
	// FailureNone is a call that succeeded.
	FailureNone Failure = iota
	// FailureTimeout is a call that did not finish within its context's
	// deadline, or within the backend's own timeout for one reply.
	FailureTimeout
	// FailureUnavailable is a call that found no backend to talk to: the
	// connection was refused, reset or closed, or the backend said it
	// cannot decide for now (ErrUnavailable).
	FailureUnavailable
	// FailureCircuitOpen is a call that a circuit breaker refused without
	// trying (ErrCircuitOpen).
	FailureCircuitOpen
	// FailureOther is any other failure, such as an error reply.
	FailureOther
	// FailureCanceled is a call abandoned because its caller went away. It
	// says nothing about the backend, so it is no failure of the backend.
	FailureCanceled
)

// Failures lists every Failure that is a failure of the backend, for metrics
// that want to show each kind from the start.
var Failures = []Failure{FailureTimeout, FailureUnavailable, FailureCircuitOpen, FailureOther}

// String returns the failure's label: "ok", "timeout", "unavailable",
// "circuit_open", "other" or "canceled".
func (f Failure) String() string {
	switch f {
	case FailureNone:
		return "ok"
	case FailureTimeout:
		return "timeout"
	case FailureUnavailable:
		return "unavailable"
	case FailureCircuitOpen:
		return "circuit_open"
	case FailureOther:
		return "other"
	case FailureCanceled:
		return "canceled"
	}
	return "unknown"
}

// Classify returns the Failure of err, an error that a Limiter called with
// ctx returned: FailureNone for nil, FailureCircuitOpen for ErrCircuitOpen,
// FailureCanceled when ctx's caller went away, FailureTimeout for a
// deadline, FailureUnavailable for a connection that failed, and
// FailureOther for the rest.
func Classify(ctx context.Context, err error) Failure {
	if err == nil {
		// Before netErr, which escapes: a call that succeeded allocates
		// nothing.
		return FailureNone
	}
	var netErr net.Error
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return FailureCircuitOpen
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return FailureCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return FailureTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, ErrUnavailable):
		return FailureUnavailable
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return FailureUnavailable
	}
	return FailureOther
}

// ErrCircuitOpen is the error of a call that a circuit breaker between the
// caller and the backend refused without trying: the backend failed too
// often just before. The breaker's error matches ErrNotSent too.
var ErrCircuitOpen = errors.New("circuit breaker open: backend calls suspended after consecutive failures")

// ErrNotSent is matched (errors.Is) by the error of a call none of whose ops
// reached the backend: a layer between the caller and the backend refused
// it (an open circuit breaker, a request shed under overload), or its caller
// went away while it waited to be sent. Nothing of the call was applied, and
// it says nothing about the backend.
var ErrNotSent = errors.New("not sent to the backend")

// NotSent returns err marked as the error of a call none of whose ops reached
// the backend: errors.Is matches it with ErrNotSent and with whatever err
// matches, and its text is err's.
func NotSent(err error) error { return notSent{err} }

// notSent is an error marked by NotSent.
type notSent struct{ err error }

func (e notSent) Error() string        { return e.err.Error() }
func (e notSent) Unwrap() error        { return e.err }
func (e notSent) Is(target error) bool { return target == ErrNotSent }

// CheckResults returns err, or, when err is nil and results do not hold one
// Result per op of a call of ops ops, an error saying so: what a wrapper of a
// Limiter checks of the Limiter it wraps before it reads the results.
func CheckResults(results []algorithms.Result, ops int, err error) error {
	if err == nil && len(results) != ops {
		return fmt.Errorf("rate: limiter returned %d results for %d operations", len(results), ops)
	}
	return err
}
