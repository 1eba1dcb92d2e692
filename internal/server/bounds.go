package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
)

// maxConnectionAgeGrace is how long calls on a connection that reached
// RLS_GRPC_MAX_CONNECTION_AGE may take to finish before it is closed.
const maxConnectionAgeGrace = 30 * time.Second

// grpcBoundOptions returns the gRPC server options that bound what one
// client can hold: streams per connection, keepalive in both directions,
// idle and (optionally) old connections, the handshake's time, and, through
// guard, the time a call may take to send its request.
func (s Settings) grpcBoundOptions(guard *requestGuard) []grpc.ServerOption {
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
		grpc.StatsHandler(guard),
	}
	return opts
}

// connRegistry remembers the connections a listener accepted that are
// still open, by remote address, so that a stats.Handler, which is told a
// connection's address but not the connection, can close one. Addresses are
// compared as the net.Addr values the connections return, which stay the
// same for a connection's life. It is safe for concurrent use.
type connRegistry struct {
	mu    sync.Mutex
	conns map[net.Addr]net.Conn
}

func newConnRegistry() *connRegistry {
	return &connRegistry{conns: make(map[net.Addr]net.Conn)}
}

// lookup returns the open connection from addr, or nil.
func (r *connRegistry) lookup(addr net.Addr) net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[addr]
}

// boundedListener accepts at most max connections at a time from l: past
// that, Accept waits for one to close, and new connections wait in the
// kernel's backlog (and are refused once it is full) instead of costing
// file descriptors. When reg is not nil, every connection it accepts is
// registered there until it is closed.
func boundedListener(l net.Listener, max int, reg *connRegistry) net.Listener {
	l = netutil.LimitListener(l, max)
	if reg == nil {
		return l
	}
	return &registeringListener{Listener: l, reg: reg}
}

// registeringListener registers the connections it accepts.
type registeringListener struct {
	net.Listener
	reg *connRegistry
}

func (l *registeringListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &registeredConn{Conn: c, reg: l.reg}
	l.reg.mu.Lock()
	l.reg.conns[c.RemoteAddr()] = rc
	l.reg.mu.Unlock()
	return rc, nil
}

// registeredConn leaves its registry when closed.
type registeredConn struct {
	net.Conn
	reg  *connRegistry
	once sync.Once
}

func (c *registeredConn) Close() error {
	c.once.Do(func() {
		c.reg.mu.Lock()
		delete(c.reg.conns, c.Conn.RemoteAddr())
		c.reg.mu.Unlock()
	})
	return c.Conn.Close()
}

// requestGuard bounds the time between a call's headers and its first
// request message (RLS_GRPC_READ_TIMEOUT). gRPC does not run a handler
// before the request has arrived, and offers no way to end one stream that
// never sends it: each such stream holds a goroutine and its buffers for
// as long as the client likes. A connection with a stream that has not
// sent its request within the timeout is closed, with every stream on it;
// a well-behaved client (Envoy sends headers and request together) never
// meets the bound. It is a stats.Handler, safe for concurrent use.
type requestGuard struct {
	timeout time.Duration
	conns   *connRegistry
	log     *slog.Logger
}

// guardKey keys a connection's net.Conn, then a call's timer, in contexts.
type (
	guardConnKey  struct{}
	guardTimerKey struct{}
)

// TagConn records the connection in ctx, for the calls that it carries.
func (g *requestGuard) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if c := g.conns.lookup(info.RemoteAddr); c != nil {
		return context.WithValue(ctx, guardConnKey{}, c)
	}
	return ctx
}

// HandleConn does nothing.
func (g *requestGuard) HandleConn(context.Context, stats.ConnStats) {}

// TagRPC starts the call's timer: unless stopped by the request's arrival
// (or the call's end), it closes the connection.
func (g *requestGuard) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	c, ok := ctx.Value(guardConnKey{}).(net.Conn)
	if !ok {
		return ctx
	}
	method := info.FullMethodName
	timer := time.AfterFunc(g.timeout, func() {
		g.log.Warn("closing a gRPC connection: a call sent no request in time",
			"remote", c.RemoteAddr().String(), "method", method, "timeout", g.timeout)
		c.Close()
	})
	return context.WithValue(ctx, guardTimerKey{}, timer)
}

// HandleRPC stops the call's timer once its request has arrived, or the
// call has ended.
func (g *requestGuard) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InPayload, *stats.End:
		if timer, ok := ctx.Value(guardTimerKey{}).(*time.Timer); ok {
			timer.Stop()
		}
	}
}
