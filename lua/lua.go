// Package lua holds ratewarden's Redis scripts, one per rate limit algorithm
// that Redis counts with a script (the fixed window is counted with plain
// commands, see redisx), embedded into the binary. The table of algorithms (algorithms.Spec) names
// each algorithm's script and the keys it takes, and redisx.Encoder encodes
// every call of one.
//
// Every script (prelude.lua's helpers, then its own file) follows
// internal/algorithms/doc.go exactly, bit for bit with
// the Go code there: every number it forms is an integer below 2^53, which
// Lua's doubles hold exactly. Each script takes one limit's keys, which share
// one hash tag, and these arguments:
//
//	ARGV[1]  "take" to consume hits, "charge" to record hits already spent
//	         (even past the limit, as a debt), "record" to record them as a
//	         charge does but owing nothing past the window, "refund" to give
//	         them back, "settle" to settle leases
//	ARGV[2]  now in microseconds since the Unix epoch, or "" for Redis TIME
//	ARGV[3]  L, the requests per window
//	ARGV[4]  W, the window in microseconds
//	ARGV[5]  n, the hits, below 2^33
//	ARGV[6]  refund: the receipt's time in microseconds, or "" without one
//	ARGV[7]  refund: the receipt's sequence number (sliding_window_log)
//	ARGV[8]  B, the bucket's capacity in tokens (token_bucket)
//	ARGV[9]  milliseconds to keep every key past the time its state needs
//	ARGV[10] D, the most hits a charge may leave recorded beyond L
//	         (algorithms.Limit.MaxDebt)
//	ARGV[11] take: a lease's hold h in µs (rate.Op.Hold), up to
//	         algorithms.MaxHold, absent for an ordinary take: the lease
//	         serves its hits until now + h; sliding_window_log logs them at
//	         now + h, token_bucket holds its tokens until then (rounded up
//	         to an eighth of h, in groups of leases by their ends).
//	         refund: the receipt's epoch, or absent.
//	         settle: the number of leases, each followed by eight numbers
//	         (receipt time, receipt seq, receipt epoch, hold, size,
//	         reported, close as 0 or 1, and the number of runs served) and
//	         its runs (time, first sequence number, hits) (algorithms.Lease)
//
// Each answers an array of integers that starts with these six:
//
//	{allowed (0 or 1), remaining, reset in µs, at in µs, seq, epoch}
//
// where at is the time of the receipt of an admitted take: now, or for a
// lease's take of a sliding_window_log, now + h, where its hits are logged;
// seq is, for an admitted sliding_window_log take, the sequence number of
// its first entry, and 0 otherwise; epoch is, for an admitted lease's take,
// the epoch its receipt names, and 0 otherwise. A charge (or record) is
// always recorded; its allowed says whether a take of its hits would have
// been admitted, and its remaining and reset are those of a check made just
// after it. After an admitted lease's take, the state follows, as each
// script says: what its holder needs to answer as the state would while it
// serves the lease.
//
// fixed_window_settle.lua settles the leases of a fixed window, whose counts
// are kept without a script (see redisx): KEYS[1] is the count of the
// leases' window, and ARGV is as above.
//
// A script deletes its keys as soon as their state behaves as a new one, and
// otherwise sets them to expire when it will (plus ARGV[9]), so idle limits
// vanish on their own.
package lua

import (
	"embed"
	"fmt"
)

//go:embed *.lua
var files embed.FS

// prelude is the file of helpers every script starts with.
const prelude = "prelude.lua"

//go:embed prelude.lua
var preludeSource string

// Source returns the text of the named script, such as "token_bucket.lua",
// with the helpers of prelude.lua in front of it, ready for EVAL. It is safe
// for concurrent use.
func Source(name string) (string, error) {
	if name == prelude {
		return "", fmt.Errorf("lua: %s is not a script", name)
	}
	body, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("lua: %w", err)
	}
	return Prelude() + "\n" + string(body), nil
}

// Prelude returns the helpers every script starts with: exact floor and
// ceiling division (fdiv, cdiv), integer formatting (int), the clock (clock),
// key expiry (expire), and the debts of charges (paid, charged).
func Prelude() string { return preludeSource }
