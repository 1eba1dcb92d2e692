package algorithms

import (
	"fmt"
	"strings"
	"time"
)

// Algorithm names one of the rate limit algorithms of the table below. The
// zero value is not a valid algorithm; configuration fills in the default.
type Algorithm uint8

// The algorithms, in the order the documentation lists them.
const (
	FixedWindow Algorithm = iota + 1
	SlidingWindowLog
	SlidingWindowCounter
	TokenBucket
)

// Spec is an algorithm's row in the table of algorithms: what the rest of
// ratewarden needs to know of it besides its maths, so that no other package
// asks which algorithm a limit has. Its slices are shared with the table and
// must not be modified.
type Spec struct {
	// Name is the algorithm's name in limits files, settings, metrics and
	// the identities of states (Identity).
	Name string
	// Script is the file under lua/ that holds the algorithm's Redis script,
	// or "" for an algorithm counted on Redis with plain commands (Counter).
	Script string
	// SettleScript is, for an algorithm counted without a script (Counter),
	// the file under lua/ that settles its leases (rate.Op.Leases) on the count
	// of their window.
	SettleScript string
	// Counter reports that the algorithm is counted on Redis as
	// envoyproxy/ratelimit counts: a key per window holding its count,
	// added to with INCRBY, without a script; only the states of limits that
	// owe debts (rate.Op.Debt) are kept whole under the state key, and changed
	// in transactions.
	Counter bool
	// Keys are the Redis keys the script takes, in the order of its KEYS,
	// each as the suffix that follows the limit's hash tag: "" for the
	// state, then any more keys of the same limit (the log's sequence
	// counter). All share the tag, so they live in one cluster slot.
	Keys []string
	// EntryPerHit reports that the state keeps one entry per hit it holds
	// (the log): its Limit.Requests is at most MaxLogRequests, and what one
	// request may take or give back is bounded more tightly.
	EntryPerHit bool
	// Burst reports that a limit may set Limit.Burst, a capacity other than
	// its Requests.
	Burst bool
	// Calendar reports that a limit may count in the calendar's windows
	// (Limit.Calendar).
	Calendar bool
	// Windowed reports that the state counts in windows that start at fixed
	// times (Limit.WindowIndex, Limit.WindowStart): a take counts in the
	// window it was made in, and gives back only there.
	Windowed bool
	// ExactRefund reports how a refund with a receipt applies: it gives back
	// exactly the entries the receipt's take added, and nothing once they
	// are gone, so that sending it twice gives back no more than sending it
	// once (rate.Op.IdempotentRefund). Otherwise a refund adds its hits back to
	// what the state holds, whoever took them.
	ExactRefund bool

	// newState returns a new, empty state (NewState).
	newState func() State
	// lifetime is Limit.Lifetime for a limit of the algorithm.
	lifetime func(Limit) time.Duration
	// maxDebt is how a charge applies: Limit.MaxDebt, the most hits it may
	// leave recorded beyond L.
	maxDebt func(Limit) uint64
	// stateOf reads the state its script tells after a lease's take
	// (StateOf); nil for an algorithm counted without a script.
	stateOf func([]int64) (State, int64, error)
}

// specs is the table of algorithms, indexed by Algorithm; row 0 is the zero
// Spec of every invalid Algorithm. Adding an algorithm adds a constant
// above, a row here, its state and maths (a file of its own), its script
// under lua/, and its documentation; nothing else names an algorithm.
var specs = [...]Spec{
	FixedWindow: {
		Name: "fixed_window", Counter: true, Keys: []string{""}, SettleScript: "fixed_window_settle.lua",
		Calendar: true, Windowed: true,
		newState: func() State { return new(FixedWindowState) },
		lifetime: fixedWindowLifetime, maxDebt: windowDebt,
	},
	SlidingWindowLog: {
		Name: "sliding_window_log", Script: "sliding_window_log.lua", Keys: []string{"", ":seq"},
		EntryPerHit: true, ExactRefund: true,
		newState: func() State { return new(SlidingWindowLogState) },
		lifetime: logLifetime, maxDebt: logDebt, stateOf: logStateOf,
	},
	SlidingWindowCounter: {
		Name: "sliding_window_counter", Script: "sliding_window_counter.lua", Keys: []string{""},
		Windowed: true,
		newState: func() State { return new(SlidingWindowCounterState) },
		lifetime: counterLifetime, maxDebt: windowDebt, stateOf: counterStateOf,
	},
	TokenBucket: {
		Name: "token_bucket", Script: "token_bucket.lua", Keys: []string{""},
		Burst:    true,
		newState: func() State { return new(TokenBucketState) },
		lifetime: bucketLifetime, maxDebt: windowDebt, stateOf: bucketStateOf,
	},
}

// Algorithms lists every valid Algorithm, in the order of the table.
var Algorithms = func() []Algorithm {
	all := make([]Algorithm, 0, len(specs)-1)
	for a := Algorithm(1); int(a) < len(specs); a++ {
		all = append(all, a)
	}
	return all
}()

// Spec returns a's row of the table of algorithms: the zero Spec when a is
// not valid.
func (a Algorithm) Spec() Spec { return *a.spec() }

// spec returns a's row of the table, row 0 when a is not valid.
func (a Algorithm) spec() *Spec {
	if !a.Valid() {
		return &specs[0]
	}
	return &specs[a]
}

// Valid reports whether a is one of the algorithms of the table.
func (a Algorithm) Valid() bool { return a != 0 && int(a) < len(specs) }

// String returns the name used in configuration files, such as "token_bucket".
func (a Algorithm) String() string {
	if a.Valid() {
		return specs[a].Name
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// MarshalText returns the algorithm's configuration name.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("algorithms: no such algorithm %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText sets a to the algorithm of the configuration name text, as
// ParseAlgorithm reads it: the one parser of algorithm names for the limits
// files and the settings.
func (a *Algorithm) UnmarshalText(text []byte) error {
	v, err := ParseAlgorithm(string(text))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// ParseAlgorithm returns the Algorithm with the given configuration name.
func ParseAlgorithm(name string) (Algorithm, error) {
	for _, a := range Algorithms {
		if specs[a].Name == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("algorithms: unknown algorithm %q (want %s)", name, Names(nil))
}

// Names lists, for a message, the names of the algorithms whose row keep
// accepts (every algorithm when keep is nil), in the order of the table:
// "token_bucket", "a or b", "a, b or c".
func Names(keep func(Spec) bool) string {
	var names []string
	for _, a := range Algorithms {
		if keep == nil || keep(specs[a]) {
			names = append(names, specs[a].Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
