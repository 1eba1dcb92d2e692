// Package algorithms holds ratewarden's four rate limit algorithms as pure Go
// over explicit state and an explicit clock: the maths, and what it answers
// (Result, Receipt) and settles (Lease). The request path's vocabulary, the
// operations the backends (internal/memory, internal/redisx) apply with it
// and their Limiter interface, is package rate's. The table of algorithms (Spec, in algorithm.go) says, per algorithm, its name,
// state, script and keys, and how refunds and charges apply: the rest of
// ratewarden asks the table, never which algorithm a limit has.
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
// A charge (see Charges) is never denied: it records its hits.
//
// Every algorithm reports, with its decision:
//   - remaining: how many more hits would be admitted now;
//   - reset: when denied, the exact wait after which the same request would be
//     admitted if nothing else happened (waiting one microsecond less is not
//     enough); when admitted, the wait until the limit is fully replenished
//     (zero when it already is).
//
// # Charges
//
// A charge records n hits of usage already spent: it is never denied, and
// what it records beyond L is a debt that later windows, or the bucket's
// refill, pay off at L per W. The debt is at most D (Limit.MaxDebt): L for
// the sliding window log, min(MaxRequests, L·⌊MaxWindow/W⌋) for the others,
// so every debt is paid within MaxWindow; a charge records no more than D
// beyond L, and forgets the rest. A limit of L = 0 pays nothing, so D = 0.
// Only charges make debts: a limit lowered under hits it admitted does not.
// Counts stay at most L + D ≤ 2·MaxRequests < 2^33, so prev·S and
// (B + D)·S stay below 2^53, and a charge of n > L + D hits (B + D for the
// bucket) is recorded and answered as one of L + D + 1 (B + D + 1).
//
// A charge's Result is allowed iff a take of the same n would have been
// admitted just before it (the limit stayed within L: envoyproxy/ratelimit's
// OK); its remaining and reset are those a check (n = 0) reports just after
// it. So while the limit is in debt the reset is the exact wait until a check
// is admitted again, and otherwise the wait until the limit is fully
// replenished. A charge has no receipt. A check is admitted while the
// recorded hits are at most L (the token bucket: while its level is not
// below zero), and denied once they exceed it.
//
// # Records
//
// A record is a charge that owes nothing: it records its hits as a charge
// does (up to L + D, and is answered as a charge is), but what it records
// beyond L counts only as long as any hit counts, as envoyproxy/ratelimit
// counts every hit, and is then forgotten. A fixed window and a sliding
// window counter add the hits to the count (c or cur) and leave e as it is,
// so the excess ends with the window (the counter's previous window weighs
// it as it weighs every hit); the sliding window log logs them as a charge
// does; the token bucket takes them down to −min(D, L) tokens only (a
// bucket already lower keeps its level), so one window's refill pays them
// off.
//
// # fixed_window
//
// State: the window index w, the count c and the debt e ≤ c, the part of c
// that charges recorded beyond L. Every operation first lowers e to
// min(e, max(0, c − L), D). Let i = max(⌊now/W⌋, w); if i > w the state
// moves to window i one window at a time, each new window starting with the
// debt: (c, e) ← (e, max(0, e − L)). So window w + j starts at
// c = max(0, e − (j−1)·L), with e = max(0, e − j·L) (each formed only when
// the product is below e). Without a debt this restarts the state at (i, 0);
// a clock that went backwards keeps counting in the current window. Admit
// iff c + n ≤ L, then c += n. remaining = L − c (0 if c > L). When denied
// (n ≤ L), reset = (i+j)·W − now for the first window i + j whose starting
// count leaves room for n: j = 1 when e + n ≤ L, else 1 + ⌈(e + n − L)/L⌉.
// When admitted, reset = (i + 1 + ⌈e/L⌉)·W − now, the end of the last
// window the debt reaches (e = 0 after an admitted take), or 0 when c = 0.
// A charge first notes whether c + n ≤ L (and n ≤ L), then records
// k = min(n, max(0, L + D − c)) hits: e += max(0, c + k − max(c, L)),
// c += k. Give-back with a receipt taken at time a subtracts from c only
// while ⌊a/W⌋ = w; without a receipt it subtracts from c; then
// e = min(e, max(0, c − L)). The state can be dropped at once when c = 0,
// else at (w + 1 + ⌈e/L⌉)·W, as computed when it last changed (under the
// limit of that change: a denial in the same window changes nothing).
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
// removes the n newest entries with ts ≤ now (those after now are leases',
// below, which may serve them later). Denied hits are never logged, and two hits in
// the same microsecond are two entries. Dropping an empty log restarts the
// sequence at 1. A charge logs min(n, max(0, 2L − c)) entries at now, as a
// take would (D = L: the log never holds more than 2L entries, and a debt
// lasts until its entries leave the window, W after the charge); while
// c > L a check waits for the (c − L)-th oldest entry to leave.
//
// A lease's take, with a hold h > 0 (rate.Op.Hold: the lease serves its hits
// until its holder settles it, before now + h), is decided at now as any
// take: the entries in (now − W, ∞) count, those other leases logged in the
// future too, and it is admitted iff c + n ≤ L. Its n entries are logged at
// now + h instead of now, (now + h, seq+1 … seq+n), in order among the
// entries (by ts, then seq), and its receipt's time is now + h. A
// settlement of the lease moves each entry it served, by sequence number,
// from now + h to the time it was served (dropped if that has left the
// window), and, when the lease closes, removes the others; only entries
// still logged at now + h move or go, so a settlement of a lease the log
// lost, or settled already, changes nothing. Until settled, no leased hit
// leaves the window before a hit served from the lease would have, had it
// been logged when served. A log that holds nothing starts its sequence
// numbers again at now: they grow slower than the clock, so they never meet
// those of a log it replaced. remaining, reset (newest ts + W − now, the
// newest entry possibly in the future) and the state's expiry follow from
// the log as it then is.
//
// # sliding_window_counter
//
// State: the window index w, this window's count cur, the previous window's
// count prev and the debt e ≤ cur, the part of cur that charges recorded
// beyond L. Every operation first lowers e to min(e, max(0, cur − L), D).
// Let i = max(⌊now/W⌋, w). The state moves to window i one window at a
// time, each new window taking the debt as its count and leaving the rest
// of cur to the previous window: (prev, cur, e) ← (cur − e, e,
// max(0, e − L)). So at i = w+1, prev = cur − e, cur = e; at i = w + j,
// j ≥ 2, cur = max(0, e − (j−1)·L) and prev = max(0, e − (j−2)·L) − cur;
// then e = max(0, e − j·L) (each product formed only when below e). Without
// a debt, i = w+1 makes prev = cur, cur = 0, and i > w+1 restarts both at 0.
// The elapsed slice is s = ⌊(now − i·W)/q⌋ clamped to [0, S−1]. The previous
// window weighs (S−s)/S, so admit iff cur + n ≤ L and
// prev·(S−s) ≤ (L−cur−n)·S; then cur += n. remaining =
// L − cur − ⌈prev·(S−s)/S⌉ (0 if negative). When admitted, reset =
// (i + 2 + ⌈e/L⌉)·W − now if cur > 0, else (i+1)·W − now if prev > 0, else
// 0. When denied, the wait is to the first slice boundary at which the
// estimate admits n: if cur + n ≤ L (then e = 0 and prev > 0), slice
// s' = S − ⌊(L−cur−n)·S/prev⌋ of window i (s' = S meaning the start of
// window i+1); otherwise slice s' = S − ⌊(L − c_m − n)·S/p_m⌋ of window
// i + m (s' = S meaning window i + m + 1), the first window whose count
// c_m = max(0, e − (m−1)·L) leaves room for n: m = 1 when e + n ≤ L, with
// p_1 = cur − e, else m = 1 + ⌈(e + n − L)/L⌉, with
// p_m = min(L, e − (m−2)·L). Without a debt this is slice
// S − ⌊(L−n)·S/cur⌋ of window i+1. A charge first notes whether a take of
// n would be admitted, then records k = min(n, max(0, L + D − cur)) hits:
// e += max(0, cur + k − max(cur, L)), cur += k. Give-back with a receipt
// taken at time a subtracts from cur if ⌊a/W⌋ = w, from prev if
// ⌊a/W⌋ = w−1, else from nothing; without a receipt it subtracts from cur,
// then what cur cannot cover from prev; then e = min(e, max(0, cur − L)).
// The state can be dropped at (w + 2 + ⌈e/L⌉)·W while cur > 0 (as computed
// when it last changed, under the limit of that change), at (w+1)·W while
// only prev > 0, and at once when both are 0.
//
// # token_bucket
//
// The bucket holds up to B tokens (Limit.Burst, default L) and refills L
// tokens per window. Its level is kept in millionths of a token: capacity
// C = B·S, and each whole slice adds L. Charges may leave it below zero,
// down to −D·S: the bucket is then in debt until its refill brings it back
// to zero. State: the level and the slice index t of the last refill; a new
// bucket is full. First the level becomes max(min(level, C), −D·S) (C − H
// with leases, below), so a lowered burst applies at once. Then at slice
// τ = ⌊now/q⌋ > t the level becomes C if τ−t ≥ ⌈(C−level)/L⌉, else
// level + (τ−t)·L, and t = τ (a clock that went backwards refills nothing and
// leaves t as it is). Admit iff level ≥ n·S, then level −= n·S. remaining =
// ⌊level/S⌋ (0 while in debt). When admitted, reset =
// (t + ⌈(C−level)/L⌉)·q − now (0 when full). When denied, reset =
// (t + ⌈(n·S−level)/L⌉)·q − now, and the state stays as it was before the
// refill: a denial changes nothing, so the next call refills from the same t
// (at the rate the limit has then). A charge first notes whether
// level ≥ n·S (and n ≤ B), then sets level = level − n·S, or −D·S when that
// is lower (comparing n·S with level + D·S). Give-back adds n·S up to C,
// less what leases hold (level = min(C − H, level + n·S), H below; H = 0
// without leases). A token bucket with L = 0
// never refills, so it must have B = 0, and any bucket must refill from
// empty within MaxWindow (B·W ≤ L·MaxWindow). The state can be dropped once
// the bucket is full again, as computed at its last change under the limit
// of that change.
//
// Leases. Tokens a lease takes at t0 are served until its holder settles
// it, before t0 + h (its hold, rate.Op.Hold); were the bucket to refill to full
// meanwhile, others could take a whole burst while the lease still serves
// its tokens. So the bucket holds them, grouped by when they stop being
// held: the state also keeps up to G = 9 groups (h_i, u_i), h_i tokens (in
// millionths) held until u_i (µs), in order of u_i, H = Σ h_i, and
// level + H ≤ C at every step. A lease's take of n is decided as any take
// (level ≥ n·S); when admitted, level −= n·S, and if n > 0 its n·S tokens
// are held until its end rounded up to a slot of g = ⌈h/(G − 1)⌉,
// u = ⌈(now + h)/g⌉·g: added to the group with u_i = u, or else a new group
// (u), or, with G groups already, to the first with u_i > u, or else to the
// last, which then ends at u. A group's u only moves later. The first step
// of every operation holds no more than C (what is beyond it, the earliest
// groups hold no longer; only a lowered burst leaves more) and sets
// level = min(level, C − H), then max(level, −D·S). The refill is then
// capped by group: for each group in order, up to slice m_i = min(τ,
// max(m_{i−1}, ⌈u_i/q⌉ − 1)), the last that starts before u_i (m_0 = t),
// level = min(C − Σ_{j≥i} h_j, level + (m_i − m_{i−1})·L), then on to slice
// τ up to C as above: a slice that starts before a group's end refills only
// up to C less what that group and the later ones hold. Then the groups with
// u_i ≤ now are dropped. While groups hold tokens, the state notes the slice
// f from which the level has been at its cap C − H (capped): every slice
// boundary since f cut a whole refill L. A bucket full again as of its last
// change is a new one, whose epoch (the time of its first lease, named by
// its leases' receipts) is 0.
//
// A settlement of leases (rate.Op.Leases) applies to the leases whose receipts
// name the bucket's epoch and that still last (now < a + h): each holds
// the tokens it served since its last settlement no more, nor, when it
// closes, the tokens it did not serve, which go back, all taken from the
// first group with u_i ≥ a + h (h_i = max(0, h_i − x·S)). The bucket gets
// back, besides the unused tokens, what its cap kept out since the served
// tokens were served: for the served runs (at, n) in order of time, the
// least, over the boundaries b > f at which a served token was first not
// yet served, of the tokens served before b plus L for each boundary from b
// to the current slice τ, of L·(τ − f), and of the tokens served before
// slice τ; all of it up to C − H. Then capped restarts at τ when the level
// is at its cap, so the next settlement claims only what the boundaries
// since cut: the leases of several holders never claim one refill twice,
// and one holder's settlements give it back exactly. A settlement of a
// lease that has ended, or of another epoch, changes nothing: its tokens
// left the hold when its group ended, and the bucket may have refilled
// where they were. The waits follow the capped refill: the bucket holds
// want > level at slice b + ⌈(want − level_b)/L⌉, where b is t while
// want ≤ C − H, and otherwise m_i = max(b_{i−1}, ⌈u_i/q⌉ − 1) for the last
// group i with want > C − Σ_{j≥i} h_j, level_b being what the capped refill
// reaches there; so while H > 0, the bucket is full again (its reset when
// admitted, and when the state can be dropped) only after the last u_i. A
// denial, as always, changes nothing.
//
// The windows count a lease's take as a take; a lease's receipt names the
// state's epoch (the fixed window: the window's count; the counter: the
// state, new again once both its counts are 0), and a settlement gives
// back, as a refund by its receipt does, what each closing lease of that
// epoch did not serve.
//
// # Receipts
//
// An admitted take, even of 0 hits, returns a receipt: the time of the
// decision and, for the log, the sequence number of its first entry. A
// receipt whose time and sequence number are both 0 means "no receipt". A
// charge returns none: nothing gives a charge back but an explicit refund.
package algorithms
