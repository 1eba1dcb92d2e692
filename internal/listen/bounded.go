// Package listen holds what the server's listeners do beyond accepting: a
// bound on the connections they hold at once (Bounded), connections
// reserved for the probes past that bound (Reserving, with MarkReserved and
// ProbesOnly for the HTTP server that serves them), and the HTTP servers
// beside the gRPC and HTTP ones (Side). The server binds the addresses the
// settings name and builds its handlers; this package knows neither.
package listen

import (
	"net"

	"golang.org/x/net/netutil"
)

// Bounded returns l accepting at most max connections at a time: past
// that, Accept waits for one to close, and new connections wait in the
// kernel's backlog (and are refused once it is full) instead of costing
// file descriptors.
func Bounded(l net.Listener, max int) net.Listener {
	return netutil.LimitListener(l, max)
}
