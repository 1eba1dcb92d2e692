package server

import "context"

// releases is what a Server holds, as the functions that release it, in
// the order New acquired it: the tracer, the backend, the request path's
// leases, the listeners, the servers. run calls them in the reverse order,
// so that nothing is released while what was acquired after it, and may
// use it, still runs. The same list serves a New that fails part way,
// which releases what its steps acquired so far, and shutdown, which
// releases everything once health says NOT_SERVING and
// RLS_SHUTDOWN_DELAY has passed. It is not safe for concurrent use.
type releases []func(ctx context.Context)

// push adds release, to be called before every release already pushed.
func (r *releases) push(release func(ctx context.Context)) { *r = append(*r, release) }

// run calls every release, the last pushed first, with ctx, which bounds
// the ones that wait; then r is empty.
func (r *releases) run(ctx context.Context) {
	for i := len(*r) - 1; i >= 0; i-- {
		(*r)[i](ctx)
	}
	*r = nil
}
