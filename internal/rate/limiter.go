package rate

import (
	"github.com/ratewarden/ratewarden/internal/algorithms"

	"context"
)

// Limiter applies rate limit operations to a backend's state. The in-memory
// limiter (memory.Limiter) and the Redis limiter (redisx.Limiter) implement it, and
// the service (internal/rls) decides with one.
//
// Do applies ops, each atomically on its own limit's state, and returns one
// Result per Op in the same order. Ops of one call are independent: a denied
// Op does not undo another; the service gives back what a denied request took
// by calling Do again with Refund ops. A Charge op is never denied:
// its hits are recorded, and its Result says whether they kept the limit
// within it. Do returns an error only when the backend could not decide (it is unreachable, slow past ctx's deadline, or
// answered nonsense); then no Result is meaningful.
//
// When err is nil, results has exactly one Result per Op: the layers of the
// request path index it by op, and only the service checks it
// (CheckResults), once per call, where a broken backend would otherwise
// crash a request.
//
// Implementations MUST be safe for concurrent use.
type Limiter interface {
	Do(ctx context.Context, ops []Op) ([]algorithms.Result, error)
}
