package redisx

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratewarden/ratewarden/internal/algorithms"
	"github.com/ratewarden/ratewarden/internal/rate"
)

// keySpace builds the Redis keys of every limit under one prefix:
//
//	<prefix>{<identity>}<suffix>          a limit that is not split
//	<prefix>{<identity>#<shard>}<suffix>  shard i of a split limit
//
// where identity is rate.Identity of the limit and the suffixes are
// those its algorithm's script takes (algorithms.Spec.Keys). The hash tag
// holds the identity and the shard, so all keys of one limit (and shard)
// live in one Redis Cluster slot, and different shards of a hot limit spread
// over the cluster. The mapping is injective: the prefix holds no brace and
// the identity holds none, so the first '{' and the first '}' delimit the
// tag; an identity always ends in ":<window seconds>", so a trailing
// "#<digits>" can only be a shard.
type keySpace struct {
	prefix string
}

// newKeySpace returns the key space under prefix, which must not contain a
// brace (it would move or break the hash tag).
func newKeySpace(prefix string) (keySpace, error) {
	if strings.ContainsAny(prefix, "{}") {
		return keySpace{}, fmt.Errorf("redisx: key prefix %q must not contain '{' or '}'", prefix)
	}
	return keySpace{prefix: prefix}, nil
}

// appendKeys appends to dst the number of keys, then the keys of the state
// of the limit of identity id in shard (Unsharded, or a shard number ≥ 0),
// one per suffix: a script's numkeys and KEYS. The keys are parts of one
// string: the last key alone when each suffix starts with the one before
// (as the log's "" and ":seq" do), else all the keys one after the other.
func (s keySpace) appendKeys(dst []any, id string, shard int, suffixes []string) []any {
	var digits [20]byte
	var tagShard []byte
	if shard != Unsharded {
		tagShard = strconv.AppendInt(append(digits[:0], '#'), int64(shard), 10)
	}
	base := len(s.prefix) + 1 + len(id) + len(tagShard) + 1
	nested := true
	for i := 1; i < len(suffixes); i++ {
		nested = nested && strings.HasPrefix(suffixes[i], suffixes[i-1])
	}
	written := suffixes
	if nested {
		written = suffixes[len(suffixes)-1:]
	}
	size := 0
	for _, suffix := range written {
		size += base + len(suffix)
	}
	var b strings.Builder
	b.Grow(size)
	for _, suffix := range written {
		b.WriteString(s.prefix)
		b.WriteByte('{')
		b.WriteString(id)
		b.Write(tagShard)
		b.WriteByte('}')
		b.WriteString(suffix)
	}
	all := b.String()
	dst = append(dst, len(suffixes))
	for _, suffix := range suffixes {
		n := base + len(suffix)
		dst = append(dst, all[:n])
		if !nested {
			all = all[n:]
		}
	}
	return dst
}

// StateKeys is where one shard of a limit keeps its state in Redis.
type StateKeys struct {
	// Shard is the shard, Unsharded for a limit that is not split.
	Shard int
	// Limit is the shard's share of the limit: the limit itself when it is
	// not split.
	Limit algorithms.Limit
	// Keys are the keys an op of the shard reads and writes: its script's
	// KEYS or, for an algorithm counted without a script, the count of the
	// window that holds the time asked about (one key per window), or the
	// whole state's key for a limit that may owe a debt.
	Keys []string
	// Slot is the keys' Redis Cluster hash slot, which they all share.
	Slot int
}

// StateKeys returns where the state of op's limit lives in Redis at now,
// as the Limiter builds the keys: one StateKeys per shard (see Op.Shards;
// a limit too small to split is not), in shard order. It fails when op's
// limit is invalid (algorithms.ErrInvalidLimit).
func (e *Encoder) StateKeys(op *rate.Op, now time.Time) ([]StateKeys, error) {
	if err := op.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("redisx: %w", err)
	}
	n := shardCount(op)
	shards := []int{Unsharded}
	if n > 1 {
		shards = make([]int, n)
		for i := range shards {
			shards[i] = i
		}
	}
	out := make([]StateKeys, 0, len(shards))
	for _, shard := range shards {
		sk := StateKeys{Shard: shard, Limit: shardLimit(op.Limit, n, shard)}
		spec := op.Limit.Algorithm.Spec()
		if spec.Counter && !op.Debt {
			sk.Keys = []string{e.counterCall(op, shard, now.UnixMicro()).key}
		} else {
			for _, k := range e.keys.appendKeys(nil, op.Identity(), shard, spec.Keys)[1:] {
				sk.Keys = append(sk.Keys, k.(string))
			}
		}
		sk.Slot = KeySlot(sk.Keys[0])
		out = append(out, sk)
	}
	return out, nil
}
