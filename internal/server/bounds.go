package server

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/tap"

	"github.com/ratewarden/ratewarden/internal/rls"
	"github.com/ratewarden/ratewarden/internal/settings"
)

// maxConnectionAgeGrace is how long calls on a connection that reached
// RLS_GRPC_MAX_CONNECTION_AGE may take to finish before it is closed.
const maxConnectionAgeGrace = 30 * time.Second

// grpcBoundOptions returns the gRPC server options that bound what one
// client can hold: streams per connection, keepalive in both directions,
// idle and (optionally) old connections, the handshake's time, calls open
// at once, and the time a call may take to send its request.
func grpcBoundOptions(s settings.Settings) []grpc.ServerOption {
	guard := &requestGuard{timeout: s.GRPCReadTimeout, maxCalls: int64(s.GRPCMaxCalls)}
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(s.GRPCMaxConcurrentStreams),
		grpc.ConnectionTimeout(s.GRPCReadTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             s.GRPCKeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     s.GRPCMaxConnectionIdle,
			MaxConnectionAge:      s.GRPCMaxConnectionAge,
			MaxConnectionAgeGrace: maxConnectionAgeGrace,
			Time:                  s.GRPCKeepaliveTime,
			Timeout:               s.GRPCKeepaliveTimeout,
		}),
		grpc.InTapHandle(guard.tap),
		grpc.ChainUnaryInterceptor(guard.unary),
		grpc.ChainStreamInterceptor(guard.stream),
	}
	return opts
}

// requestGuard bounds the time between a call's headers and its request
// message: RLS_GRPC_READ_TIMEOUT, or busyReadTimeout while more than
// RLS_GRPC_MAX_CALLS calls are open on all connections. gRPC runs no
// handler before the request has arrived, and a stream that never sends it
// would hold a goroutine and its buffers for as long as the client likes.
// The guard gives each call without an earlier deadline of its own a timer
// in its context, from the tap that sees its headers on, that cancels the
// call unless its request arrives first: for a unary call, the interceptor
// runs once it has; for a streaming call, the first received message stops
// it. A well-behaved client (Envoy sends headers and request together)
// never meets the bound. It is safe for concurrent use.
type requestGuard struct {
	timeout time.Duration
	// maxCalls is RLS_GRPC_MAX_CALLS: past that many calls open on all
	// connections, a new call gets busyReadTimeout to send its request.
	maxCalls int64
	open     atomic.Int64
}

// busyReadTimeout is how long a call may take to send its request while
// RLS_GRPC_MAX_CALLS calls are open: time enough for a client that sends
// headers and request together, as Envoy does, and little for one that
// does not. (Refusing such calls outright would be simpler, but gRPC leaks
// a little memory on every call its tap handle refuses, until the
// connection closes.)
const busyReadTimeout = 10 * time.Millisecond

// errNoRequest ends a call that sent no request in time.
var errNoRequest = errors.New("server: no request within RLS_GRPC_READ_TIMEOUT of the call's headers")

// requestTimerKey keys a call's timer in its context.
type requestTimerKey struct{}

// tap marks the call's arrival (see rls.WithArrival) and starts its timer;
// it runs on the connection's reader, for every call, as soon as its
// headers are read and before its request is.
func (g *requestGuard) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx = rls.WithArrival(ctx, time.Now())
	timeout := g.timeout
	if g.open.Add(1) > g.maxCalls {
		timeout = busyReadTimeout
	}
	// gRPC cancels a call's context when the call ends, however it ends.
	context.AfterFunc(ctx, func() { g.open.Add(-1) })
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= timeout {
		// The client's own deadline (grpc-timeout, which Envoy always
		// sends) ends the call sooner: nothing to add.
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(timeout, func() { cancel(errNoRequest) })
	return context.WithValue(ctx, requestTimerKey{}, timer), nil
}

// stopTimer stops the timer of the call whose context ctx is.
func stopTimer(ctx context.Context) {
	if timer, ok := ctx.Value(requestTimerKey{}).(*time.Timer); ok {
		timer.Stop()
	}
}

// unary stops the timer: a unary call's interceptors run once its request
// has arrived.
func (g *requestGuard) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	stopTimer(ctx)
	return handler(ctx, req)
}

// stream stops the timer when the call's first message arrives.
func (g *requestGuard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &firstMessageStream{ServerStream: ss})
}

// firstMessageStream stops its call's timer at the first message received.
type firstMessageStream struct {
	grpc.ServerStream
	received bool
}

func (s *firstMessageStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && !s.received {
		s.received = true
		stopTimer(s.Context())
	}
	return err
}
