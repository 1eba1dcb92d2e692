package rate

import (
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// Apply applies op to st at now, as its Kind asks: a settlement of leases
// (whose Result says only that it was applied), a refund, a charge (one
// that owes with Op.Debt, a record without), or a take (a lease's with a
// hold, Op.Leasing).
func Apply(st algorithms.State, op *Op, now time.Time) algorithms.Result {
	switch op.Kind {
	case Settle:
		st.Settle(op.Limit, now, op.Leases)
		return algorithms.Result{Allowed: true}
	case Refund:
		return st.Refund(op.Limit, now, op.Hits, op.Receipt)
	case Charge:
		if op.Debt {
			return st.Charge(op.Limit, now, op.Hits)
		}
		return st.Record(op.Limit, now, op.Hits)
	}
	if hold := op.HoldMicros(); hold > 0 {
		return st.Lease(op.Limit, now, op.Hits, time.Duration(hold)*time.Microsecond)
	}
	return st.Take(op.Limit, now, op.Hits)
}
