// Package algorithms holds ratewarden's four rate limit algorithms as pure Go
// over explicit state and an explicit clock, and an in-memory Limiter built on
// them.
//
// The code here is the reference: every Lua script under lua/ must give, for
// any sequence of operations and times, the same decision, remaining and
// reset as its twin in this package. The rules below are therefore written
// down exactly, in integer arithmetic, so that a Lua script (whose numbers are
// IEEE doubles, exact only below 2^53) can follow them bit for bit.
//
// # Units and ranges
//
// Times are integer microseconds since the Unix epoch. A limit admits L
// requests (Limit.Requests, 0 ≤ L ≤ MaxRequests) per window W (Limit.Window, a
// whole number of seconds between one second and MaxWindow). A window is cut
// into S = SlicesPerWindow equal slices of q = W/S microseconds; q is a whole
// number because W is a whole number of seconds. The sliding window counter
// and the token bucket measure elapsed time in whole slices, which gives them
// microsecond resolution for one-second windows and one part in a million of
// the window for longer ones, with every intermediate value below 2^53.
//
// A request asks for n ≥ 0 hits; n = 0 checks without consuming. A request for
// more hits than the limit can ever hold (n > L, or n > B for the token
// bucket) is denied, consumes nothing and reports a reset of one window W.
//
// Every algorithm reports, with its decision:
//   - remaining: how many more hits would be admitted now;
//   - reset: when denied, the exact wait after which the same request would be
//     admitted if nothing else happened (waiting one microsecond less is not
//     enough); when admitted, the wait until the limit is fully replenished
//     (zero when it already is).
//
// # fixed_window
//
// State: the window index w and the count c. Let i = max(⌊now/W⌋, w); if
// i > w the state restarts at (i, 0), so a clock that went backwards keeps
// counting in the current window. Admit iff c + n ≤ L, then c += n. remaining =
// L − c (0 if c > L). reset = (i+1)·W − now, except that an admitted request
// leaving c = 0 reports 0. Give-back with a receipt taken at time a subtracts
// from c only while ⌊a/W⌋ = w; without a receipt it subtracts from c. The
// state can be dropped at (w+1)·W.
//
// # sliding_window_log
//
// State: one entry (ts, seq) per admitted hit, ordered by ts then seq, and the
// last sequence number issued. Entries with ts ≤ now − W are dropped; c is the
// number left. Admit iff c + n ≤ L; then n entries (now, seq+1 … seq+n) are
// added and the receipt remembers seq+1. remaining = L − c. When denied,
// reset = ts_k + W − now where ts_k is the timestamp of the k-th oldest entry,
// k = c + n − L. When admitted, reset = newest ts + W − now (0 when empty).
// Give-back of n hits with a receipt (a, Seq) removes the entries
// (a, Seq) … (a, Seq+n−1) that are still logged; give-back without one
// removes the n newest entries. Denied hits are never logged, and two hits in
// the same microsecond are two entries. Dropping an empty log restarts the
// sequence at 1.
//
// # sliding_window_counter
//
// State: the window index w, this window's count cur and the previous
// window's count prev. Let i = max(⌊now/W⌋, w). If i = w+1 then prev = cur,
// cur = 0; if i > w+1 both restart at 0. The elapsed slice is
// s = ⌊(now − i·W)/q⌋ clamped to [0, S−1]. The previous window weighs
// (S−s)/S, so admit iff cur + n ≤ L and prev·(S−s) ≤ (L−cur−n)·S; then
// cur += n. remaining = L − cur − ⌈prev·(S−s)/S⌉ (0 if negative). When
// admitted, reset = (i+2)·W − now if cur > 0, else (i+1)·W − now if prev > 0,
// else 0. When denied, the wait is to the first slice boundary at which the
// estimate admits n: if cur + n ≤ L, slice s' = S − ⌊(L−cur−n)·S/prev⌋ of
// window i (s' = S meaning the start of window i+1); otherwise slice
// s' = S − ⌊(L−n)·S/cur⌋ of window i+1 (s' = S meaning window i+2). Give-back
// with a receipt taken at time a subtracts from cur if ⌊a/W⌋ = w, from prev if
// ⌊a/W⌋ = w−1, else from nothing; without a receipt it subtracts from cur,
// then what cur cannot cover from prev. The state can be dropped at (w+2)·W.
//
// # token_bucket
//
// The bucket holds up to B tokens (Limit.Burst, default L) and refills L
// tokens per window. Its level is kept in millionths of a token: capacity
// C = B·S, and each whole slice adds L. State: the level and the slice index t
// of the last refill; a new bucket is full. First the level becomes
// min(level, C), so a lowered burst applies at once. Then at slice
// τ = ⌊now/q⌋ > t the level becomes C if τ−t ≥ ⌈(C−level)/L⌉, else
// level + (τ−t)·L, and t = τ (a clock that went backwards refills nothing and
// leaves t as it is). Admit iff level ≥ n·S, then level −= n·S. remaining =
// ⌊level/S⌋. When admitted, reset = (t + ⌈(C−level)/L⌉)·q − now (0 when
// full). When denied, reset = (t + ⌈(n·S−level)/L⌉)·q − now, and the state
// stays as it was before the refill: a denial changes nothing, so the next
// call refills from the same t (at the rate the limit has then). Give-back
// adds n·S up to C. A token bucket with L = 0 never refills, so it must have
// B = 0, and any bucket must refill from empty within MaxWindow
// (B·W ≤ L·MaxWindow). The state can be dropped once the bucket is full
// again, as computed at its last change under the limit of that change.
//
// # Receipts
//
// An admitted take, even of 0 hits, returns a receipt: the time of the
// decision and, for the log, the sequence number of its first entry. A
// receipt whose time and sequence number are both 0 means "no receipt".
package algorithms
