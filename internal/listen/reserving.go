package listen

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// reservedConnLife is how long a connection reserved for the probes lives
// from its acceptance: its request must have arrived, and its answer been
// written, by then. Kubernetes gives a probe 1s by default, and sends its
// request as soon as it connects.
const reservedConnLife = time.Second

// reservingListener accepts at most max connections at a time for
// everything, as Bounded does, and beyond them at most reserve more for the
// probes, which it accepts only while the max others are all open. Such a
// reserved connection serves the probes only (see ProbesOnly), one request
// each, and lives at most reservedConnLife: so the probes are answered
// while clients of /json hold every other connection (sending their bodies
// slowly, say), on the port Kubernetes probes, and a client that takes
// reserved connections holds each for a second at most. Past both, new
// connections wait in the kernel's backlog. A connection accepted as
// reserved stays so when others close.
type reservingListener struct {
	net.Listener
	// main and reserve are semaphores: one token per open connection.
	main, reserve chan struct{}
	done          chan struct{}
	closeOnce     sync.Once
}

// Reserving returns l accepting max connections at a time (an HTTP
// server's RLS_HTTP_MAX_CONNECTIONS), and past them reserve more
// (RLS_HTTP_PROBE_CONNECTIONS) for the probes: a reserved connection serves
// one request, within a second of its acceptance, and its requests carry
// the mark of MarkReserved, by which ProbesOnly serves them the probes
// alone. Its Close makes an Accept waiting for room return.
func Reserving(l net.Listener, max, reserve int) net.Listener {
	return &reservingListener{
		Listener: l,
		main:     make(chan struct{}, max),
		reserve:  make(chan struct{}, reserve),
		done:     make(chan struct{}),
	}
}

// Accept waits until a connection may be accepted, then accepts it: as one
// of the max when one of them is free, as a reserved one otherwise.
func (l *reservingListener) Accept() (net.Conn, error) {
	sem, reserved := l.main, false
	select {
	case l.main <- struct{}{}:
	default:
		select {
		case l.main <- struct{}{}:
		case l.reserve <- struct{}{}:
			sem, reserved = l.reserve, true
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-sem
		return nil, err
	}
	if reserved {
		// One of the max may have come free while this one waited.
		select {
		case l.main <- struct{}{}:
			<-l.reserve
			sem, reserved = l.main, false
		default:
		}
	}
	lc := &limitedConn{Conn: c, release: func() { <-sem }}
	if !reserved {
		return lc, nil
	}
	rc := &reservedConn{limitedConn: lc, until: time.Now().Add(reservedConnLife)}
	if err := rc.Conn.SetDeadline(rc.until); err != nil {
		rc.Close()
		return nil, err
	}
	return rc, nil
}

// Close closes the listener; an Accept waiting for room returns.
func (l *reservingListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn gives back its token when it closes.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// reservedConn is a connection reserved for the probes: every deadline set
// on it is brought forward to until.
type reservedConn struct {
	*limitedConn
	until time.Time
}

// by returns the earlier of t and until; the zero t (no deadline) is until.
func (c *reservedConn) by(t time.Time) time.Time {
	if t.IsZero() || t.After(c.until) {
		return c.until
	}
	return t
}

func (c *reservedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.by(t)) }
func (c *reservedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.by(t))
}
func (c *reservedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.by(t))
}

// reservedKey marks, in the context of its requests, a connection reserved
// for the probes.
type reservedKey struct{}

// MarkReserved is the ConnContext of an HTTP server that serves a
// Reserving listener: it marks the requests of reserved connections, over
// TLS too, for ProbesOnly.
func MarkReserved(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if _, ok := c.(*reservedConn); ok {
		return context.WithValue(ctx, reservedKey{}, true)
	}
	return ctx
}

// ProbesOnly serves next the requests of connections that are not reserved
// for the probes (see MarkReserved); on a reserved connection, it serves
// the probe paths and closes the connection after the one answer. Anything
// else there is answered 503 Service Unavailable and its connection closed
// at once, without reading what else it sends: net/http would otherwise
// keep a connection whose request body was left unread open for another
// 500ms, and with it the reservation, so that clients past the cap could
// keep the reserved connections from the probes.
func ProbesOnly(next http.Handler, probes ...string) http.Handler {
	busyMessage := busy(probes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(reservedKey{}) == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if slices.Contains(probes, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor == 1 {
			if conn, buf, err := http.NewResponseController(w).Hijack(); err == nil {
				defer conn.Close()
				fmt.Fprintf(buf, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(busyMessage), busyMessage)
				buf.Flush()
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, busyMessage)
	})
}

// busy returns what a reserved connection answers to anything but the
// probes: "rls: all RLS_HTTP_MAX_CONNECTIONS connections are in use; the
// connections beyond them serve only /healthcheck and /ready".
func busy(probes []string) string {
	return "rls: all RLS_HTTP_MAX_CONNECTIONS connections are in use; the connections beyond them serve only " +
		strings.Join(probes, " and ") + "\n"
}
