package redisx

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// DefaultKeyPrefix is the prefix of every key a Limiter writes unless
// WithKeyPrefix says otherwise.
const DefaultKeyPrefix = "ratewarden:"

// unsharded is the shard number of a limit that is not split.
const unsharded = -1

// seqSuffix ends the key of a sliding window log's sequence counter.
const seqSuffix = ":seq"

// keySpace builds the Redis keys of every limit under one prefix:
//
//	<prefix>{<identity>}<suffix>          a limit that is not split
//	<prefix>{<identity>#<shard>}<suffix>  shard i of a split limit
//
// where identity is algorithms.Identity of the limit. The hash tag holds the
// identity and the shard, so all keys of one limit (and shard) live in one
// Redis Cluster slot, and different shards of a hot limit spread over the
// cluster. The mapping is injective: the prefix holds no brace and the
// identity holds none, so the first '{' and the first '}' delimit the tag; an
// identity always ends in ":<window seconds>", so a trailing "#<digits>" can
// only be a shard.
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

// tag returns the hash tag of the state that l keeps for k in shard
// (unsharded, or a shard number ≥ 0), braces included.
func (s keySpace) tag(k algorithms.Key, l algorithms.Limit, shard int) string {
	return strings.TrimPrefix(s.state(algorithms.Identity(k, l), shard, ""), s.prefix)
}

// state returns the key of the state of the limit of identity id in shard,
// followed by suffix, built in one allocation.
func (s keySpace) state(id string, shard int, suffix string) string {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(id) + 16 + len(suffix))
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.WriteString(id)
	if shard != unsharded {
		var digits [20]byte
		b.WriteByte('#')
		b.Write(strconv.AppendInt(digits[:0], int64(shard), 10))
	}
	b.WriteByte('}')
	b.WriteString(suffix)
	return b.String()
}

// keys returns the KEYS of l's script for k in shard: the state key, and for
// a sliding window log also its sequence counter.
func (s keySpace) keys(k algorithms.Key, l algorithms.Limit, shard int) []string {
	return s.scriptKeys(algorithms.Identity(k, l), l.Algorithm, shard)
}

// scriptKeys is keys for the limit of identity id and algorithm a.
func (s keySpace) scriptKeys(id string, a algorithms.Algorithm, shard int) []string {
	base := s.state(id, shard, "")
	if a == algorithms.SlidingWindowLog {
		return []string{base, base + seqSuffix}
	}
	return []string{base}
}
