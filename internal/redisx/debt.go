package redisx

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// owes reports whether op goes to the state key of a counted limit whose
// state may owe a debt (see counter.go), rather than to its window's count.
func owes(op *rate.Op) bool { return op.Debt && op.Limit.Algorithm.Spec().Counter }

// maxTxAttempts bounds how often a transaction on a state in debt is tried
// again after another op changed the state under it.
const maxTxAttempts = 16

// errContended is the error of an op on a state in debt that other ops kept
// changing through every attempt.
var errContended = errors.New("redisx: the state kept changing under its transaction")

// doDebt applies op, on shard, to the whole state of its limit kept under
// the limit's state key: it reads the state, applies the Go state's maths at
// now, and writes what changed in a transaction that fails, to be tried
// again, when another op changed the key meanwhile. An op that changes
// nothing writes nothing.
func (l *Limiter) doDebt(ctx context.Context, op *rate.Op, shard int) (algorithms.Result, error) {
	lim := shardLimit(op.Limit, shardCount(op), shard)
	one := *op
	one.Limit = lim
	key := l.enc.keys.appendKeys(nil, op.Identity(), shard, []string{""})[1].(string)
	for range maxTxAttempts {
		var res algorithms.Result
		err := l.client.Watch(ctx, func(tx *redis.Tx) error {
			fields, err := tx.HMGet(ctx, key, "w", "c", "e", "x").Result()
			if err != nil {
				return err
			}
			st, err := fixedWindowState(fields)
			if err != nil {
				return fmt.Errorf("redisx: %s: %w", key, err)
			}
			now := time.UnixMicro(l.micros())
			if !st.Expiry(lim).After(now) {
				st = algorithms.FixedWindowState{} // new again, as the memory backend drops it
			}
			before := st
			res = rate.Apply(&st, &one, now)
			if st == before {
				return nil
			}
			expiry := st.Expiry(lim)
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if !expiry.After(now) {
					p.Del(ctx, key)
					return nil
				}
				w, c, e, x := st.Fields()
				p.HSet(ctx, key, "w", w, "c", c, "e", e, "x", x)
				// Relative to the op's now, which Redis's clock need not
				// be (see WithClock).
				ttl := (expiry.Sub(now) + time.Millisecond - 1).Truncate(time.Millisecond) // in whole ms, rounded up
				p.PExpire(ctx, key, ttl+l.slack)
				return nil
			})
			return err
		}, key)
		switch {
		case errors.Is(err, redis.TxFailedErr):
			continue
		case err != nil:
			return algorithms.Result{}, runError(op.Limit.Algorithm.String(), err)
		}
		if res.Allowed && op.Kind == rate.Take && shard != Unsharded {
			res.Receipt.Shard = uint32(shard)
		}
		return res, nil
	}
	return algorithms.Result{}, errContended
}

// fixedWindowState reads a state from the fields w, c, e and x of its hash;
// a missing hash is a new state.
func fixedWindowState(fields []any) (algorithms.FixedWindowState, error) {
	var n [4]int64
	for i, f := range fields {
		if f == nil {
			continue
		}
		s, ok := f.(string)
		if !ok {
			return algorithms.FixedWindowState{}, fmt.Errorf("field %d is %T, not a number", i, f)
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return algorithms.FixedWindowState{}, fmt.Errorf("field %d: %w", i, err)
		}
		n[i] = v
	}
	if n[1] < 0 || n[2] < 0 {
		return algorithms.FixedWindowState{}, fmt.Errorf("negative count %d or debt %d", n[1], n[2])
	}
	return algorithms.FixedWindowStateOf(n[0], uint64(n[1]), uint64(n[2]), n[3]), nil
}
