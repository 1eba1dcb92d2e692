package rate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

func TestClassifyBackendError(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want Failure
	}{
		{"nil", bg, nil, FailureNone},
		{"deadline", bg, fmt.Errorf("redisx: %w", context.DeadlineExceeded), FailureTimeout},
		{"i/o timeout", bg, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, FailureTimeout},
		{"refused", bg, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, FailureUnavailable},
		{"reset", bg, fmt.Errorf("x: %w", syscall.ECONNRESET), FailureUnavailable},
		{"eof", bg, io.EOF, FailureUnavailable},
		{"closed", bg, net.ErrClosed, FailureUnavailable},
		{"cluster down", bg, fmt.Errorf("redisx: run x: %w: CLUSTERDOWN", ErrUnavailable), FailureUnavailable},
		{"circuit", bg, NotSent(ErrCircuitOpen), FailureCircuitOpen},
		{"canceled by the caller", canceled, context.Canceled, FailureCanceled},
		{"canceled, caller still there", bg, context.Canceled, FailureOther},
		{"reply", bg, errors.New("CLUSTERDOWN The cluster is down"), FailureOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Classify(tc.ctx, tc.err))
		})
	}
	var names []string
	for _, e := range Failures {
		names = append(names, e.String())
	}
	assert.Equal(t, []string{"timeout", "unavailable", "circuit_open", "other"}, names)
}

// TestNotSentKeepsTheError: an error marked NotSent matches ErrNotSent and
// whatever it matched before, with the same text.
func TestNotSentKeepsTheError(t *testing.T) {
	err := NotSent(fmt.Errorf("waiting: %w", context.Canceled))
	assert.ErrorIs(t, err, ErrNotSent)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "waiting: context canceled", err.Error())
	assert.NotErrorIs(t, context.Canceled, ErrNotSent)
}

// TestCheckResults: a call with one result per op, or an error, is what it
// is; one with another number of results is an error.
func TestCheckResults(t *testing.T) {
	boom := errors.New("boom")
	assert.NoError(t, CheckResults(make([]algorithms.Result, 2), 2, nil))
	assert.Equal(t, boom, CheckResults(nil, 2, boom))
	assert.EqualError(t, CheckResults(make([]algorithms.Result, 1), 2, nil), "rate: limiter returned 1 results for 2 operations")
}
